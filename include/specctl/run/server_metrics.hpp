#pragma once

#include <specctl/server/accept_source.hpp>
#include <specctl/server/server_template.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::run {

// One metric the server printed in its log during a benchmark window (SGLang's
// decode lines, vLLM's stats and SpecDecoding lines), by the template's
// `log.metrics` patterns. Each log line is one sample; the mean is over lines,
// not weighted by the tokens each line covers.
struct ServerMetric {
  std::string name;
  int samples = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double last = 0;
};

// Below this mean accept length a speculative server accepts next to no draft
// tokens: every verify pass yields about one token, as without speculation.
inline constexpr double k_ineffective_accept_length = 1.05;

// Reads the metrics from `log_window`, the raw bytes the server logged during
// the window (lines end at '\n' or '\r'; ANSI colours are removed). A last line
// without its end is ignored, as it may be cut in the middle of a write. The
// result follows the template's order and holds only metrics that appeared.
std::vector<ServerMetric> scan_server_metrics(const server::LogPatterns& patterns, std::string_view log_window);

// The metric called `name`, or nullptr when the log did not show it.
const ServerMetric* find_server_metric(const std::vector<ServerMetric>& metrics, std::string_view name);

// What a benchmark window offers for its accept length.
struct AcceptWindow {
  // The server's log bytes of the window.
  std::string_view log;
  // The Prometheus text before and after the window, when a source asked for it.
  std::optional<std::string> metrics_before;
  std::optional<std::string> metrics_after;
  // Over the window's completed requests, what their responses said (-1: none said).
  std::int64_t draft_accepted = -1;
  std::int64_t predicted_tokens = -1;
  int completed = 0;
};

struct AcceptLength {
  double value = 0;
  server::AcceptSource::Kind kind = server::AcceptSource::Kind::log;
  // Says exactly where it came from: "prometheus /metrics: 1 + Δvllm:... / Δvllm:...".
  std::string source;
  // What it is over: verify passes (prometheus, responses), or weight/lines (log).
  double over = 0;
};

// The window's accept length from the first of `sources` that has it; with no
// sources, the mean over lines of the log metric "accept_length" (unweighted).
std::optional<AcceptLength> accept_length_of(const std::vector<server::AcceptSource>& sources,
                                             const server::LogPatterns& patterns, const AcceptWindow& window);

// The value of a Prometheus sample `name` (or `name_total`), summed over its
// label sets; nullopt when the text has neither.
std::optional<double> prometheus_value(std::string_view text, std::string_view name);

// True when speculative decoding does nothing useful: the accept length is
// about 1.0 (below k_ineffective_accept_length).
bool speculation_ineffective(double accept_length);

} // namespace specctl::run
