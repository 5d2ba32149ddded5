#pragma once

// The A/A noise of a report: the baseline measured again (report.cpp builds
// the rest of the model).

#include <specctl/report/report.hpp>

#include <string>
#include <vector>

namespace specctl::report::detail {

// The baseline against its repeat (r.repeat), metric by metric, at every level.
std::vector<NoiseRow> noise_rows(const Report& r);
// "noise: "b-again" measured the baseline "b" again, 1h 40m later; output tok/s moved ..."
std::string noise_note(const RunData& data, const Report& r);

} // namespace specctl::report::detail
