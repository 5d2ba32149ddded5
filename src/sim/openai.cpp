#include <specctl/sim/openai.hpp>
#include <specctl/sim/spec_categories.hpp>
#include <specctl/sim/tokenize.hpp>

#include <specctl/util/hash.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>

namespace specctl::sim {
namespace {

// 64 plain words: no character needs JSON escaping, so token text is copied as is.
constexpr std::array<std::string_view, 64> k_words{
    " the",   " model",  " of",      " attention", " a",      " token", " and",     " is",      " to",       " in",
    " each",  " layer",  " with",    " GPU",       " that",   " for",   " we",      " compute", " its",      " weights",
    " as",    " on",     " memory",  " by",        " this",   " batch", " kernel",  " from",    " are",      " cache",
    " be",    " at",     " gravity", " tree",      " insert", " node",  " market",  " price",   " equation", " space",
    " time",  " curve",  " wave",    " key",       " value",  " root",  " economy", " labor",   ",",         ".",
    " which", " when",   " more",    " than",      " one",    " two",   " first",   " then",    " so",       " it",
    " data",  " system", " result",  " order",
};
constexpr std::uint64_t k_word_mask = k_words.size() - 1;
// An odd stride walks all 64 words before repeating.
constexpr std::uint64_t k_word_stride = 37;

// Outputs stop at EOS somewhere in [64, 1024) tokens unless ignore_eos.
constexpr int k_min_natural_tokens = 64;
constexpr int k_natural_token_span = 960;
// OpenAI's default for /v1/completions.
constexpr int k_default_completion_tokens = 16;

std::string_view finish_text(std::optional<FinishReason> finish) {
  if (!finish) {
    return "null";
  }
  return *finish == FinishReason::length ? "\"length\"" : "\"stop\"";
}

// "usage":{...}: SGLang's and vLLM's UsageInfo with prompt_tokens_details only
// when cached tokens are reported (SGLang's UsageProcessor._details_if_cached,
// vLLM's serving code under --enable-prompt-tokens-details).
void append_usage_json(std::string& out, int prompt_tokens, int completion_tokens, std::optional<int> cached) {
  out += fmt::format("\"usage\":{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{}", prompt_tokens,
                     completion_tokens, prompt_tokens + completion_tokens);
  if (cached) {
    out += fmt::format(",\"prompt_tokens_details\":{{\"cached_tokens\":{}}}", *cached);
  }
  out += '}';
}

std::expected<PromptInfo, std::string> completion_prompt(const nlohmann::json& body) {
  if (!body.contains("prompt")) {
    return std::unexpected("field \"prompt\" is required");
  }
  const auto& prompt = body["prompt"];
  const auto text_prompt = [](const std::string& text) {
    return PromptInfo{approximate_tokens(text), util::fnv1a_64(text),
                      std::make_shared<const TokenKeys>(text_token_keys(text)), text};
  };
  if (prompt.is_string()) {
    return text_prompt(prompt.get_ref<const std::string&>());
  }
  if (prompt.is_array() && !prompt.empty() && prompt.front().is_number_integer()) {
    TokenKeys keys;
    for (const auto& id : prompt) {
      keys.push_back(util::mix64(id.is_number_integer() ? static_cast<std::uint64_t>(id.get<long long>()) : 0));
    }
    return PromptInfo{static_cast<int>(prompt.size()), util::fnv1a_64(prompt.dump()),
                      std::make_shared<const TokenKeys>(std::move(keys)), ""};
  }
  if (prompt.is_array() && prompt.size() == 1 && prompt.front().is_string()) {
    return text_prompt(prompt.front().get_ref<const std::string&>());
  }
  if (prompt.is_array() && prompt.size() > 1) {
    return std::unexpected("specsim serves one prompt per request; send a batch as separate requests");
  }
  return std::unexpected("field \"prompt\" must be a string, a list of token ids or a list of one string");
}

std::expected<PromptInfo, std::string> chat_prompt(const nlohmann::json& body) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return std::unexpected("field \"messages\" must be a non-empty list");
  }
  PromptInfo info{k_chat_tokens_per_chat, 0, nullptr, ""};
  std::string all_text;
  std::vector<ChatPart> parts;
  for (const auto& message : body["messages"]) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      return std::unexpected("every message needs a \"role\"");
    }
    info.tokens += k_chat_tokens_per_message;
    const auto& role = message["role"].get_ref<const std::string&>();
    parts.push_back(ChatPart{role, all_text.size()});
    const std::size_t start = all_text.size();
    const auto content = message.value("content", nlohmann::json());
    if (content.is_string()) {
      all_text += content.get_ref<const std::string&>();
    } else if (content.is_array()) {
      for (const auto& part : content) {
        if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string()) {
          all_text += part["text"].get_ref<const std::string&>();
        }
      }
    } else if (!content.is_null()) {
      return std::unexpected("message \"content\" must be a string or a list of parts");
    }
    if (role == "user") {
      info.match_text = all_text.substr(start);
    }
  }
  info.tokens += all_text.empty() ? 0 : approximate_tokens(all_text);
  info.hash = util::fnv1a_64(all_text);
  info.keys = std::make_shared<const TokenKeys>(chat_token_keys(parts, all_text));
  return info;
}

