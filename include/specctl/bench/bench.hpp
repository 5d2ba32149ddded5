#pragma once

// The benchmark engine: a streaming load generator on one libcurl multi event
// loop. `specctl bench` and `specctl run` both call these functions.
//
// Every run_* throws specctl::Error only for problems that stop the run
// before it starts (bad URL, no model, file-descriptor limit); a request that
// fails is recorded in its level and counted, never thrown.

#include <specctl/bench/request.hpp>
#include <specctl/bench/result.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::bench {

// A snapshot of a running level, for progress displays.
struct Progress {
  // "warmup", "single-stream", "concurrency 10", "rate 4/s".
  std::string phase;
  // Requests that ended, completed or failed: `done - failed` completed.
  int done = 0;
  // Requests the phase will send; for an open loop an estimate.
  int total = 0;
  int failed = 0;
  int completed() const { return done - failed; }
  std::int64_t tokens = 0;
  double elapsed_s = 0;
  // Tokens per second since the phase began.
  double tok_s = 0;
  bool finished = false;
};

// What every mode shares.
struct RunOptions {
  RequestOptions request;
  // Sent in order, cycling; must not be empty (plain_requests() for a list of texts).
  std::vector<WorkloadRequest> prompts;
  // Each request's prompt gets a prefix of its own ("[TAG PHASE #INDEX] ") where
  // the prompt's shared part ends (build_body), so no request is served from the
  // server's prefix cache beyond what the workload shares on purpose, or repeats
  // another token for token: the samples are independent. Off, requests of the
  // same prompt send the same body.
  bool unique_prompts = true;
  // Names the caller's run in that prefix (a benchmark and its repeat), so that
  // prompts are distinct across the levels and runs one server sees.
  std::string prompt_tag;
  // Requests sent before each mode's measurement and left out of its results.
  int warmup = 1;
  // Before each level, open the connections it will keep in flight (one GET
  // /v1/models each), so that a burst of new connections is not measured as
  // the server's TTFT. Rate levels do so only with a max_concurrency.
  bool preconnect = true;
  // Called once the warmup is over, just before the first measured request: a
  // caller that reads the server's own counters or log for the measured window
  // opens it here, so the warmup is not in it.
  std::function<void()> on_measured_start;
  // Called from the event loop when a measured request fails: a watcher of the
  // server checks it at once (a dead server fails requests in microseconds).
  std::function<void(FailureKind)> on_request_failed;
  // While it is true no new request is started (running ones go on): a watcher
  // holds the level while it checks a server that refused a connection, so a
  // dead server's port is not sent the rest of the level.
  const std::atomic<bool>* hold = nullptr;
  // Called from the event loop at most every progress_interval and once when a phase ends.
  std::function<void(const Progress&)> on_progress;
  std::chrono::milliseconds progress_interval{250};
  // Polled by the event loop: when it becomes true, requests in flight are
  // recorded as interrupted and the run returns what it has.
  const std::atomic<bool>* stop = nullptr;
  // The whole mode must end by then (a benchmark's own time limit): requests
  // still in flight fail as timeouts, the level is marked timed_out, and no
  // further level runs.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct SingleStreamOptions {
  RunOptions common;
  int runs = 5;
};

struct ConcurrencyOptions {
  RunOptions common;
  std::vector<int> levels;
  // Requests per level; default_requests(level) when not set.
  std::optional<int> requests;
};

// What a request's prompt starts with under unique_prompts: eight hex digits of a
// hash of the label, then the label "[TAG PHASE #INDEX] " ("[decode r2 concurrency 10 #7] ",
// or "[PHASE #INDEX] " without a tag), so two requests share no prefix a cache could serve.
std::string unique_prefix(std::string_view tag, std::string_view phase, int index);

// max(2 * level, 10): every level reaches a steady state of `level` streams.
int default_requests(int level);

struct RateOptions {
  RunOptions common;
  // Requests per second, one level each; infinity sends every request at once.
  std::vector<double> rates;
  std::chrono::milliseconds duration{std::chrono::seconds{60}};
  std::optional<int> max_concurrency;
  // Shape of the gamma-distributed gaps: 1 is Poisson, below 1 burstier.
  double burstiness = 1.0;
  std::uint64_t seed = 0;
};

// Arrival times (seconds after start) of an open-loop level: gamma-distributed
// gaps with mean 1 / rate, all before `duration`. Deterministic for a seed.
std::vector<double> arrival_times(double rate, double burstiness, double duration_s, std::uint64_t seed);

// `target` may be unresolved: these resolve it (see resolve_target) first.
SingleStreamResult run_single_stream(const Target& target, const SingleStreamOptions& options);
ConcurrencyResult run_concurrency(const Target& target, const ConcurrencyOptions& options);
RateResult run_rate(const Target& target, const RateOptions& options);

} // namespace specctl::bench
