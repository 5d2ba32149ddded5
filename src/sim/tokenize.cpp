// POST /tokenize in each engine's shape, counted exactly as usage.prompt_tokens:
// vLLM's ServingTokenization.create_tokenize (entrypoints/serve/tokenize/), SGLang's
// OpenAIServingTokenize (entrypoints/openai/serving_tokenize.py), llama.cpp's
// post_tokenize (tools/server/server-context.cpp). docs/specsim.md has the table.

#include <specctl/sim/openai.hpp>
#include <specctl/sim/tokenize.hpp>

#include <specctl/util/hash.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace specctl::sim {
namespace {

constexpr std::size_t k_bytes_per_token = 4;
constexpr std::uint64_t k_template_salt = 0x7e3a9c15b2d4f601ULL;
constexpr std::uint64_t k_vocab_mask = (1U << 17) - 1;

using ordered = nlohmann::ordered_json;

TokenizeAnswer json_answer(unsigned status, const ordered& json) {
  return TokenizeAnswer{status, json.dump(), "application/json"};
}

TokenizeAnswer openai_error(std::string_view message) {
  return TokenizeAnswer{400, error_body(400, "BadRequestError", message), "application/json"};
}

ordered ids_of(const TokenKeys& keys) {
  ordered ids = ordered::array();
  for (const auto key : keys) {
    ids.push_back(token_id(key));
  }
  return ids;
}

// The pieces of a text prompt (vLLM's return_token_strs); a chat's template
// tokens have no text of their own here, so a chat gets none.
ordered pieces_of(std::string_view text, std::size_t count) {
  ordered pieces = ordered::array();
  for (std::size_t i = 0; i < count; ++i) {
    pieces.push_back(std::string(token_piece(text, i)));
  }
  return pieces;
}

// vLLM: TokenizeCompletionRequest {"prompt": str} or TokenizeChatRequest
// {"messages": [...]}; TokenizeResponse {count, max_model_len, tokens, token_strs}.
TokenizeAnswer vllm_tokenize(const nlohmann::json& body, int max_model_len) {
  const bool chat = body.contains("messages");
  if (!chat && !(body.contains("prompt") && body["prompt"].is_string())) {
    return openai_error("field \"prompt\" (a string) or \"messages\" is required");
  }
  auto info = prompt_info(chat ? Endpoint::chat : Endpoint::completions, body);
  if (!info) {
    return openai_error(info.error());
  }
  const bool strs = body.value("return_token_strs", false);
  ordered token_strs = nullptr;
  if (strs) {
    token_strs = chat ? ordered::array() : pieces_of(body["prompt"].get_ref<const std::string&>(), info->keys->size());
  }
  return json_answer(200, ordered{{"count", info->tokens},
                                  {"max_model_len", max_model_len},
                                  {"tokens", ids_of(*info->keys)},
                                  {"token_strs", token_strs}});
}

// SGLang: exactly one of "prompt" (a string or a list of strings) and "messages";
// TokenizeResponse(tokens, count, max_model_len), lists for a list of prompts.
TokenizeAnswer sglang_tokenize(const nlohmann::json& body, int max_model_len) {
  const bool has_messages = body.contains("messages") && !body["messages"].is_null();
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  if (has_messages == has_prompt) {
    return openai_error("Exactly one of 'prompt' or 'messages' must be provided.");
  }
  if (has_prompt && body["prompt"].is_array() && !body["prompt"].empty() && body["prompt"].front().is_string()) {
    ordered tokens = ordered::array();
    ordered counts = ordered::array();
    for (const auto& text : body["prompt"]) {
      if (!text.is_string()) {
        return openai_error("field \"prompt\" must be a string or a list of strings");
      }
      const auto keys = text_token_keys(text.get_ref<const std::string&>());
      tokens.push_back(ids_of(keys));
      counts.push_back(keys.size());
    }
    return json_answer(200, ordered{{"tokens", tokens}, {"count", counts}, {"max_model_len", max_model_len}});
  }
  auto info = prompt_info(has_messages ? Endpoint::chat : Endpoint::completions, body);
  if (!info) {
    return openai_error(info.error());
  }
  return json_answer(
      200, ordered{{"tokens", ids_of(*info->keys)}, {"count", info->tokens}, {"max_model_len", max_model_len}});
}

// llama.cpp: {"content": text or token ids, "add_special", "parse_special",
// "with_pieces"} -> {"tokens": ids} or {"tokens": [{"id", "piece"}]}; without
// content, {"tokens": []}. specsim's tokenizer has no BOS, so add_special
// changes nothing here (a real model adds one with it: docs/specsim.md).
TokenizeAnswer llama_tokenize(const nlohmann::json& body) {
  ordered tokens = ordered::array();
  if (body.contains("content")) {
    const auto& content = body["content"];
    const bool with_pieces = body.value("with_pieces", false);
    if (content.is_string()) {
      const auto& text = content.get_ref<const std::string&>();
      const auto keys = text_token_keys(text);
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (!with_pieces) {
          tokens.push_back(token_id(keys[i]));
          continue;
        }
        const std::string piece(token_piece(text, i));
        ordered piece_json = piece;
        if (util::invalid_utf8_at(piece)) {
          // Not valid UTF-8 on its own: the piece's bytes, as llama.cpp sends them.
          piece_json = ordered::array();
          for (const unsigned char c : piece) {
            piece_json.push_back(static_cast<int>(c));
          }
        }
        tokens.push_back(ordered{{"id", token_id(keys[i])}, {"piece", piece_json}});
      }
    } else if (content.is_array()) {
      for (const auto& item : content) {
        if (item.is_number_integer()) {
          tokens.push_back(with_pieces ? ordered{{"id", item}, {"piece", ""}} : ordered(item));
        }
      }
    }
  }
  return TokenizeAnswer{200, ordered{{"tokens", tokens}}.dump(), "application/json; charset=utf-8"};
}

} // namespace

