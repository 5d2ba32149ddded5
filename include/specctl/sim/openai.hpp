#pragma once

#include <specctl/sim/batch_engine.hpp>
#include <specctl/sim/prefix_cache.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace specctl::sim {

enum class Endpoint { completions, chat };
enum class FinishReason { length, stop };

// A validated POST /v1/completions or /v1/chat/completions body.
struct GenerationRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model{}; // echoed back, as SGLang does
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;
  int max_tokens = 16;
  int prompt_tokens = 1;
  // Tokens the simulated model produces: max_tokens, or fewer when it "meets
  // EOS" first (only without ignore_eos), and why it stops.
  int target_tokens = 16;
  FinishReason finish_reason = FinishReason::length;
  // One key per prompt token, for the prefix cache.
  SharedTokenKeys token_keys{};
  // The built-in spec-decode category the prompt (or last user message) ends with; -1: none.
  int category = -1;
};

// Chat templates add a few tokens around every message and the conversation.
inline constexpr int k_chat_tokens_per_message = 4;
inline constexpr int k_chat_tokens_per_chat = 3;

// A prompt as specsim counts it: usage.prompt_tokens, a hash for the natural
// output length, a key per token, and the text a built-in prompt is matched
// against (the prompt, or the last user message of a chat).
struct PromptInfo {
  int tokens = 0;
  std::uint64_t hash = 0;
  SharedTokenKeys keys{};
  std::string match_text{};
};

// The prompt of a completions body ("prompt") or a chat body ("messages"); the
// error is the message of a 400 answer. /tokenize counts with the same code.
std::expected<PromptInfo, std::string> prompt_info(Endpoint endpoint, const nlohmann::json& body);

// Parses a request body. The error is the message of a 400 answer.
std::expected<GenerationRequest, std::string> parse_generation_request(Endpoint endpoint, std::string_view body,
                                                                       std::string_view served_model, int context_len);

// Roughly four characters a token, as a tokenizer-free stand-in.
int approximate_tokens(std::string_view text);

// The response id of a request: 32 hex digits, like SGLang's.
std::string response_id(RequestId id);

// Appends `text` as a JSON string literal (quotes included).
void append_json_string(std::string& out, std::string_view text);

// Appends the text of tokens [first, first + count) of a response: a
// deterministic stream of words, each token one word with its leading space.
void append_token_text(std::string& out, std::uint64_t seed, long first, int count);

// The OpenAI error body SGLang sends: {"object":"error","message":...}.
std::string error_body(int code, std::string_view type, std::string_view message);

// Formats one response's server-sent events in the exact shapes of
// REFERENCE.md. The constant head of every event is rendered once, so a
// token event costs a few appends (the flood profile needs that).
class ChunkFormatter {
public:
  ChunkFormatter(Endpoint endpoint, std::string_view id, long created, std::string_view model, std::uint64_t text_seed);

  // Chat only: the first chunk, carrying just the assistant role.
  void append_role(std::string& out) const;
  // One event carrying tokens [first, first + count); a finish reason on the last.
  void append_tokens(std::string& out, long first, int count, std::optional<FinishReason> finish) const;
  // The include_usage chunk: "choices": [] and the token counts.
  // `cached`: usage.prompt_tokens_details.cached_tokens, when the engine reports it.
  void append_usage(std::string& out, int prompt_tokens, int completion_tokens,
                    std::optional<int> cached = std::nullopt) const;
  static void append_done(std::string& out);

  // The whole non-streaming response body.
  std::string full_response(int prompt_tokens, int completion_tokens, FinishReason finish,
                            std::optional<int> cached = std::nullopt) const;

private:
  Endpoint m_endpoint;
  std::uint64_t m_text_seed;
  std::string m_head;      // {"id":...,"object":...,"created":...,"model":...,
  std::string m_token_pre; // "choices":[{"index":0,"text":"  (or "delta":{"content":")
  std::string m_token_mid; // ","logprobs":null,"finish_reason":  (or "},"logprobs"...)
};

// One request's `timings` as llama.cpp reports them (server_slot_stats::to_json
// in tools/server/server-common.cpp); draft_n and draft_n_accepted only when
// something was drafted.
struct LlamaTimings {
  long cache_n = 0;
  long prompt_n = 0;
  double prompt_ms = 0.0;
  long predicted_n = 0;
  double predicted_ms = 0.0;
  long draft_n = 0;
  long draft_n_accepted = 0;
};

std::string llama_timings_json(const LlamaTimings& timings);

// llama-server's events (tools/server/server-task.cpp, keys in its order):
// completions send one event per token and a last one with empty text,
// finish_reason, usage and timings; chat sends a role-only first delta
// (content null), one delta per token, a finish_reason-only delta, then (with
// include_usage) {"choices": [], "usage": ...}; timings ride on the last.
class LlamaFormatter {
public:
  LlamaFormatter(Endpoint endpoint, std::string_view id, long created, std::string_view model, std::uint64_t text_seed);

  void append_role(std::string& out) const;
  // Tokens [first, first + count), one event each.
  void append_tokens(std::string& out, long first, int count) const;
  void append_final(std::string& out, FinishReason finish, int prompt_tokens, int completion_tokens,
                    const LlamaTimings& timings, bool include_usage) const;
  std::string full_response(int prompt_tokens, int completion_tokens, FinishReason finish,
                            const LlamaTimings& timings) const;

private:
  Endpoint m_endpoint;
  std::string m_id;
  long m_created;
  std::string m_model;
  std::uint64_t m_text_seed;
};

// llama.cpp's llama_build_info(): "b<build>-<commit>"; a build without git
// information says "b0-unknown", as the capture in tests/data/engine-logs/llamacpp-3f545bec does.
inline constexpr std::string_view k_llama_build_info = "b0-unknown";

} // namespace specctl::sim
