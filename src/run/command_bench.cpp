#include <specctl/run/command_bench.hpp>

#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <chrono>

namespace specctl::run {

namespace {

// Longest piece of the last error line quoted in a problem.
constexpr std::size_t k_error_line_limit = 60;

// The last lines of `text`, at most k_command_tail_bytes of them, starting at a line when it can.
std::string tail_of(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  std::size_t start = text.size() > k_command_tail_bytes ? text.size() - k_command_tail_bytes : 0;
  std::size_t lines = 0;
  for (std::size_t i = text.size(); i > start; --i) {
    if (text[i - 1] == '\n' && ++lines == k_command_tail_lines) {
      start = i;
      break;
    }
  }
  if (start > 0 && text[start - 1] != '\n') {
    const auto next = text.find('\n', start);
    if (next != std::string_view::npos) {
      start = next + 1;
    }
  }
  return std::string(text.substr(start));
}

std::string last_line(std::string_view text) {
  text = util::trim_view(text);
  const auto newline = text.find_last_of("\r\n");
  return util::clip(newline == std::string_view::npos ? text : text.substr(newline + 1), k_error_line_limit);
}

} // namespace

std::expected<CommandOutcome, Error> run_command_benchmark(remote::Host& host, const experiment::BenchmarkSpec& spec,
                                                           const CommandContext& context, util::Duration timeout) {
  if (spec.kind != experiment::BenchmarkKind::command) {
    return std::unexpected(
        Error(fmt::format("benchmark \"{}\" is not a command benchmark", spec.name), ErrorKind::bad_input));
  }
  CommandOutcome outcome;
  outcome.command_line = fill_command(spec.run, context);
  const auto started = std::chrono::steady_clock::now();
  auto result = host.exec(outcome.command_line, timeout);
  outcome.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!result) {
    return std::unexpected(
        Error(fmt::format("benchmark \"{}\": {}", spec.name, result.error().what()), result.error().kind()));
  }
  outcome.exit_code = result->exit_code;
  outcome.timed_out = result->timed_out;
  outcome.out_tail = tail_of(result->out);
  outcome.err_tail = tail_of(result->err);
  if (outcome.timed_out) {
    outcome.problems.push_back(
        fmt::format("the command timed out after {} and was killed", util::format_duration(timeout)));
  } else if (outcome.exit_code != 0) {
    const std::string last = last_line(result->err);
    outcome.problems.push_back(last.empty()
                                   ? fmt::format("the command exited with status {}", outcome.exit_code)
                                   : fmt::format("the command exited with status {}: {}", outcome.exit_code, last));
  }
  outcome.metrics = extract_metrics(spec.extract, result->out, outcome.problems);
  return outcome;
}

} // namespace specctl::run
