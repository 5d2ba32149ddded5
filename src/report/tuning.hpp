#pragma once

// A tuning's section of the report: the answer `specctl tune` wrote (tune.json)
// and the Pareto front of its trials, built from the folder like the rest.

#include <specctl/report/report.hpp>

#include <optional>
#include <string>

namespace specctl::report::detail {

// nullopt when the folder is no tuning.
std::optional<TuningSection> tuning_section(const RunData& data);
std::string tuning_markdown(const TuningSection& tuning);
// The trials' curves, per-user tok/s against total tok/s, and the front dashed.
std::string tuning_svg(const TuningSection& tuning);

} // namespace specctl::report::detail
