#pragma once

// Private to src/cli: the table of subcommands. Each command adds itself to the
// parser and returns the action to run once parsing succeeded.

#include <specctl/experiment/experiment.hpp>
#include <specctl/run/display.hpp>
#include <specctl/run/runner.hpp>

#include <CLI/CLI.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace specctl::cli {

using Action = std::function<int()>;

struct CommandSpec {
  const char* name;
  const char* summary;
  Action (*setup)(CLI::App& command);
};

Action setup_validate(CLI::App& command);
Action setup_plan(CLI::App& command);
Action setup_bench(CLI::App& command);
Action setup_run(CLI::App& command);
Action setup_tune(CLI::App& command);
Action setup_report(CLI::App& command);
Action setup_compare(CLI::App& command);
Action setup_job(CLI::App& command);
Action setup_bench_job(CLI::App& command);
Action setup_template(CLI::App& command);

// Loads and checks an experiment; prints every problem (file:line:col: message)
// to stderr. nullopt when there were errors.
// More variants than this are refused without --allow-large: a typo in a matrix
// must not start a sweep of days.
inline constexpr std::size_t k_large_sweep = 256;
// `ssh` ("libssh2", "openssh", or empty for each host's own) sets every SSH host's transport (--ssh).
std::optional<experiment::Experiment> load_or_report(const std::string& path, bool allow_large = false,
                                                     const std::string& ssh = {});
// Adds --ssh TRANSPORT.
void add_ssh_flag(CLI::App& command, std::string& ssh);

// Ctrl-C, SIGTERM and SIGHUP set the flag stop_flag() returns: the first asks a run
// to stop (servers torn down, results kept), a second Ctrl-C or SIGTERM exits at once.
// stop_signal() says which signal it was.
void install_stop_handlers();
const std::atomic<bool>* stop_flag();
const std::atomic<int>* stop_signal();

// Directory holding the running specctl binary (specsim lives beside it).
std::string own_bindir();

// The flags `run` and `tune` share: where the results go, resuming, retries, output.
struct RunFlags {
  std::string out;
  std::string resume;
  int retries = 2;
  bool force = false;
  bool quiet = false;
  bool verbose = false;
  std::string state_dir;
  std::string ssh;
};
// `what` names the file's kind in the help: "run", "tuning".
void add_run_flags(CLI::App& command, RunFlags& flags, const std::string& what);
// The run options the flags ask for (stop flag and signal handlers included).
// Throws specctl::Error (bad_input) for --resume DIR with another --out.
run::RunOptions run_options(const RunFlags& flags, const experiment::Experiment& experiment);
std::unique_ptr<run::Display> make_display(const RunFlags& flags);

} // namespace specctl::cli
