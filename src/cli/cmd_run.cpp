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
  std::string out;
  std::string resume;
  std::string only;
  int retries = 2;
  bool fail_fast = false;
  bool force = false;
  bool allow_large = false;
  bool quiet = false;
  bool verbose = false;
  std::string state_dir;
};

int run(const RunArgs& args) {
  auto experiment = load_or_report(args.file, args.allow_large);
  if (!experiment) {
    return k_exit_bad_input;
  }
  if (!args.resume.empty() && !args.out.empty() && args.resume != args.out) {
    throw Error("--resume DIR already names the result folder; leave out --out", ErrorKind::bad_input);
  }
  run::RunOptions options;
  options.resume = !args.resume.empty();
  options.out_dir = options.resume ? std::filesystem::path(args.resume)
                    : args.out.empty() ? run::default_out_dir(*experiment, std::chrono::system_clock::now())
                                       : std::filesystem::path(args.out);
  // Earlier runs are the result folder's siblings (results/<experiment>/ by default).
  options.history_dir = options.out_dir.parent_path().empty() ? std::filesystem::path(".") : options.out_dir.parent_path();
  if (!args.only.empty()) {
    options.only = args.only;
  }
  options.retries = args.retries;
  options.fail_fast = args.fail_fast;
  options.force = args.force;
  options.render.specctl_bindir = own_bindir();
  if (!args.state_dir.empty()) {
    options.state_dir = args.state_dir;
  }
  options.stop = stop_flag();
  auto verbosity = args.quiet ? run::Verbosity::quiet : args.verbose ? run::Verbosity::verbose : run::Verbosity::normal;
  auto display = run::make_display(stderr, verbosity);
  install_stop_handlers();
  auto outcome = run::run_experiment(*experiment, options, *display);
  // The comparison goes to stdout (progress went to stderr), so it can be piped or kept.
  std::cout << outcome.summary << std::flush;
  if (outcome.interrupted) {
    std::cerr << fmt::format("specctl: interrupted; the running servers were torn down. Continue with: specctl run {} --resume {}\n",
                             args.file, outcome.dir.string());
  }
  return outcome.exit_code();
}

} // namespace

Action setup_run(CLI::App& command) {
  auto args = std::make_shared<RunArgs>();
  command.add_option("file", args->file, "Experiment file")->required();
  command.add_option("--out", args->out, "Result folder (default results/<experiment>/<timestamp>)");
  command.add_option("--resume", args->resume,
                     "Continue the run in DIR: complete variants are kept, the rest run again");
  command.add_option("--only", args->only, "Only variants whose name matches this glob");
  command.add_option("--retries", args->retries, "Attempts after a transient failure (host unreachable)")
      ->default_val(2)
      ->check(CLI::Range(0, 100));
  command.add_flag("--fail-fast", args->fail_fast, "Stop the sweep at the first failed variant");
  command.add_flag("--force", args->force, "Resume even though the experiment file changed");
  command.add_flag("--allow-large", args->allow_large, fmt::format("Run more than {} variants", k_large_sweep));
  command.add_flag("--quiet", args->quiet, "Only errors, finished variants and the final table");
  command.add_flag("--verbose", args->verbose, "Every message, informational ones included");
  command.add_option("--state-dir", args->state_dir,
                     "Where servers keep their pid and log files on each host (default $HOME/.specctl/servers)");
  return [args] { return run(*args); };
}

} // namespace specctl::cli
