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

  // What the simulated speculation really did since boot, warm-up and health
  // generations included (the engines count those too): verify passes
  // (vLLM's "drafts"), the tokens they produced, tokens drafted, and per
  // draft position how often it was accepted.
  long spec_verify_passes = 0;
  long spec_tokens = 0;
  long spec_draft_tokens = 0;
  std::vector<long> spec_accepted_per_pos{};
  long spec_accepted() const { return spec_tokens - spec_verify_passes; }
  // Mean accept length since boot (accepted + bonus per verify pass), 0 before any.
  double spec_accept_length_since_boot() const;

  ServingStats();
};

// vLLM's /metrics: prometheus_client's text for the V1 engine's counters
// (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py), labels
// engine="0" and model_name, the spec_decode ones only when speculating.
std::string render_vllm_metrics(const ServingStats& stats, std::string_view model_name, bool speculative,
                                double created_unix_s);

// SGLang's metric names in Prometheus text format 0.0.4, labelled with the
// model name; the speculative gauges only when `speculative`.
std::string render_metrics(const ServingStats& stats, std::string_view model_name, bool speculative);

} // namespace specctl::sim
