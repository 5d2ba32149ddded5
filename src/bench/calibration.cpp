#include <specctl/bench/calibration.hpp>

#include <specctl/http/get.hpp>
#include <specctl/util/sha256.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

namespace specctl::bench {

namespace {

http::GetOptions control_options(const Target& target) {
  http::GetOptions options;
  options.timeout = k_model_query_timeout;
  options.bearer_token = target.api_key;
  return options;
}

// A 200 answer's JSON object, or why there is none.
std::expected<nlohmann::json, Error> json_answer(const std::string& what,
                                                 const std::expected<http::Response, Error>& r) {
  if (!r) {
    return std::unexpected(r.error());
  }
  if (r->status != 200) {
    return std::unexpected(Error(fmt::format("{} answered HTTP {}", what, r->status)));
  }
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::unexpected(Error(fmt::format("{} answered something that is not a JSON object", what)));
  }
  return j;
}

} // namespace

nlohmann::json TokenCounts::to_json() const {
  return {{"method", method}, {"offset", offset}, {"counts", counts}};
}

TokenCounts TokenCounts::from_json(const nlohmann::json& j) {
  TokenCounts out;
  if (!j.is_object() || !j.contains("counts") || !j["counts"].is_object()) {
    return out;
  }
  for (const auto& [hash, count] : j["counts"].items()) {
    if (count.is_number_integer()) {
      out.counts[hash] = count.get<int>();
    }
  }
  if (j.contains("method") && j["method"].is_string()) {
    out.method = j["method"].get<std::string>();
  }
  if (j.contains("offset") && j["offset"].is_number_integer()) {
    out.offset = j["offset"].get<int>();
  }
  return out;
}

ServerTokenCounter::ServerTokenCounter(Target target, RequestOptions options, TokenCounts* known)
    : m_target(std::move(target)), m_options(std::move(options)), m_known(known) {
  if (m_known != nullptr) {
    m_method = m_known->method;
    m_offset = m_known->offset;
  }
}

std::expected<int, Error> ServerTokenCounter::by_usage(const std::string& text) {
  nlohmann::json body = {{"model", m_target.model}, {"max_tokens", 1}, {"temperature", 0}};
  if (m_options.endpoint == Endpoint::chat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", text}}});
  } else {
    body["prompt"] = text;
  }
  const std::string url = m_target.url + std::string(endpoint_path(m_options.endpoint));
  auto j = json_answer("a max_tokens: 1 request", http::post_json(url, body.dump(), control_options(m_target)));
  if (!j) {
    return std::unexpected(j.error());
  }
  const auto usage = j->find("usage");
  if (usage == j->end() || !usage->is_object() || !usage->contains("prompt_tokens") ||
      !(*usage)["prompt_tokens"].is_number_integer()) {
    return std::unexpected(Error("the server's answer has no usage.prompt_tokens to count a prompt by"));
  }
  return (*usage)["prompt_tokens"].get<int>();
}

std::expected<int, Error> ServerTokenCounter::by_tokenize(const std::string& text) {
  const nlohmann::json body = {{"model", m_target.model}, {"prompt", text}, {"content", text}, {"add_special", true}};
  auto j = json_answer("POST /tokenize",
                       http::post_json(m_target.url + "/tokenize", body.dump(), control_options(m_target)));
  if (!j) {
    return std::unexpected(j.error());
  }
  if (j->contains("count") && (*j)["count"].is_number_integer()) {
    return (*j)["count"].get<int>();
  }
  if (j->contains("tokens") && (*j)["tokens"].is_array()) {
    return static_cast<int>((*j)["tokens"].size());
  }
  return std::unexpected(Error("POST /tokenize answered neither a count nor tokens"));
}

std::expected<int, Error> ServerTokenCounter::operator()(const std::string& text) {
  std::string hash;
  if (m_known != nullptr) {
    hash = util::sha256_hex(text);
    if (auto it = m_known->counts.find(hash); it != m_known->counts.end()) {
      ++m_cached;
      return it->second;
    }
  }
  auto counted = count(text);
  if (counted && m_known != nullptr) {
    m_known->method = m_method;
    m_known->offset = m_offset;
    m_known->counts[hash] = *counted;
  }
  return counted;
}

std::expected<int, Error> ServerTokenCounter::count(const std::string& text) {
  ++m_counts;
  if (m_method.empty()) {
    // A probe text of no request decides: /tokenize where the server has one,
    // corrected once by what a real request of the same text counts. (A real request
    // of a workload's text would put it in the server's prefix cache.)
    constexpr const char* k_probe = "specctl counts tokens: 12 apples, 7 pears; and a quick brown fox.";
    auto real = by_usage(k_probe);
    if (!real) {
      return std::unexpected(real.error());
    }
    if (auto tokenized = by_tokenize(k_probe)) {
      m_method = "/tokenize";
      m_offset = *real - *tokenized;
    } else {
      m_method = "usage";
    }
  }
  if (m_method == "usage") {
    return by_usage(text);
  }
  auto tokenized = by_tokenize(text);
  if (!tokenized) {
    return std::unexpected(tokenized.error());
  }
  return *tokenized + m_offset;
}

std::expected<CalibrationResult, Error> calibrate_requests(std::vector<WorkloadRequest>& requests, const Target& target,
                                                           const RequestOptions& options, TokenCounts* known) {
  ServerTokenCounter counter(target, options, known);
  const TokenCounter count = [&counter](const std::string& text) { return counter(text); };
  CalibrationResult result;
  // A prefix several requests share (a group's system prompt, a random prefix) is
  // fitted once, to its share of the target by specctl's estimate, so it stays the
  // same bytes in every request of the group; then each request's own part is fitted.
  std::map<std::string, std::string> fitted;
  for (auto& request : requests) {
    if (request.input_tokens <= 0 || !request.messages.empty() || request.shared_bytes == 0 ||
        request.shared_bytes >= request.prompt.size()) {
      continue;
    }
    const std::string shared = request.prompt.substr(0, request.shared_bytes);
    auto found = fitted.find(shared);
    if (found == fitted.end()) {
      const std::size_t core_end = shared.find_last_not_of(" \n\t") + 1;
      WorkloadRequest prefix{.id = request.id + " (its shared prefix)", .prompt = shared.substr(0, core_end)};
      const double share =
          static_cast<double>(estimate_tokens(prefix.prompt)) / std::max(estimate_tokens(request.prompt), 1);
      const int target_tokens = std::max(1, static_cast<int>(std::lround(request.input_tokens * share)));
      if (auto done = calibrate(prefix, target_tokens, count); !done) {
        return std::unexpected(
            Error(fmt::format("calibrating prompt lengths against the server: {}", done.error().what()),
                  done.error().kind()));
      }
      found = fitted.emplace(shared, prefix.prompt + shared.substr(core_end)).first;
    }
    request.prompt = found->second + request.prompt.substr(request.shared_bytes);
    request.shared_bytes = found->second.size();
  }
  for (auto& request : requests) {
    if (request.input_tokens <= 0 || !request.messages.empty()) {
      continue;
    }
    auto done = calibrate(request, request.input_tokens, count);
    if (!done) {
      return std::unexpected(Error(
          fmt::format("calibrating prompt lengths against the server: {}", done.error().what()), done.error().kind()));
    }
    ++result.calibrated;
  }
  result.counts = counter.counts();
  result.cached = counter.cached();
  result.method = counter.method();
  result.offset = counter.offset();
  return result;
}

} // namespace specctl::bench
