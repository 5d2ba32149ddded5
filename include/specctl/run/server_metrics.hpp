#pragma once

#include <specctl/server/server_template.hpp>

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

// True when speculative decoding does nothing useful: the accept length is
// about 1.0 (below k_ineffective_accept_length).
bool speculation_ineffective(double accept_length);

} // namespace specctl::run
