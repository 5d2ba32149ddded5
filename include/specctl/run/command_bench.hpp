#pragma once

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <expected>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::run {

// The values a `command` benchmark's placeholders stand for. `url` and `port`
// are the server as seen from where the command runs: the tunnel's local port
// for `on: local`, the server's own port for `on: host`.
struct CommandContext {
  std::string url;
  int port = 0;
  std::string variant;
  std::string model;
  std::string host;
};

// Fills {url}, {port}, {variant}, {model} and {host} in `run`; "{{" is a
// literal "{" (a lone "}" is always literal). Every value goes in through
// util::shell_quote, so none can expand, split or end the command. A
// placeholder written inside the user's own quotes ('{model}' or "{model}")
// closes those quotes around the value and reopens them, since quoting inside
// double quotes would leave $(...) live. Placeholders after a backslash or in
// a comment, and unknown ones (the experiment loader rejects those), stay as
// written. Here-documents are not understood: keep placeholders out of them.
std::string fill_command(const std::string& run, const CommandContext& context);

// Finds each metric in a command's standard output. A regex metric is group 1
// of the first match; a JSON metric is a path (results.throughput,
// runs[0].tok_s) into the output when it is JSON as a whole, otherwise into the
// last JSON object that starts a line with "{" and ends on that line (JSON
// lines after log noise) or at the next line that is a lone "}"
// (pretty-printed after noise). Numbers may carry thousands commas
// ("1,234.5"); JSON strings holding a number count. A metric that is missing
// or not a finite number is left out and described in `problems`; nothing
// throws.
std::map<std::string, double> extract_metrics(const std::vector<experiment::MetricExtractor>& extractors,
                                              std::string_view stdout_text, std::vector<std::string>& problems);

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
