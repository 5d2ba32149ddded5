#pragma once

#include <specctl/sim/gpu_power.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/sim/prefix_cache.hpp>

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <vector>

namespace specctl::sim {

using RequestId = std::uint64_t;

// Who sent a request: a client, the server's own warm-up, or a health check
// that generates (SGLang's /health). Engines count all three in their stats.
enum class RequestKind { user, warmup, health };

std::string_view request_kind_name(RequestKind kind);

// Tokens a request gained at the end of a step.
struct Emission {
  RequestId id = 0;
  int tokens = 0;
  bool first = false;
  bool finished = false;
  double arrival_s = 0.0;
  // Verify passes behind these tokens (1 for a speculative decode step, else 0):
  // tokens - verify_passes drafts were accepted.
  int verify_passes = 0;
  // On the first emission: prompt tokens the prefix cache served.
  int cached_tokens = 0;
};

// What a request's prompt is beyond its length: its token keys for the prefix
// cache (none: never cached) and its built-in spec-decode category (-1: none).
struct PromptShape {
  SharedTokenKeys keys{};
  int category = -1;
};

// A finished request's timeline in model seconds.
struct CompletedRequest {
  RequestId id = 0;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double arrival_s = 0.0;
  double first_token_s = 0.0;
  double finish_s = 0.0;
  RequestKind kind = RequestKind::user;
  // Speculation: verify passes and the decode tokens they produced (accepted
  // drafts = spec_tokens - verify_passes; drafted = verify_passes x depth).
  long verify_passes = 0;
  long spec_tokens = 0;
  int cached_tokens = 0;
  int category = -1;
};

enum class StepKind { idle, prefill, decode };

struct StepResult {
  StepKind kind = StepKind::idle;
  double duration_s = 0.0;
  int batch = 0;
  int prefill_tokens = 0; // computed: prompt tokens less the cached ones
  int cached_tokens = 0;
  int tokens = 0;
  // Request-verify passes of a speculative step (accept length = tokens / this).
  int verify_passes = 0;
  int running_before = 0;
  int running_after = 0;
  int waiting_after = 0;
  std::vector<Emission> emissions{};
  std::vector<CompletedRequest> completed{};
  // What each GPU draws during the step, at what SM clock, and whether the power
  // limit held it back (its duration already stretched by that).
  double power_w = 0.0;
  double sm_mhz = 0.0;
  bool power_capped = false;
};

// The scheduler's core without a clock: it forms batches the way SGLang does
// (prefill first, FIFO, a chunked-prefill token budget, a running limit),
// prices each step with the PerfModel and advances every running request.
// Driven by the real-time Scheduler in the server and by a virtual clock in
// simulate_wave(), so calibration can be checked exactly and quickly.
class BatchEngine {
public:
  BatchEngine(PerfModel model, std::uint64_t seed);

  const PerfModel& model() const { return m_model; }

  // not_before_s delays the request's prefill (the slow-first-token fault).
  void add(RequestId id, int prompt_tokens, int target_tokens, double arrival_s, double not_before_s,
           RequestKind kind = RequestKind::user, PromptShape shape = {});
  // Serves prompts' shared leading tokens from a prefix cache: a prefill computes
  // (and is charged for) only the rest.
  void enable_prefix_cache(PrefixCacheConfig config);
  bool cancel(RequestId id);

  // Plans and prices one step starting at now_s; its emissions take effect at
  // now_s + duration_s. An idle result means nothing can run at now_s.
  StepResult step(double now_s);

  // When an idle engine has delayed requests, the model time they become due.
  std::optional<double> next_wakeup_s() const;

  // The GPUs' power figures, and the limit they are held to: a pass that would draw
  // more runs at a lower clock and takes longer (limit_pass).
  void set_power(const PowerSpec& spec) { m_power = spec; }
  void set_power_limit(double limit_w) { m_power.limit_w = limit_w; }
  // Tokens one forward pass of this step processes on each GPU: a decode step's batch
  // times the tokens each request verifies (1 without speculation), a prefill's
  // computed prompt tokens.
  long forward_tokens(const StepResult& step) const;

  // Draft tokens one verify pass checks (0 without speculation).
  int draft_depth() const { return m_model.max_accept_length() - 1; }
  // The most requests that run at once (SGLang's max_running_requests,
  // vLLM's --max-num-seqs, llama.cpp's slots).
  int max_running() const;

  int running() const { return static_cast<int>(m_running.size()); }
  int waiting() const { return static_cast<int>(m_waiting.size()); }
  // KV-cache tokens held by running requests (prompt + generated).
  long kv_tokens() const;

private:
  struct Entry {
    RequestId id = 0;
    int prompt_tokens = 0;
    int target_tokens = 0;
    int generated = 0;
    double arrival_s = 0.0;
    double not_before_s = 0.0;
    double first_token_s = 0.0;
    double accept_phase = 0.0;
    long verify_passes = 0;
    long spec_tokens = 0;
    RequestKind kind = RequestKind::user;
    PromptShape shape{};
    int cached_tokens = 0;
  };

  StepResult prefill(double now_s);
  StepResult decode(double now_s);
  int draw_accept_length(Entry& entry);
  // Prices the step's power and stretches its duration under the limit.
  void apply_power(StepResult& result) const;
  static CompletedRequest completed(const Entry& entry, double finish_s);

  PerfModel m_model;
  PowerSpec m_power{};
  std::mt19937_64 m_rng;
  std::deque<Entry> m_waiting;
  std::vector<Entry> m_running;
  std::optional<PrefixCache> m_cache;
};

// A closed batch of `concurrency` identical requests, all sent at once, run in
// virtual time: what a benchmark client would measure from an ideal server.
struct WaveResult {
  double duration_s = 0.0;
  long completion_tokens = 0;
  double output_tok_s = 0.0;      // completion tokens / duration
  double per_request_tok_s = 0.0; // mean of tokens / end-to-end latency
  double mean_ttft_s = 0.0;
  double mean_accept_length = 1.0;
};

WaveResult simulate_wave(const PerfModel& model, int concurrency, int prompt_tokens, int max_tokens,
                         std::uint64_t seed = 0);

} // namespace specctl::sim