std::expected<int, std::string> optional_int(const nlohmann::json& body, const char* key) {
  if (!body.contains(key) || body[key].is_null()) {
    return -1;
  }
  if (!body[key].is_number_integer()) {
    return std::unexpected(fmt::format("field \"{}\" must be an integer", key));
  }
  const auto value = body[key].get<long long>();
  if (value < 1 || value > 1'000'000'000) {
    return std::unexpected(fmt::format("field \"{}\" must be at least 1, got {}", key, value));
  }
  return static_cast<int>(value);
}

} // namespace

std::expected<PromptInfo, std::string> prompt_info(Endpoint endpoint, const nlohmann::json& body) {
  return endpoint == Endpoint::completions ? completion_prompt(body) : chat_prompt(body);
}

int approximate_tokens(std::string_view text) {
  return std::max(1, static_cast<int>((text.size() + 3) / 4));
}

std::string response_id(RequestId id) {
  // Salted so ids do not repeat the fake GPU UUIDs, which use the same mixer.
  constexpr std::uint64_t k_salt = 0x5bd1e9955bd1e995ULL;
  return fmt::format("{:016x}{:016x}", util::mix64(id ^ k_salt), util::mix64(~id ^ k_salt));
}

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_token_text(std::string& out, std::uint64_t seed, long first, int count) {
  std::uint64_t index = seed + static_cast<std::uint64_t>(first) * k_word_stride;
  for (int i = 0; i < count; ++i) {
    out += k_words[index & k_word_mask];
    index += k_word_stride;
  }
}

std::string error_body(int code, std::string_view type, std::string_view message) {
  std::string out = "{\"object\":\"error\",\"message\":";
  append_json_string(out, message);
  out += ",\"type\":";
  append_json_string(out, type);
  out += fmt::format(",\"param\":null,\"code\":{}}}", code);
  return out;
}

