#pragma once

// Exact prompt lengths without a tokenizer in specctl: the server counts. Random and
// shared-prefix requests carry a target length (WorkloadRequest::input_tokens); each is
// trimmed or extended by calibrate() until the server counts it within ±1 token.
// Nothing here is timed: it runs before a benchmark's warmup.

#include <specctl/bench/request.hpp>
#include <specctl/bench/workload.hpp>
#include <specctl/util/error.hpp>

#include <expected>
#include <map>
#include <nlohmann/json.hpp>
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
  // Counts taken from a TokenCounts cache instead of the server.
  int cached = 0;
};

// Counts a server gave, for one model and endpoint: a text's SHA-256 → its token
// count, and how they were taken. Kept in a run's result folder, it spares every
// later variant of the same model (and a resumed run) the calibration's requests.
struct TokenCounts {
  std::string method;
  int offset = 0;
  std::map<std::string, int> counts;

  nlohmann::json to_json() const;
  // Anything but the shape to_json writes reads as empty counts.
  static TokenCounts from_json(const nlohmann::json& j);
};

// Counts a text as the server will count it in a request of `options.endpoint`.
// Probes once: POST /tokenize ({"prompt", "content", "add_special": true}: vLLM's and
// SGLang's field is prompt, llama.cpp's content; the count is "count", else the length
// of "tokens"), and one max_tokens: 1 request of the same text, whose
// usage.prompt_tokens gives the offset. Without a /tokenize, every count is such a request.
class ServerTokenCounter {
public:
  // `known`, when given, answers the texts it holds and learns every new count.
  ServerTokenCounter(Target target, RequestOptions options, TokenCounts* known = nullptr);
  std::expected<int, Error> operator()(const std::string& text);
  const std::string& method() const { return m_method; }
  int offset() const { return m_offset; }
  int counts() const { return m_counts; }
  int cached() const { return m_cached; }

private:
  // The server's count, uncached.
  std::expected<int, Error> count(const std::string& text);
  std::expected<int, Error> by_usage(const std::string& text);
  std::expected<int, Error> by_tokenize(const std::string& text);

  Target m_target;
  RequestOptions m_options;
  std::string m_method;
  int m_offset = 0;
  int m_counts = 0;
  int m_cached = 0;
  TokenCounts* m_known = nullptr;
};

// Calibrates every text request with a target length (input_tokens > 0); chats and
// requests without a target are left as they are. The first failure stops it, naming
// the request. Sends nothing when no request has a target, nor for counts `known` holds.
std::expected<CalibrationResult, Error> calibrate_requests(std::vector<WorkloadRequest>& requests, const Target& target,
                                                           const RequestOptions& options, TokenCounts* known = nullptr);

} // namespace specctl::bench
