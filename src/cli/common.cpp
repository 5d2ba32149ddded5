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

// The first Ctrl-C (or SIGTERM) asks the run to stop: the running server is
// torn down and the results so far are written. A second one exits at once.
extern "C" void on_signal(int) {
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

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = &on_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  // A closed tunnel or pipe must be an error where it happens, not the end of the run.
  std::signal(SIGPIPE, SIG_IGN);
}

std::optional<experiment::Experiment> load_or_report(const std::string& path, bool allow_large) {
  util::Diagnostics diag;
  auto experiment = experiment::load_experiment(path, diag);
  for (const auto& d : diag.sorted()) {
    std::cerr << d.str() << '\n';
  }
  if (diag.has_errors()) {
    return std::nullopt;
  }
  if (!allow_large && experiment.variants.size() > k_large_sweep) {
    auto plan = experiment::make_plan(experiment, server::RenderOptions{own_bindir()});
    std::cerr << fmt::format("{}: the experiment expands to {} variants, more than the {} a sweep may have without "
                             "--allow-large; it would take at most {} if every wait runs to its timeout\n",
                             path, experiment.variants.size(), k_large_sweep,
                             util::format_duration(plan.makespan()));
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