std::expected<GenerationRequest, std::string> parse_generation_request(Endpoint endpoint, std::string_view body,
                                                                       std::string_view served_model, int context_len) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& error) {
    return std::unexpected(fmt::format("the body is not valid JSON: {}", error.what()));
  }
  if (!json.is_object()) {
    return std::unexpected("the body must be a JSON object");
  }
  GenerationRequest request{.endpoint = endpoint};
  request.model = json.contains("model") && json["model"].is_string() ? json["model"].get<std::string>()
                                                                      : std::string(served_model);
  const auto flag = [&](const nlohmann::json& object, const char* key) -> std::expected<bool, std::string> {
    if (!object.contains(key) || object[key].is_null()) {
      return false;
    }
    if (!object[key].is_boolean()) {
      return std::unexpected(fmt::format("field \"{}\" must be true or false", key));
    }
    return object[key].get<bool>();
  };
  auto stream = flag(json, "stream");
  auto ignore_eos = flag(json, "ignore_eos");
  if (!stream || !ignore_eos) {
    return std::unexpected(!stream ? stream.error() : ignore_eos.error());
  }
  request.stream = *stream;
  request.ignore_eos = *ignore_eos;
  if (json.contains("stream_options") && json["stream_options"].is_object()) {
    auto usage = flag(json["stream_options"], "include_usage");
    if (!usage) {
      return std::unexpected(usage.error());
    }
    request.include_usage = *usage;
  }
  if (json.contains("n") && json["n"] != 1) {
    return std::unexpected("specsim supports n = 1 only");
  }
  auto prompt = prompt_info(endpoint, json);
  if (!prompt) {
    return std::unexpected(prompt.error());
  }
  request.prompt_tokens = prompt->tokens;
  request.token_keys = prompt->keys;
  request.category = builtin_prompt_category(prompt->match_text);

  auto max_tokens = optional_int(json, "max_tokens");
  if (!max_tokens) {
    return std::unexpected(max_tokens.error());
  }
  if (endpoint == Endpoint::chat && *max_tokens < 0) {
    max_tokens = optional_int(json, "max_completion_tokens");
    if (!max_tokens) {
      return std::unexpected(max_tokens.error());
    }
  }
  const int room = context_len - request.prompt_tokens;
  if (room < 1) {
    return std::unexpected(fmt::format("The input ({} tokens) is longer than the model's context length ({} tokens).",
                                       request.prompt_tokens, context_len));
  }
  if (*max_tokens > room) {
    return std::unexpected(fmt::format("Requested token count exceeds the model's maximum context length of {} "
                                       "tokens. You requested a total of {} tokens: {} tokens from the input "
                                       "messages and {} tokens for the completion.",
                                       context_len, request.prompt_tokens + *max_tokens, request.prompt_tokens,
                                       *max_tokens));
  }
  // Without max_tokens chat runs to EOS (or the context); completions stop at 16.
  const int limit = *max_tokens > 0                     ? *max_tokens
                    : endpoint == Endpoint::completions ? k_default_completion_tokens
                                                        : room;
  request.max_tokens = limit;
  const int natural = k_min_natural_tokens + static_cast<int>(util::mix64(prompt->hash) % k_natural_token_span);
  if (!request.ignore_eos && natural < limit) {
    request.target_tokens = natural;
    request.finish_reason = FinishReason::stop;
  } else {
    request.target_tokens = limit;
    request.finish_reason = FinishReason::length;
  }
  return request;
}

ChunkFormatter::ChunkFormatter(Endpoint endpoint, std::string_view id, long created, std::string_view model,
                               std::uint64_t text_seed)
    : m_endpoint(endpoint), m_text_seed(text_seed) {
  m_head = "{\"id\":";
  append_json_string(m_head, id);
  m_head +=
      endpoint == Endpoint::completions ? ",\"object\":\"text_completion\"" : ",\"object\":\"chat.completion.chunk\"";
  m_head += fmt::format(",\"created\":{},\"model\":", created);
  append_json_string(m_head, model);
  m_head += ',';
  m_token_pre = endpoint == Endpoint::completions ? "\"choices\":[{\"index\":0,\"text\":\""
                                                  : "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"";
  m_token_mid = endpoint == Endpoint::completions ? "\",\"logprobs\":null,\"finish_reason\":"
                                                  : "\"},\"logprobs\":null,\"finish_reason\":";
}

void ChunkFormatter::append_role(std::string& out) const {
  out += "data: ";
  out += m_head;
  out += "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
         "\"finish_reason\":null}]}\n\n";
}

void ChunkFormatter::append_tokens(std::string& out, long first, int count, std::optional<FinishReason> finish) const {
  out += "data: ";
  out += m_head;
  out += m_token_pre;
  append_token_text(out, m_text_seed, first, count);
  out += m_token_mid;
  out += finish_text(finish);
  out += "}]}\n\n";
}

void ChunkFormatter::append_usage(std::string& out, int prompt_tokens, int completion_tokens,
                                  std::optional<int> cached) const {
  out += "data: ";
  out += m_head;
  out += "\"choices\":[],";
  append_usage_json(out, prompt_tokens, completion_tokens, cached);
  out += "}\n\n";
}

void ChunkFormatter::append_done(std::string& out) {
  out += "data: [DONE]\n\n";
}

