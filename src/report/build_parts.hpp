#pragma once

// Parts of build_report (report.cpp) kept in files of their own: the
// expectations, and the GPU telemetry of the variants (their tok/J, power,
// throttling, load memory and power over time).

#include <specctl/report/report.hpp>

#include <string>
#include <vector>

namespace specctl::report::detail {

// The experiment's expectations, each measured in its variant's result (the mean
// of a repeated level's measurements); not measured for a variant that is not ok.
std::vector<ExpectationRow> expectation_rows(const RunData& data, const Report& report);

// Fills what the variants' telemetry says into the built tables: each level's
// EnergyFigures judged against the baseline's (with the A/A noise of tok/J where
// the baseline was repeated), each variant's VariantTelemetry, and a flag per
// level throttled for more than 5% of its time.
void add_telemetry(const RunData& data, Report& report);

// The summed power over time of each variant (in `variants` order) that has a
// telemetry.csv in its folder.
std::vector<PowerTrace> power_traces(const RunData& data, const std::vector<std::string>& variants);

} // namespace specctl::report::detail