TokenKeys text_token_keys(std::string_view text) {
  TokenKeys keys;
  const std::size_t count = static_cast<std::size_t>(approximate_tokens(text));
  keys.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    keys.push_back(util::fnv1a_64(token_piece(text, i)));
  }
  return keys;
}

std::string_view token_piece(std::string_view text, std::size_t index) {
  const std::size_t start = index * k_bytes_per_token;
  return start >= text.size() ? std::string_view() : text.substr(start, k_bytes_per_token);
}

int token_id(std::uint64_t key) {
  return static_cast<int>(util::mix64(key) & k_vocab_mask);
}

TokenKeys chat_token_keys(std::span<const ChatPart> parts, std::string_view all_text) {
  TokenKeys keys;
  for (int i = 0; i < k_chat_tokens_per_chat; ++i) {
    keys.push_back(util::mix64(k_template_salt + static_cast<std::uint64_t>(i)));
  }
  const std::size_t pieces = all_text.empty() ? 0 : static_cast<std::size_t>(approximate_tokens(all_text));
  std::size_t piece = 0;
  for (std::size_t m = 0; m < parts.size(); ++m) {
    const std::uint64_t role = util::fnv1a_64(parts[m].role) ^ k_template_salt;
    for (int i = 0; i < k_chat_tokens_per_message; ++i) {
      keys.push_back(util::mix64(role + static_cast<std::uint64_t>(i)));
    }
    const std::size_t end = m + 1 < parts.size() ? parts[m + 1].start : all_text.size();
    for (; piece < pieces && piece * k_bytes_per_token < end; ++piece) {
      keys.push_back(util::fnv1a_64(token_piece(all_text, piece)));
    }
  }
  return keys;
}

TokenizeAnswer tokenize_answer(Engine engine, std::string_view body, int max_model_len) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& error) {
    if (engine == Engine::llamacpp) {
      return TokenizeAnswer{500,
                            fmt::format(R"({{"error":{{"code":500,"message":{},"type":"server_error"}}}})",
                                        nlohmann::json(error.what()).dump()),
                            "application/json; charset=utf-8"};
    }
    return openai_error(fmt::format("the body is not valid JSON: {}", error.what()));
  }
  if (!json.is_object()) {
    return engine == Engine::llamacpp ? llama_tokenize(nlohmann::json::object())
                                      : openai_error("the body must be a JSON object");
  }
  switch (engine) {
  case Engine::vllm:
    return vllm_tokenize(json, max_model_len);
  case Engine::llamacpp:
    return llama_tokenize(json);
  case Engine::sglang:
    break;
  }
  return sglang_tokenize(json, max_model_len);
}

} // namespace specctl::sim
