#include "commands.hpp"

#include <specctl/experiment/plan.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <unistd.h>

namespace specctl::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_stop_signal{0};

// The first Ctrl-C, SIGTERM or SIGHUP (the terminal or the SSH session running
// specctl closed, overnight) asks the run to stop: the running server is torn down
// and the results so far are written. A second Ctrl-C or SIGTERM exits at once; a
// second SIGHUP does not (a closing session may send more than one).
extern "C" void on_signal(int signal) {
  if (signal == SIGHUP && g_stop.load()) {
    return;
  }
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, signal);
  if (g_stop.exchange(true)) {
    constexpr char k_message[] = "\nspecctl: forced exit; the server may still be running\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, k_message, sizeof k_message - 1);
    ::_exit(k_exit_interrupted);
  }
  constexpr char k_message[] = "\nspecctl: stopping: tearing down the running servers (Ctrl-C again to force)\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, k_message, sizeof k_message - 1);
}

} // namespace

const std::atomic<bool>* stop_flag() {
  return &g_stop;
}

const std::atomic<int>* stop_signal() {
  return &g_stop_signal;
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = &on_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGHUP, &action, nullptr);
  // A closed tunnel or pipe must be an error where it happens, not the end of the run.
  std::signal(SIGPIPE, SIG_IGN);
}

void add_ssh_flag(CLI::App& command, std::string& ssh) {
  command
      .add_option("--ssh", ssh,
                  "SSH transport for every SSH host: libssh2 (specctl's own client) or openssh (the system ssh, "
                  "for Kerberos, hardware keys, certificates, a ControlMaster; see docs/ssh.md)")
      ->check(CLI::IsMember({"libssh2", "openssh"}));
}

std::optional<experiment::Experiment> load_or_report(const std::string& path, bool allow_large,
                                                     const std::string& ssh) {
  util::Diagnostics diag;
  auto experiment = experiment::load_experiment(path, diag);
  for (const auto& d : diag.sorted()) {
    std::cerr << d.str() << '\n';
  }
  if (diag.has_errors()) {
    return std::nullopt;
  }
  if (!ssh.empty()) {
    for (auto& [name, host] : experiment.hosts) {
      host.transport = ssh == "openssh" ? experiment::SshTransport::openssh : experiment::SshTransport::libssh2;
    }
  }
  if (!allow_large && experiment.variants.size() > k_large_sweep) {
    auto plan = experiment::make_plan(experiment, server::RenderOptions{own_bindir()});
    std::cerr << fmt::format("{}: the experiment expands to {} variants, more than the {} a sweep may have without "
                             "--allow-large; it would take at most {} if every wait runs to its timeout\n",
                             path, experiment.variants.size(), k_large_sweep, util::format_duration(plan.makespan()));
    return std::nullopt;
  }
  return experiment;
}

std::string own_bindir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

void add_run_flags(CLI::App& command, RunFlags& flags, const std::string& what) {
  command.add_option("--out", flags.out, "Result folder (default results/<name>/<timestamp>)");
  command.add_option("--resume", flags.resume,
                     fmt::format("Continue the {} in DIR: complete variants are kept, the rest run again", what));
  command.add_option("--retries", flags.retries, "Attempts after a transient failure (host unreachable)")
      ->default_val(2)
      ->check(CLI::Range(0, 100));
  command.add_flag("--force", flags.force, "Resume even though the file changed since");
  command.add_flag("--quiet", flags.quiet, "Only errors, finished variants and the final table");
  command.add_flag("--verbose", flags.verbose, "Every message, informational ones included");
  command.add_option("--state-dir", flags.state_dir,
                     "Where servers keep their pid and log files on each host (default $HOME/.specctl/servers)");
  add_ssh_flag(command, flags.ssh);
}

run::RunOptions run_options(const RunFlags& flags, const experiment::Experiment& experiment) {
  if (!flags.resume.empty() && !flags.out.empty() && flags.resume != flags.out) {
    throw Error("--resume DIR already names the result folder; leave out --out", ErrorKind::bad_input);
  }
  run::RunOptions options;
  options.resume = !flags.resume.empty();
  options.out_dir = options.resume      ? std::filesystem::path(flags.resume)
                    : flags.out.empty() ? run::default_out_dir(experiment, std::chrono::system_clock::now())
                                        : std::filesystem::path(flags.out);
  // Earlier runs are the result folder's siblings (results/<experiment>/ by default).
  options.history_dir =
      options.out_dir.parent_path().empty() ? std::filesystem::path(".") : options.out_dir.parent_path();
  options.retries = flags.retries;
  options.force = flags.force;
  options.render.specctl_bindir = own_bindir();
  if (!flags.state_dir.empty()) {
    options.state_dir = flags.state_dir;
  }
  options.stop = stop_flag();
  options.stop_signal = stop_signal();
  install_stop_handlers();
  return options;
}

std::unique_ptr<run::Display> make_display(const RunFlags& flags) {
  auto verbosity = flags.quiet     ? run::Verbosity::quiet
                   : flags.verbose ? run::Verbosity::verbose
                                   : run::Verbosity::normal;
  return run::make_display(stderr, verbosity);
}

} // namespace specctl::cli
