#pragma once

// Earlier runs of an experiment, as `specctl run`'s header and `specctl plan` see them:
// the result folders beside one another (results/<experiment>/<timestamp>/ by default).

#include <specctl/experiment/plan.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace specctl::report {

// The newest recorded duration of each of `variants` that ended ok in a result folder
// of `dir` whose run.json names `experiment` (trials of a tuning included); `exclude`,
// the run under way, is left out. Folder names are timestamps: the greatest is the newest.
experiment::History read_history(const std::string& experiment, const std::filesystem::path& dir,
                                 const std::vector<std::string>& variants, const std::filesystem::path& exclude = {});

} // namespace specctl::report
