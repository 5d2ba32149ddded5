#include "commands.hpp"

#include <specctl/util/error.hpp>

#include <fmt/format.h>
#include <iostream>
#include <memory>

namespace specctl::cli {

Action setup_validate(CLI::App& command) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto allow_large = std::make_shared<bool>(false);
  command.add_option("FILE", *files, "Experiment files to check")->required();
  command.add_flag("--allow-large", *allow_large, fmt::format("Accept more than {} variants", k_large_sweep));
  command.footer("Prints \"FILE: ok (N variants, M benchmarks)\" or every problem found; exit 0 or 2.");
  return [files, allow_large] {
    int code = k_exit_ok;
    for (const auto& file : *files) {
      auto experiment = load_or_report(file, *allow_large);
      if (!experiment) {
        code = k_exit_bad_input;
        continue;
      }
      if (experiment->tune) {
        std::cout << fmt::format("{}: ok (a tuning of {} configuration{}, {} benchmark{})\n", file,
                                 experiment->variants.size(), experiment->variants.size() == 1 ? "" : "s",
                                 experiment->benchmarks.size(), experiment->benchmarks.size() == 1 ? "" : "s");
        continue;
      }
      std::cout << fmt::format("{}: ok ({} variant{}, {} benchmark{})\n", file, experiment->variants.size(),
                               experiment->variants.size() == 1 ? "" : "s", experiment->benchmarks.size(),
                               experiment->benchmarks.size() == 1 ? "" : "s");
    }
    return code;
  };
}

} // namespace specctl::cli
