#pragma once

#include <specctl/sim/options.hpp>
#include <specctl/sim/prefix_cache.hpp>

#include <span>
#include <string>
#include <string_view>

namespace specctl::sim {

// specsim's tokenizer: approximate_tokens' pieces (four bytes each, the last
// one shorter), one key per piece; an empty text is one token.
TokenKeys text_token_keys(std::string_view text);
// The piece of `text` that token `index` stands for.
std::string_view token_piece(std::string_view text, std::size_t index);
// The token id /tokenize reports for a key: deterministic, in [0, 2^17).
int token_id(std::uint64_t key);

// A chat message's role and where its content starts in the joined content text.
struct ChatPart {
  std::string role;
  std::size_t start = 0;
};

// A chat prompt's keys, as many as the chat's prompt_tokens: the template's
// k_chat_tokens_per_chat, then for each message k_chat_tokens_per_message keyed
// by its role followed by the pieces of the joined text that start in it. A
// conversation that grows by whole messages keeps its earlier keys.
TokenKeys chat_token_keys(std::span<const ChatPart> parts, std::string_view all_text);

// A POST /tokenize (or SGLang's /v1/tokenize) answer in the engine's shape.
struct TokenizeAnswer {
  unsigned status = 200;
  std::string body;
  std::string content_type;
};
TokenizeAnswer tokenize_answer(Engine engine, std::string_view body, int max_model_len);

} // namespace specctl::sim
