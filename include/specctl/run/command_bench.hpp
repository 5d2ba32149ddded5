#pragma once

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/run/command_fill.hpp>
#include <specctl/run/command_metrics.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <expected>
#include <map>
#include <string>
#include <string_view>
#include <vector>

// A `command` benchmark: the filled line run on a host, its figures extracted
// (command_fill.hpp, command_metrics.hpp).

namespace specctl::run {

// What one run of a command benchmark gave. A command that failed, timed out or
// lacked a metric has problems; metrics are extracted from whatever it printed,
// so a caller must look at problems before trusting them.
struct CommandOutcome {
  // The line that ran, with the placeholders filled in.
  std::string command_line;
  int exit_code = -1;
  bool timed_out = false;
  double duration_s = 0;
  // The last lines of stdout and stderr, for messages and the report.
  std::string out_tail;
  std::string err_tail;
  std::map<std::string, double> metrics;
  std::vector<std::string> problems;

  bool ok() const { return problems.empty(); }
};

// How much of a command's output CommandOutcome keeps.
inline constexpr std::size_t k_command_tail_lines = 20;
inline constexpr std::size_t k_command_tail_bytes = 4096;

// Runs `spec.run`, filled in from `context`, on `host` (a remote::LocalHost for
// `on: local`, the server's host for `on: host`), for at most `timeout`, and
// extracts its metrics from stdout. A command that ran and failed or timed out
// is an outcome with problems; the Error is only for a host that could not
// run it at all.
std::expected<CommandOutcome, Error> run_command_benchmark(remote::Host& host, const experiment::BenchmarkSpec& spec,
                                                           const CommandContext& context, util::Duration timeout);

} // namespace specctl::run
