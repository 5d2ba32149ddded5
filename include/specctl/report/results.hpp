#pragma once

// The layout of a run's result folder and the figures in it, shared by
// `specctl run` (which writes them) and the report (which reads them).
//
//   DIR/run.json                       what ran: experiment, its content hash, variants
//   DIR/experiment.yaml                the experiment file as given
//   DIR/experiment.json                the resolved experiment (the plan)
//   DIR/journal.jsonl                  every phase, appended and fsynced
//   DIR/provenance.json                specctl version, hosts, exact commands, templates
//   DIR/report.md, report.csv, report.json, report.html, junit.xml   the report (report.hpp)
//   DIR/variants/NAME/result.json      one variant, written atomically
//   DIR/variants/NAME/server.log       its server's log, copied back
//   DIR/variants/NAME/requests-BENCH.jsonl   every request of a built-in benchmark

#include <specctl/bench/result.hpp>
#include <specctl/experiment/experiment.hpp>

#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace specctl::report {

inline constexpr const char* k_run_format = "specctl-run";
inline constexpr const char* k_result_format = "specctl-variant-result";
// Bumped whenever a field changes meaning or disappears; adding fields keeps it.
inline constexpr int k_results_version = 1;

struct ResultPaths {
  std::filesystem::path dir;

  std::filesystem::path run_info() const { return dir / "run.json"; }
  std::filesystem::path experiment_copy() const { return dir / "experiment.yaml"; }
  std::filesystem::path resolved() const { return dir / "experiment.json"; }
  std::filesystem::path provenance() const { return dir / "provenance.json"; }
  std::filesystem::path variant_dir(const std::string& variant) const { return dir / "variants" / variant; }
  std::filesystem::path result(const std::string& variant) const { return variant_dir(variant) / "result.json"; }
  std::filesystem::path server_log(const std::string& variant) const { return variant_dir(variant) / "server.log"; }
  std::filesystem::path requests(const std::string& variant, const std::string& benchmark) const {
    return variant_dir(variant) / ("requests-" + benchmark + ".jsonl");
  }
};

// j[k1][k2]... without creating anything: null when any step is missing.
const nlohmann::json& dig(const nlohmann::json& j, std::initializer_list<std::string_view> keys);

// NaN and infinity are not JSON: a figure that could not be measured is null.
nlohmann::json finite_or_null(double value);

// A variant's result.json, or nullopt when it is missing or unreadable (a
// run killed before writing it).
std::optional<nlohmann::json> read_result(const ResultPaths& paths, const std::string& variant);

// What is wrong with a variant's result.json that is there but cannot be read:
// "variants/x/result.json: damaged at byte 812: syntax error ..."; nullopt when
// the file is missing or sound.
std::optional<std::string> result_damage(const ResultPaths& paths, const std::string& variant);

// The figures expectations and tables use, by the names of experiment::metrics_of.
nlohmann::json single_stream_metrics(const bench::SingleStreamResult& result);
nlohmann::json level_metrics(const bench::LevelResult& level);

// The measured value an expectation is about, from a variant's result.json.
std::optional<double> find_metric(const nlohmann::json& result, const experiment::Expectation& expectation);

// The main figures of one variant's result, as (column, formatted value):
// load time, single-stream tok/s, tok/s per level, command metrics, accept length.
std::vector<std::pair<std::string, std::string>> summary_figures(const experiment::Experiment& experiment,
                                                                 const nlohmann::json& result);

// A plain table of the main figures of each variant (status, load time,
// single-stream tok/s, tok/s per level, accept length), Markdown-compatible.
std::string format_summary(const experiment::Experiment& experiment, const ResultPaths& paths,
                           const std::vector<std::string>& variants);

} // namespace specctl::report
