#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specctl::sim {

// A Prometheus histogram with fixed upper bounds (seconds).
struct Histogram {
  std::vector<double> bounds;
  std::vector<long> counts; // per bound, not cumulative
  double sum = 0.0;
  long count = 0;

  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
};

// What the server has done, for /metrics and the decode log.
struct ServingStats {
  long prompt_tokens_total = 0;
  long generation_tokens_total = 0;
  long requests_total = 0;
  int running = 0;
  int queued = 0;
  double token_usage = 0.0;
  double gen_throughput = 0.0;
  double spec_accept_length = 0.0;
  double spec_accept_rate = 0.0;
  Histogram time_to_first_token;
  Histogram e2e_request_latency;

  ServingStats();
};

// SGLang's metric names in Prometheus text format 0.0.4, labelled with the
// model name; the speculative gauges only when `speculative`.
std::string render_metrics(const ServingStats& stats, std::string_view model_name, bool speculative);

} // namespace specctl::sim
