#include "commands.hpp"

#include <specctl/run/runner.hpp>
#include <specctl/util/error.hpp>

#include <cstdio>
#include <fmt/format.h>
#include <iostream>

namespace specctl::cli {

namespace {

struct RunArgs {
  std::string file;
  RunFlags flags;
  std::string only;
  bool fail_fast = false;
  bool allow_large = false;
};

int run(const RunArgs& args) {
  auto experiment = load_or_report(args.file, args.allow_large, args.flags.ssh);
  if (!experiment) {
    return k_exit_bad_input;
  }
  auto options = run_options(args.flags, *experiment);
  if (!args.only.empty()) {
    options.only = args.only;
  }
  options.fail_fast = args.fail_fast;
  auto display = make_display(args.flags);
  auto outcome = run::run_experiment(*experiment, options, *display);
  // The comparison goes to stdout (progress went to stderr), so it can be piped or kept.
  std::cout << outcome.summary << std::flush;
  if (outcome.interrupted) {
    std::string by = outcome.stop_signal != 0 ? " by " + run::stop_signal_text(outcome.stop_signal) : "";
    std::cerr << fmt::format(
        "specctl: interrupted{}; the running servers were torn down. Continue with: specctl run {} --resume {}\n", by,
        args.file, outcome.dir.string());
  }
  return outcome.exit_code();
}

} // namespace

Action setup_run(CLI::App& command) {
  auto args = std::make_shared<RunArgs>();
  command.add_option("file", args->file, "Experiment file")->required();
  add_run_flags(command, args->flags, "run");
  command.add_option("--only", args->only, "Only variants whose name matches this glob");
  command.add_flag("--fail-fast", args->fail_fast, "Stop the sweep at the first failed variant");
  command.add_flag("--allow-large", args->allow_large, fmt::format("Run more than {} variants", k_large_sweep));
  return [args] { return run(*args); };
}

} // namespace specctl::cli