std::string ChunkFormatter::full_response(int prompt_tokens, int completion_tokens, FinishReason finish,
                                          std::optional<int> cached) const {
  std::string out = m_head;
  if (m_endpoint == Endpoint::chat) {
    // The streaming head says chat.completion.chunk; a whole answer is a chat.completion.
    const auto at = out.find("chat.completion.chunk");
    out.replace(at, std::string_view("chat.completion.chunk").size(), "chat.completion");
    out += "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"";
  } else {
    out += "\"choices\":[{\"index\":0,\"text\":\"";
  }
  append_token_text(out, m_text_seed, 0, completion_tokens);
  out += m_endpoint == Endpoint::chat ? "\"},\"logprobs\":null,\"finish_reason\":"
                                      : "\",\"logprobs\":null,\"finish_reason\":";
  out += finish_text(finish);
  out += "}],";
  append_usage_json(out, prompt_tokens, completion_tokens, cached);
  out += '}';
  return out;
}

std::string llama_timings_json(const LlamaTimings& t) {
  const double prompt_per_token = t.prompt_n > 0 ? t.prompt_ms / static_cast<double>(t.prompt_n) : 0.0;
  const double prompt_per_second = t.prompt_ms > 0.0 ? 1e3 / t.prompt_ms * static_cast<double>(t.prompt_n) : 0.0;
  // The first token comes from the prompt's logits: generation steps are n - 1.
  const long steps = t.predicted_n > 0 ? t.predicted_n - 1 : 0;
  const double predicted_per_token = steps > 0 ? t.predicted_ms / static_cast<double>(steps) : 0.0;
  const double predicted_per_second = t.predicted_ms > 0.0 ? 1e3 / t.predicted_ms * static_cast<double>(steps) : 0.0;
  nlohmann::ordered_json json{{"cache_n", t.cache_n},
                              {"prompt_n", t.prompt_n},
                              {"prompt_ms", t.prompt_ms},
                              {"prompt_per_token_ms", prompt_per_token},
                              {"prompt_per_second", prompt_per_second},
                              {"predicted_n", t.predicted_n},
                              {"predicted_ms", t.predicted_ms},
                              {"predicted_per_token_ms", predicted_per_token},
                              {"predicted_per_second", predicted_per_second}};
  if (t.draft_n > 0) {
    json["draft_n"] = t.draft_n;
    json["draft_n_accepted"] = t.draft_n_accepted;
  }
  return json.dump();
}

