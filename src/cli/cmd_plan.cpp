#include "commands.hpp"

#include <specctl/experiment/plan.hpp>
#include <specctl/util/error.hpp>

#include <iostream>
#include <memory>

namespace specctl::cli {

namespace {

struct PlanOptions {
  std::string file;
  bool json = false;
};

} // namespace

Action setup_plan(CLI::App& command) {
  auto options = std::make_shared<PlanOptions>();
  command.add_option("FILE", options->file, "Experiment file")->required();
  command.add_flag("--json", options->json, "Print the plan as JSON");
  command.footer("Touches no host: it shows the exact command lines, environment, cleanup and benchmarks of every "
                 "variant, in run order, and an upper bound of the sweep's wall time.");
  return [options] {
    auto experiment = load_or_report(options->file);
    if (!experiment) {
      return k_exit_bad_input;
    }
    auto plan = experiment::make_plan(*experiment, server::RenderOptions{own_bindir()});
    if (options->json) {
      std::cout << experiment::plan_to_json(plan).dump(2) << '\n';
    } else {
      std::cout << experiment::format_plan(plan);
    }
    return k_exit_ok;
  };
}

} // namespace specctl::cli
