#include <specctl/report/history.hpp>
#include <specctl/report/results.hpp>
#include <specctl/util/bounded_read.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace specctl::report {

experiment::History read_history(const std::string& experiment, const std::filesystem::path& dir,
                                 const std::vector<std::string>& variants, const std::filesystem::path& exclude) {
  experiment::History out;
  out.dir = dir.string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return out;
  }
  std::vector<std::filesystem::path> runs;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec) || (!exclude.empty() && entry.path() == exclude)) {
      continue;
    }
    // Only runs of the same experiment: a sibling folder may hold anything.
    auto text =
        util::read_regular_file(ResultPaths{entry.path()}.run_info(), util::k_max_result_bytes, "a result file");
    auto info = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (dig(info, {"experiment"}) == experiment) {
      runs.push_back(entry.path());
    }
  }
  std::sort(runs.rbegin(), runs.rend());
  for (const auto& run : runs) {
    ResultPaths paths{run};
    for (const auto& name : variants) {
      if (out.durations.contains(name)) {
        continue;
      }
      auto result = read_result(paths, name);
      if (!result || status_of(*result) != VariantStatus::ok) {
        continue;
      }
      const auto& seconds = dig(*result, {"duration_s"});
      if (seconds.is_number() && std::isfinite(seconds.get<double>()) && seconds.get<double>() >= 0) {
        out.durations[name] = std::chrono::round<util::Duration>(std::chrono::duration<double>(seconds.get<double>()));
      }
    }
  }
  return out;
}

} // namespace specctl::report
