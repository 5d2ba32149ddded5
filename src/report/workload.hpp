#pragma once

// The workload's shape in a report: figures per prompt category and the
// request length histograms, read from the variants' result.json (report.cpp
// builds the rest of the model).

#include <specctl/report/report.hpp>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace specctl::report::detail {

// A benchmark's entry in a variant's result, whatever its status (its figures are
// shown, its verdicts only when it ran to the end); null without one.
const nlohmann::json* benchmark_entry(const RunData& data, const std::string& variant, const std::string& benchmark);

// Where a holder's accept length came from ("server log lines", "/metrics
// counters", "response timings"), from its accept_length_source; empty without one.
std::string accept_source_text(const nlohmann::json& holder);

// A single-stream benchmark's figures per category; nullopt when no variant has them.
std::optional<CategoryTable> single_stream_categories(const RunData& data, const SingleStreamTable& table);

// A levels benchmark's figures per category: a table per level at which some
// variant has them, its repeats averaged.
std::vector<CategoryTable> level_categories(const RunData& data, const LevelsTable& table);

// The baseline's request length histograms of a benchmark, or the first
// variant's (in `variants` order) that has them; nullopt when none has.
std::optional<LengthHistograms> length_histograms(const RunData& data, const std::string& benchmark,
                                                  const std::vector<std::string>& variants,
                                                  const std::string& baseline);

} // namespace specctl::report::detail
