#include "commands.hpp"

#include <specctl/run/tuning.hpp>
#include <specctl/util/error.hpp>

#include <cstdio>
#include <fmt/format.h>
#include <iostream>

namespace specctl::cli {

namespace {

struct TuneArgs {
  std::string file;
  RunFlags flags;
  std::vector<std::string> from;
};

int tune(const TuneArgs& args) {
  // The grid may be large: a tuning launches only what its search asks for.
  auto experiment = load_or_report(args.file, /*allow_large=*/true, args.flags.ssh);
  if (!experiment) {
    return k_exit_bad_input;
  }
  if (!experiment->tune) {
    throw Error(
        fmt::format("{}: not a tuning file (it has no tune: block); run an experiment with specctl run", args.file),
        ErrorKind::bad_input);
  }
  run::TuneOptions options;
  options.run = run_options(args.flags, *experiment);
  for (const auto& dir : args.from) {
    options.from.emplace_back(dir);
  }
  auto display = make_display(args.flags);
  auto outcome = run::tune_experiment(*experiment, options, *display);
  if (outcome.interrupted) {
    std::cerr << fmt::format("specctl: interrupted; the running server was torn down. Continue with: specctl tune {} "
                             "--resume {}\n",
                             args.file, outcome.dir.string());
    return outcome.exit_code();
  }
  if (outcome.write_error) {
    std::cerr << fmt::format("specctl: {}\n", *outcome.write_error);
    return outcome.exit_code();
  }
  std::cout << outcome.summary << std::flush;
  std::cerr << fmt::format("specctl: {} trial{} launched, {} reused from earlier runs, {} kept; answer in {}/tune.md, "
                           "to confirm: specctl run {}/tuned.yaml\n",
                           outcome.launched, outcome.launched == 1 ? "" : "s", outcome.reused, outcome.kept,
                           outcome.dir.string(), outcome.dir.string());
  return outcome.exit_code();
}

} // namespace

Action setup_tune(CLI::App& command) {
  auto args = std::make_shared<TuneArgs>();
  command.add_option("file", args->file, "Tuning file (an experiment file with a tune: block)")->required();
  add_run_flags(command, args->flags, "tuning");
  command.add_option("--from", args->from,
                     "Reuse the trials of an earlier run or tuning in DIR whose launch command and benchmarks match "
                     "(repeatable)");
  command.footer("Writes tune.md, tune.json and tuned.yaml (the winners and the start configuration, an ordinary "
                 "experiment) beside the trials' results and report.");
  return [args] { return tune(*args); };
}

} // namespace specctl::cli
