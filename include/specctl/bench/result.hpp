#pragma once

// What a benchmark measured: one record per request and the aggregates of
// each level, named as vLLM's `bench serve` names them.

#include <specctl/bench/stats.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::bench {

// Why a request failed. A failure is recorded and counted, never fatal to a run.
enum class FailureKind {
  connect,            // refused, unresolvable, or no TCP connection within the connect timeout
  http_status,        // the server answered with a status other than 200
  timeout,            // the request's own deadline passed
  malformed_event,    // an event that is not a well-formed JSON chunk (or not SSE at all)
  cut_stream,         // bytes of the answer arrived, then the stream ended before "data: [DONE]"
  server_error,       // the stream carried an {"error": ...} event
  protocol,           // not an HTTP answer, or another transport error
  interrupted,        // the run was stopped (Ctrl-C) while the request was in flight
  closed_before_send, // the connection closed before the request could be written, on every try
  no_response,        // the request was written, and the connection closed with no byte of answer
  stalled,            // no byte arrived for the idle timeout: a server that hangs mid-stream
};
inline constexpr std::size_t k_failure_kinds = 11;

// "connect", "http_status", "timeout", "malformed_event", "cut_stream", "server_error", "protocol", "interrupted",
// "closed_before_send", "no_response", "stalled".
std::string_view failure_name(FailureKind kind);

// Where a request's output token count came from.
enum class TokenSource {
  usage, // usage.completion_tokens, from the usage chunk or the last content chunk
  chunks // no usage came: the number of content chunks, a lower bound with multi-token chunks
};

// One content chunk: when it arrived (microseconds after the request's start
// time) and the tokens it carried (0 when the server did not say).
struct ChunkArrival {
  std::uint32_t at_us = 0;
  std::uint32_t tokens = 0;
};

// Time per output token after the first, the one TPOT of specctl (its figures, goodput,
// SLOs, tune and the vLLM-shaped files): (e2e - ttft) / (output_tokens - 1). NaN for an
// answer of one token or none: such a request has no TPOT, so it meets no TPOT bound and
// is left out of TPOT's statistics. (vLLM's goodput counts it as 0, meeting any bound.)
double tpot_ms(double ttft_ms, double e2e_ms, int output_tokens);
// What one stream sees: 1000 / TPOT tokens per second; NaN where TPOT is not positive.
double per_user_tok_s(double tpot_ms);

struct RequestRecord {
  // Position in the level's schedule, and which prompt it sent.
  int index = 0;
  int prompt = 0;
  // The workload's id and category of that prompt (category empty when it has none),
  // its target length in tokens (0: none, the text as written), and the max_tokens
  // the request asked for.
  std::string prompt_id;
  std::string category;
  int input_tokens = 0;
  int max_tokens = 0;
  // The start time latencies count from, in seconds after the level began:
  // the scheduled arrival in rate mode (so a late client cannot hide a slow
  // server), otherwise the moment the request was written to its connection
  // (so a client starting a burst of requests does not count its own delay).
  double start_s = 0;
  // How long after its intended start (the schedule, or when the engine
  // handed it to curl) the request was written.
  double send_lag_ms = 0;
  std::optional<FailureKind> failure;
  std::string error;
  long http_status = 0;
  std::string response_id;
  std::string finish_reason;
  int output_tokens = 0;
  TokenSource token_source = TokenSource::usage;
  // -1 when the server did not report it.
  int prompt_tokens = -1;
  // Send -> first content chunk; send -> last data event; tpot_ms() below. NaN when not defined.
  double ttft_ms = 0;
  double e2e_ms = 0;
  double tpot_ms = 0;
  std::vector<ChunkArrival> chunks;
  // True when every chunk's token count is known (usage on every chunk).
  bool chunk_tokens_exact = false;
  // Times the request was sent again on a fresh connection because the one it
  // was given had closed before any byte of an answer came (llama.cpp closes
  // the connection after every stream): not failures, but counted.
  int resends = 0;
  // usage.prompt_tokens_details.cached_tokens; -1 when the server did not say.
  int cached_tokens = -1;
  // The server's own figures for this request, where it reports them (llama.cpp
  // "timings"): generated tokens, its decode speed, drafted and accepted tokens.
  // -1 when absent.
  int server_predicted_n = -1;
  double server_tok_s = -1;
  int draft_tokens = -1;
  int draft_accepted = -1;

  bool ok() const { return !failure; }
};

// The outcome of one closed-loop concurrency level, one request rate, or the
// runs of a single-stream benchmark.
struct LevelResult {
  // Requests kept in flight (closed loop); the most in flight at once (open loop).
  int concurrency = 0;
  // Open loop only: the arrival rate (requests/s; infinity sends all at once) and its settings.
  std::optional<double> rate;
  double burstiness = 1.0;
  std::optional<int> max_concurrency;

