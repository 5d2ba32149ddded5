#pragma once

// The OpenAI-compatible request a benchmark sends, and the server it goes to.

#include <specctl/bench/workload_spec.hpp>
#include <specctl/util/error.hpp>

#include <chrono>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::bench {

// A request gives up after this long: long enough for 512 tokens at 2 tok/s
// behind a queue, short enough that a hung server ends a run.
inline constexpr std::chrono::milliseconds k_default_request_timeout = std::chrono::minutes{10};
// Connecting to a healthy server on a LAN takes milliseconds.
inline constexpr std::chrono::milliseconds k_default_connect_timeout = std::chrono::seconds{10};
// A streaming server sends a byte at least every few hundred milliseconds once
// it works on a request; a minute of silence (a queue behind a long prefill
// included) is a server that hangs.
inline constexpr std::chrono::milliseconds k_default_idle_timeout = std::chrono::seconds{60};
// /v1/models is answered at once by a ready server.
inline constexpr std::chrono::milliseconds k_model_query_timeout = std::chrono::seconds{30};

enum class Endpoint { completions, chat };

// "completions" / "chat".
std::string_view endpoint_name(Endpoint endpoint);
// "/v1/completions" / "/v1/chat/completions".
std::string_view endpoint_path(Endpoint endpoint);

struct Target {
  // Base URL of the server: "http://127.0.0.1:30000" (a trailing "/v1" is accepted).
  std::string url;
  // Model name sent in every request; empty means the first model of /v1/models.
  std::string model;
  // Sent as a Bearer token when not empty; never printed or written to results.
  std::string api_key;
};

struct RequestOptions {
  Endpoint endpoint = Endpoint::completions;
  int max_tokens = 512;
  // With ignore_eos every request generates exactly max_tokens: fixed output length.
  bool ignore_eos = true;
  double temperature = 0.0;
  // Asks for the usage chunk (stream_options.include_usage), the source of
  // exact token counts. Off only for servers that refuse stream_options.
  bool include_usage = true;
  // Asks for usage on every chunk (stream_options.continuous_usage_stats, vLLM
  // and SGLang), which makes the tokens of each chunk exact. Off by default:
  // not every server accepts it.
  bool continuous_usage = false;
  std::chrono::milliseconds timeout = k_default_request_timeout;
  std::chrono::milliseconds connect_timeout = k_default_connect_timeout;
  // No byte of the answer for this long ends the request as stalled; 0 turns it off.
  std::chrono::milliseconds idle_timeout = k_default_idle_timeout;
};

// The JSON body of one streaming request: model, prompt (or the request's messages, or
// the prompt as one user message on the chat endpoint), max_tokens (the request's own
// output length, else options.max_tokens), temperature, ignore_eos, stream and
// stream_options (when usage is asked for). `unique` is inserted where the request's
// shared prefix ends (at its start when it shares none; in a chat, at the start of the
// last user message), so a prefix the workload shares on purpose stays cacheable and
// nothing after it is. A chat request on the completions endpoint is the caller's error
// (check_requests).
std::string build_body(const RequestOptions& options, std::string_view model, const WorkloadRequest& request,
                       std::string_view unique = {});

// Empty, or the one-line reason these requests cannot be sent with these options (a
// chat request on the completions endpoint, an empty prompt).
std::string check_requests(const RequestOptions& options, const std::vector<WorkloadRequest>& requests);

// The first model id from GET /v1/models. Errors name the URL and what came back.
std::expected<std::string, Error> query_model(const std::string& base_url, const std::string& api_key);

// A target ready to use: URL checked and normalised, model filled in from the
// server when missing. Throws specctl::Error (bad_input for a bad URL).
Target resolve_target(const Target& target);

} // namespace specctl::bench