namespace {

// usage_json_oaicompat (tools/server/server-task.cpp): cached_tokens is the
// slot's n_prompt_tokens_cache, the same number as timings.cache_n.
nlohmann::ordered_json llama_usage(int prompt_tokens, int completion_tokens, long cached) {
  return nlohmann::ordered_json{{"completion_tokens", completion_tokens},
                                {"prompt_tokens", prompt_tokens},
                                {"total_tokens", completion_tokens + prompt_tokens},
                                {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::string finish_name(FinishReason finish) {
  return finish == FinishReason::length ? "length" : "stop";
}

void append_event(std::string& out, const nlohmann::ordered_json& json) {
  out += "data: ";
  out += json.dump();
  out += "\n\n";
}

} // namespace

LlamaFormatter::LlamaFormatter(Endpoint endpoint, std::string_view id, long created, std::string_view model,
                               std::uint64_t text_seed)
    : m_endpoint(endpoint), m_id(id), m_created(created), m_model(model), m_text_seed(text_seed) {}

void LlamaFormatter::append_role(std::string& out) const {
  append_event(out, nlohmann::ordered_json{{"choices", nlohmann::ordered_json::array({nlohmann::ordered_json{
                                                           {"finish_reason", nullptr},
                                                           {"index", 0},
                                                           {"delta", {{"role", "assistant"}, {"content", nullptr}}}}})},
                                           {"created", m_created},
                                           {"id", m_id},
                                           {"model", m_model},
                                           {"system_fingerprint", k_llama_build_info},
                                           {"object", "chat.completion.chunk"}});
}

void LlamaFormatter::append_tokens(std::string& out, long first, int count) const {
  for (int i = 0; i < count; ++i) {
    std::string text;
    append_token_text(text, m_text_seed, first + i, 1);
    if (m_endpoint == Endpoint::completions) {
      append_event(
          out, nlohmann::ordered_json{
                   {"choices", nlohmann::ordered_json::array({nlohmann::ordered_json{
                                   {"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}}})},
                   {"created", m_created},
                   {"model", m_model},
                   {"system_fingerprint", k_llama_build_info},
                   {"object", "text_completion"},
                   {"id", m_id}});
    } else {
      append_event(out,
                   nlohmann::ordered_json{
                       {"choices", nlohmann::ordered_json::array({nlohmann::ordered_json{
                                       {"finish_reason", nullptr}, {"index", 0}, {"delta", {{"content", text}}}}})},
                       {"created", m_created},
                       {"id", m_id},
                       {"model", m_model},
                       {"system_fingerprint", k_llama_build_info},
                       {"object", "chat.completion.chunk"}});
    }
  }
}

void LlamaFormatter::append_final(std::string& out, FinishReason finish, int prompt_tokens, int completion_tokens,
                                  const LlamaTimings& timings, bool include_usage) const {
  const auto timings_json = nlohmann::ordered_json::parse(llama_timings_json(timings));
  if (m_endpoint == Endpoint::completions) {
    // to_json_oaicompat of the final result: usage always, timings last.
    append_event(out,
                 nlohmann::ordered_json{
                     {"choices",
                      nlohmann::ordered_json::array({nlohmann::ordered_json{
                          {"text", ""}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_name(finish)}}})},
                     {"created", m_created},
                     {"model", m_model},
                     {"system_fingerprint", k_llama_build_info},
                     {"object", "text_completion"},
                     {"usage", llama_usage(prompt_tokens, completion_tokens, timings.cache_n)},
                     {"id", m_id},
                     {"timings", timings_json}});
    return;
  }
  nlohmann::ordered_json finish_chunk{
      {"choices",
       nlohmann::ordered_json::array({nlohmann::ordered_json{
           {"finish_reason", finish_name(finish)}, {"index", 0}, {"delta", nlohmann::ordered_json::object()}}})},
      {"created", m_created},
      {"id", m_id},
      {"model", m_model},
      {"system_fingerprint", k_llama_build_info},
      {"object", "chat.completion.chunk"}};
  if (!include_usage) {
    finish_chunk["timings"] = timings_json;
    append_event(out, finish_chunk);
    return;
  }
  append_event(out, finish_chunk);
  append_event(out, nlohmann::ordered_json{{"choices", nlohmann::ordered_json::array()},
                                           {"created", m_created},
                                           {"id", m_id},
                                           {"model", m_model},
                                           {"system_fingerprint", k_llama_build_info},
                                           {"object", "chat.completion.chunk"},
                                           {"usage", llama_usage(prompt_tokens, completion_tokens, timings.cache_n)},
                                           {"timings", timings_json}});
}

std::string LlamaFormatter::full_response(int prompt_tokens, int completion_tokens, FinishReason finish,
                                          const LlamaTimings& timings) const {
  std::string text;
  append_token_text(text, m_text_seed, 0, completion_tokens);
  nlohmann::ordered_json choice = m_endpoint == Endpoint::completions
                                      ? nlohmann::ordered_json{{"text", text},
                                                               {"index", 0},
                                                               {"logprobs", nullptr},
                                                               {"finish_reason", finish_name(finish)}}
                                      : nlohmann::ordered_json{{"finish_reason", finish_name(finish)},
                                                               {"index", 0},
                                                               {"message", {{"role", "assistant"}, {"content", text}}}};
  return nlohmann::ordered_json{{"choices", nlohmann::ordered_json::array({choice})},
                                {"created", m_created},
                                {"model", m_model},
                                {"system_fingerprint", k_llama_build_info},
                                {"object", m_endpoint == Endpoint::completions ? "text_completion" : "chat.completion"},
                                {"usage", llama_usage(prompt_tokens, completion_tokens, timings.cache_n)},
                                {"id", m_id},
                                {"timings", nlohmann::ordered_json::parse(llama_timings_json(timings))}}
      .dump();
}

} // namespace specctl::sim
