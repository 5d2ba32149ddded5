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
  std::string out;
  std::string resume;
  std::vector<std::string> from;
  int retries = 2;
  bool force = false;
  bool quiet = false;
  bool verbose = false;
  std::string state_dir;
};

int tune(const TuneArgs& args) {
  // The grid may be large: a tuning launches only what its search asks for.
  auto experiment = load_or_report(args.file, /*allow_large=*/true);
  if (!experiment) {
    return k_exit_bad_input;
  }
  if (!experiment->tune) {
    throw Error(fmt::format("{}: not a tuning file (it has no tune: block); run an experiment with specctl run",
                            args.file),
                ErrorKind::bad_input);
  }
  if (!args.resume.empty() && !args.out.empty() && args.resume != args.out) {
    throw Error("--resume DIR already names the result folder; leave out --out", ErrorKind::bad_input);
  }
  run::TuneOptions options;
  auto& run = options.run;
  run.resume = !args.resume.empty();
  run.out_dir = run.resume ? std::filesystem::path(args.resume)
                : args.out.empty() ? run::default_out_dir(*experiment, std::chrono::system_clock::now())
                                   : std::filesystem::path(args.out);
  run.history_dir = run.out_dir.parent_path().empty() ? std::filesystem::path(".") : run.out_dir.parent_path();
  run.retries = args.retries;
  run.force = args.force;
  run.render.specctl_bindir = own_bindir();
  if (!args.state_dir.empty()) {
    run.state_dir = args.state_dir;
  }
  run.stop = stop_flag();
  for (const auto& dir : args.from) {
    options.from.emplace_back(dir);
  }
  auto verbosity = args.quiet ? run::Verbosity::quiet : args.verbose ? run::Verbosity::verbose : run::Verbosity::normal;
  auto display = run::make_display(stderr, verbosity);
  install_stop_handlers();
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
  command.add_option("--out", args->out, "Result folder (default results/<name>/<timestamp>)");
  command.add_option("--resume", args->resume, "Continue the tuning in DIR: finished trials are never launched again");
  command.add_option("--from", args->from,
                     "Reuse the trials of an earlier run or tuning in DIR whose launch command and benchmarks match "
                     "(repeatable)");
  command.add_option("--retries", args->retries, "Attempts after a transient failure (host unreachable)")
      ->default_val(2)
      ->check(CLI::Range(0, 100));
  command.add_flag("--force", args->force, "Resume even though the tuning file changed");
  command.add_flag("--quiet", args->quiet, "Only errors, finished trials and the answer");
  command.add_flag("--verbose", args->verbose, "Every message, informational ones included");
  command.add_option("--state-dir", args->state_dir,
                     "Where servers keep their pid and log files on each host (default $HOME/.specctl/servers)");
  command.footer("Writes tune.md, tune.json and tuned.yaml (the winners and the start configuration, an ordinary "
                 "experiment) beside the trials' results and report.");
  return [args] { return tune(*args); };
}

} // namespace specctl::cli