  int requests = 0;
  int completed = 0;
  int failed = 0;
  std::array<int, k_failure_kinds> failures{};
  // The first error message of each kind, for people.
  std::array<std::string, k_failure_kinds> first_error;
  // Requests sent again on a fresh connection (see RequestRecord::resends).
  int resent = 0;
  // Over completed requests, what the server said of them in its answers; -1
  // when none said it. Drafted and accepted tokens and generated tokens (llama.cpp
  // "timings"), and prompt tokens served from the prefix cache (usage details).
  std::int64_t draft_tokens = -1;
  std::int64_t draft_accepted = -1;
  std::int64_t server_predicted_n = -1;
  std::int64_t cached_prompt_tokens = -1;
  // usage.prompt_tokens summed over the completed requests that reported it; -1 when none did.
  std::int64_t prompt_tokens = -1;
  // Mean of the server's own decode speed per request (timings.predicted_per_second); 0 when absent.
  double server_tok_s = 0;
  bool interrupted = false;
  // The mode's deadline ended this level early.
  bool timed_out = false;

  // When the level began on the steady clock (records' start_s count from
  // here), to line results up with server logs or another clock reader.
  std::chrono::steady_clock::time_point started;
  // Wall time from the level's start to its last request's end.
  double duration_s = 0;
  // Output tokens of completed requests only (failed ones say nothing about a healthy server).
  std::int64_t output_tokens = 0;
  double output_tok_s = 0;
  double request_s = 0;
  // Mean over completed requests of tokens / E2E: the speed one user sees.
  double per_user_tok_s = 0;
  Summary ttft_ms;
  // Per chunk: gaps between consecutive content chunks of a request.
  Summary itl_ms;
  Summary tpot_ms;
  Summary e2e_ms;
  // Per token: each chunk gap divided over the tokens the chunk carried (exact
  // with continuous usage, else the request's mean tokens per chunk).
  Summary token_latency_ms;
  double tokens_per_chunk = 0;
  // Completed requests whose tokens were counted from chunks (no usage came).
  int tokens_from_chunks = 0;

  // The client's own cost: CPU of the event-loop thread and events parsed, to
  // show the client was not the bottleneck.
  double client_cpu_s = 0;
  std::int64_t events = 0;

  std::vector<std::string> warnings;
  std::vector<RequestRecord> records;

  // Set by a caller that knows the path to the server, never by the engine
  // (specctl run with the client on this machine): the median round trip of
  // the SSH tunnel around the level, part of every TTFT measured through it.
  std::optional<double> tunnel_rtt_ms;
  // Why earlier tries of this level were thrown away and it was measured again
  // (the control connection dropped or stalled during them); empty when it was not.
  std::vector<std::string> remeasured;

  int failures_of(FailureKind kind) const { return failures[static_cast<std::size_t>(kind)]; }
};

// Fills a level's counts and statistics from its records, duration_s and client figures.
void aggregate(LevelResult& level);

// Where a level's output token counts came from: "usage", "chunks" (a lower
// bound), or "mixed" when only some requests sent usage.
std::string token_source(const LevelResult& level);

// Figures that look better than the server is, and say why; nullopt when these look sound.
// The server's prefix cache served more than 10% of the prompt tokens (sums over
// a benchmark; -1 when unknown): TTFT and throughput are flattered.
std::optional<std::string> prefix_cache_flag(std::string_view benchmark, std::int64_t prompt_tokens,
                                             std::int64_t cached_tokens);
// Among completed requests that report drafted and accepted tokens, some prompt
// was sent more than once, and either every prompt sent more than once had the
// same (drafted, accepted) on each of its requests with at least 90% accepted, or
// the later sends accepted at least 1.5x (and 16 more) tokens a request than the
// first sends of the same prompts (a speculator that learns from earlier
// requests): the accept length measures repeated text, not the workload.
std::optional<std::string> repeated_acceptance_flag(std::string_view benchmark,
                                                    const std::vector<RequestRecord>& records);

struct SingleStreamRun {
  int run = 0;
  bool ok = false;
  // Output tokens / E2E, as the seeds' benchmark_eagle3.py reports a run.
  double tok_s = 0;
  // (tokens - 1) / (E2E - TTFT): the decode speed without the prefill.
  double decode_tok_s = 0;
  int output_tokens = 0;
  double ttft_ms = 0;
  double e2e_ms = 0;
};

// Why a mode ended before running everything it planned.
enum class Ended { normally, interrupted, timed_out };

struct SingleStreamResult {
  std::vector<SingleStreamRun> runs;
  // Over successful runs; stdev is the sample stdev (n - 1), as run-to-run spread.
  double mean = 0;
  double median = 0;
  double stdev = 0;
  LevelResult level;
  Ended ended = Ended::normally;
};

// Fills a single-stream result's runs, mean, median and stdev from its level's records.
void summarize_runs(SingleStreamResult& result);

struct ConcurrencyResult {
  std::vector<LevelResult> levels;
  Ended ended = Ended::normally;
};

struct RateResult {
  std::vector<LevelResult> levels;
  Ended ended = Ended::normally;
};

} // namespace specctl::bench
