#pragma once

// Exact prompt lengths without a tokenizer in specctl: the server counts. Random and
// shared-prefix requests carry a target length (WorkloadRequest::input_tokens); each is
// trimmed or extended by calibrate() until the server counts it within ±1 token.
// Nothing here is timed: it runs before a benchmark's warmup.

#include <specctl/bench/request.hpp>
#include <specctl/bench/workload.hpp>
#include <specctl/util/error.hpp>

#include <expected>
#include <string>
#include <vector>

namespace specctl::bench {

struct CalibrationResult {
  // Requests brought to their target, and the counts that took.
  int calibrated = 0;
  int counts = 0;
  // "/tokenize" (with an offset measured once against usage.prompt_tokens), or
  // "usage" (a max_tokens: 1 request per count, where the server has no /tokenize).
  std::string method;
  // What the server's usage added to its /tokenize count for the same text (a BOS
  // token, a chat template); 0 with the usage method.
  int offset = 0;
};

// Counts a text as the server will count it in a request of `options.endpoint`.
// Probes once: POST /tokenize ({"prompt", "content", "add_special": true}: vLLM's and
// SGLang's field is prompt, llama.cpp's content; the count is "count", else the length
// of "tokens"), and one max_tokens: 1 request of the same text, whose
// usage.prompt_tokens gives the offset. Without a /tokenize, every count is such a request.
class ServerTokenCounter {
public:
  ServerTokenCounter(Target target, RequestOptions options);
  std::expected<int, Error> operator()(const std::string& text);
  const std::string& method() const { return m_method; }
  int offset() const { return m_offset; }
  int counts() const { return m_counts; }

private:
  std::expected<int, Error> by_usage(const std::string& text);
  std::expected<int, Error> by_tokenize(const std::string& text);

  Target m_target;
  RequestOptions m_options;
  std::string m_method;
  int m_offset = 0;
  int m_counts = 0;
};

// Calibrates every text request with a target length (input_tokens > 0); chats and
// requests without a target are left as they are. The first failure stops it, naming
// the request. Sends nothing when no request has a target.
std::expected<CalibrationResult, Error> calibrate_requests(std::vector<WorkloadRequest>& requests,
                                                           const Target& target, const RequestOptions& options);

} // namespace specctl::bench
