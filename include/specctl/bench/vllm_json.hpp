#pragma once

// A benchmark level in the shape of vLLM's `vllm bench serve --save-result` JSON
// (vllm/benchmarks/serve.py: the `result_json` of main_async merged with the
// `result` of benchmark()), so that the plotting and comparison scripts people
// already run on vLLM's files read specctl's unchanged.
//
// Fields, in vLLM's order: date, endpoint_type, backend, label, model_id,
// tokenizer_id, num_prompts, request_rate ("inf" without a rate), burstiness,
// max_concurrency, duration, completed, failed, total_input_tokens,
// total_output_tokens, request_throughput, request_goodput (null without goodput
// SLOs, as in vLLM), output_throughput, total_token_throughput, input_lens,
// output_lens, ttfts, itls, latencies, start_times, generated_texts, errors,
// max_output_tokens_per_s, max_concurrent_requests, rtfx, then for each of ttft,
// tpot, itl and e2el: mean_X_ms, median_X_ms, std_X_ms and pP_X_ms for each
// percentile P (vLLM: --percentile-metrics ttft,tpot,itl,e2el, --metric-percentiles
// 99 by default).
//
// How each is filled, where it differs from vLLM:
// - Per-request lists (ttfts, itls, latencies, start_times) are in seconds, as
//   vLLM's; the aggregates in milliseconds, as vLLM's. start_times are seconds from
//   the level's start, where vLLM's are time.perf_counter() readings: differences
//   between them mean the same.
// - Definitions are vLLM's calculate_metrics: only successful requests enter the
//   aggregates and totals; output_lens is 0 for a failed request; TPOT is
//   (e2e - ttft) / (output_tokens - 1) for requests of more than one output token;
//   ITL pools every successful request's gaps; an empty list gives 0 (numpy's
//   np.mean(x or 0)). Percentiles are numpy's default (linear interpolation between
//   order statistics), the median numpy's, std the population standard deviation
//   (numpy's ddof=0).
// - max_output_tokens_per_s counts token arrivals (the first token, then one per
//   ITL gap) in one-second buckets from the first send, and max_concurrent_requests
//   sweeps the successful requests' [start, end) intervals, both as vLLM does;
//   they need start_ms.
// - Not filled: queue_times and the client_queue_time / e2el_including_client_queue
//   metrics (specctl's workers send a request as soon as one is free and keep no
//   client-side queue time); rtfx is 0 (no audio input), as vLLM writes it for text;
//   metadata (--metadata), ramp-up and spec-decode fields are not written: specctl
//   keeps acceptance in its own result files.
// - A duration of 0 gives throughputs of 0 (JSON has no infinity).

#include <specctl/bench/request.hpp>
#include <specctl/bench/result.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace specctl::bench {

struct VllmRequestRecord {
  bool ok = false;
  // Prompt tokens (vLLM's prompt_len) and generated tokens (the server's usage).
  int input_tokens = 0;
  int output_tokens = 0;
  double ttft_ms = 0;
  std::vector<double> itl_ms{};
  double e2e_ms = 0;
  // When the request was sent, from the level's start.
  double start_ms = 0;
  std::string generated_text{};
  // Empty for a successful request.
  std::string error{};
};

struct VllmLevel {
  // vLLM's datetime.now().strftime("%Y%m%d-%H%M%S"): vllm_date().
  std::string date{};
  // vLLM's --backend name ("openai", "openai-chat", "vllm", "sglang", ...).
  std::string backend = "openai";
  std::optional<std::string> label{};
  std::string model_id{};
  // null: no tokenizer was loaded (specctl counts tokens by the server's usage).
  std::optional<std::string> tokenizer_id{};
  int num_prompts = 0;
  // Requests per second; none: "inf" (all sent at once).
  std::optional<double> request_rate{};
  double burstiness = 1.0;
  std::optional<int> max_concurrency{};
  double duration_s = 0;
  std::vector<VllmRequestRecord> requests{};
  // vLLM's --goodput service-level objectives, in milliseconds.
  std::optional<double> goodput_ttft_ms{};
  std::optional<double> goodput_tpot_ms{};
  std::optional<double> goodput_e2el_ms{};
  // vLLM's --metric-percentiles.
  std::vector<double> percentiles = {99};
  // summary: without the per-request lists that vLLM writes only with --save-detailed
  // (input_lens, output_lens, ttfts, itls, start_times, generated_texts, errors).
  enum class Detail { full, summary };
  Detail detail = Detail::full;
};

nlohmann::ordered_json vllm_result_json(const VllmLevel& level);

// A measured level (a concurrency level, a rate, or a single stream's runs) in vLLM's
// terms: input_tokens are the server's usage.prompt_tokens (0 when it did not say),
// ITLs the gaps between content chunks, start_ms the records' start_s, backend
// "openai" or "openai-chat", max_concurrency the level's concurrency (the rate's
// max_concurrency in open loop), request_rate the rate (none for a closed loop or an
// infinite rate). generated_texts are empty: the engine keeps no answer text.
VllmLevel vllm_level_of(const LevelResult& level, const std::string& model, Endpoint endpoint,
                        std::chrono::system_clock::time_point when);

// Local time as "%Y%m%d-%H%M%S", vLLM's date field.
std::string vllm_date(std::chrono::system_clock::time_point when);

// numpy.percentile(values, p) with the default linear method; 0 for no values.
double numpy_percentile(std::vector<double> values, double p);
// numpy.std(values) (population, ddof=0); 0 for no values.
double numpy_std(const std::vector<double>& values);

} // namespace specctl::bench
