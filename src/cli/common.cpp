#include "commands.hpp"

#include <filesystem>
#include <iostream>

namespace specctl::cli {

std::optional<experiment::Experiment> load_or_report(const std::string& path) {
  util::Diagnostics diag;
  auto experiment = experiment::load_experiment(path, diag);
  for (const auto& d : diag.sorted()) {
    std::cerr << d.str() << '\n';
  }
  if (diag.has_errors()) {
    return std::nullopt;
  }
  return experiment;
}

std::string own_bindir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

} // namespace specctl::cli
