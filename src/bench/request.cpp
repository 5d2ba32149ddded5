#include <specctl/bench/request.hpp>

#include <specctl/http/curl.hpp>
#include <specctl/http/get.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace specctl::bench {

namespace {

// How much of an unexpected answer an error message quotes.
constexpr std::size_t k_quote_bytes = 200;

std::string quote_start(std::string_view body) {
  std::string out(body.substr(0, k_quote_bytes));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') {
      c = ' ';
    }
  }
  if (body.size() > k_quote_bytes) {
    out += "...";
  }
  return out;
}

} // namespace

std::string_view endpoint_name(Endpoint endpoint) {
  return endpoint == Endpoint::chat ? "chat" : "completions";
}

std::string_view endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions";
}

std::string build_body(const RequestOptions& options, std::string_view model, const WorkloadRequest& request,
                       std::string_view unique) {
  nlohmann::json body;
  body["model"] = model;
  if (!request.messages.empty()) {
    // The unique text goes before the last user turn: system prompts and earlier turns
    // are what a workload shares.
    std::size_t at = request.messages.size() - 1;
    for (std::size_t i = request.messages.size(); i-- > 0;) {
      if (request.messages[i].role == "user") {
        at = i;
        break;
      }
    }
    nlohmann::json messages = nlohmann::json::array();
    for (std::size_t i = 0; i < request.messages.size(); ++i) {
      const auto& m = request.messages[i];
      messages.push_back({{"role", m.role}, {"content", i == at ? std::string(unique) + m.content : m.content}});
    }
    body["messages"] = std::move(messages);
  } else {
    const std::size_t shared = std::min(request.shared_bytes, request.prompt.size());
    std::string prompt = request.prompt;
    prompt.insert(shared, unique);
    if (options.endpoint == Endpoint::chat) {
      body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", std::move(prompt)}}});
    } else {
      body["prompt"] = std::move(prompt);
    }
  }
  body["max_tokens"] = request.output_tokens > 0 ? request.output_tokens : options.max_tokens;
  body["temperature"] = options.temperature;
  body["ignore_eos"] = options.ignore_eos;
  body["stream"] = true;
  if (options.include_usage) {
    nlohmann::json stream_options = {{"include_usage", true}};
    if (options.continuous_usage) {
      stream_options["continuous_usage_stats"] = true;
    }
    body["stream_options"] = stream_options;
  }
  return body.dump();
}

std::string check_requests(const RequestOptions& options, const std::vector<WorkloadRequest>& requests) {
  if (requests.empty()) {
    return "the benchmark has no prompts";
  }
  for (const auto& r : requests) {
    if (!r.messages.empty() && options.endpoint != Endpoint::chat) {
      return fmt::format("prompt {} is a chat (messages): it needs the chat endpoint (endpoint: chat, --endpoint chat)",
                         r.id);
    }
    if (r.messages.empty() && r.prompt.empty()) {
      return fmt::format("prompt {} is empty", r.id);
    }
  }
  return {};
}

std::expected<std::string, Error> query_model(const std::string& base_url, const std::string& api_key) {
  const std::string url = base_url + "/v1/models";
  http::GetOptions options;
  options.timeout = k_model_query_timeout;
  options.bearer_token = api_key;
  auto response = http::get(url, options);
  if (!response) {
    return std::unexpected(Error(fmt::format("cannot ask the server for its model: {}", response.error().what()),
                                 response.error().kind()));
  }
  const std::string shown = http::redact_url(url);
  if (response->status != 200) {
    return std::unexpected(Error(fmt::format("GET {} answered HTTP {}: {} (give the model with --model to skip this)",
                                             shown, response->status, quote_start(response->body))));
  }
  const nlohmann::json json = nlohmann::json::parse(response->body, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("data") || !json["data"].is_array()) {
    return std::unexpected(Error(
        fmt::format("GET {} answered something that is not a model list: \"{}\"", shown, quote_start(response->body))));
  }
  for (const auto& item : json["data"]) {
    if (item.is_object() && item.contains("id") && item["id"].is_string()) {
      return item["id"].get<std::string>();
    }
  }
  return std::unexpected(Error(fmt::format("GET {} lists no model", shown)));
}

Target resolve_target(const Target& target) {
  auto base = http::normalize_base_url(target.url);
  if (!base) {
    throw base.error();
  }
  Target resolved = target;
  resolved.url = *base;
  if (resolved.model.empty()) {
    auto model = query_model(resolved.url, resolved.api_key);
    if (!model) {
      throw model.error();
    }
    resolved.model = *model;
  }
  return resolved;
}

} // namespace specctl::bench
