#pragma once

// What the benchmark needs from one streamed OpenAI chunk, read without
// building a JSON document: the hot path sees one of these per token.

#include <cstdint>
#include <string_view>

namespace specctl::bench {

struct ChunkFields {
  // The response id ("id"), raw JSON string contents (escapes not decoded).
  std::string_view id;
  // "choices" holds at least one element.
  bool has_choices = false;
  // choices[0].text (completions) or choices[0].delta.content /
  // .reasoning_content (chat) is a non-empty string: the chunk carries output.
  bool has_content = false;
  // choices[0].finish_reason when it is a string ("length", "stop", "abort").
  std::string_view finish_reason;
  // usage.completion_tokens / usage.prompt_tokens; -1 when absent or null.
  std::int64_t completion_tokens = -1;
  std::int64_t prompt_tokens = -1;
  // usage.prompt_tokens_details.cached_tokens: prompt tokens the server's prefix cache served.
  std::int64_t cached_tokens = -1;
  // llama.cpp's "timings" object (with the usage): its own figures for the request.
  // draft_n / draft_n_accepted appear only when it speculated. -1 when absent.
  std::int64_t timings_predicted_n = -1;
  double timings_predicted_per_second = -1;
  std::int64_t timings_draft_n = -1;
  std::int64_t timings_draft_accepted = -1;
  bool has_timings = false;
  // A top-level "error" that is not null: the server reports a failure in-stream.
  bool has_error = false;
  // error.message, or the error itself when it is a string (raw contents).
  std::string_view error_message;
};

// Validates `json` strictly (RFC 8259 grammar; UTF-8 is not checked) and fills
// `out` with the fields above. False when it is not one well-formed JSON object.
bool scan_chunk(std::string_view json, ChunkFields& out);

} // namespace specctl::bench
