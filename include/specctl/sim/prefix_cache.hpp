#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

namespace specctl::sim {

// A prompt as specsim's tokenizer sees it: one key per counted token (the
// approximate_tokens pieces, chat template tokens included), so two prompts
// share a prefix exactly where their leading keys agree.
using TokenKeys = std::vector<std::uint64_t>;
using SharedTokenKeys = std::shared_ptr<const TokenKeys>;

struct PrefixCacheConfig {
  // Tokens the cache holds at most (least recently used prompts go first); 0: off.
  long capacity_tokens = 0;
  // Prompts held at most; 0: no limit beyond the tokens.
  int max_entries = 0;
  // Cached counts are whole blocks of this many tokens (vLLM's block_size).
  int block = 1;
};

// The engines' prefix caches reduced to what a client sees: a prompt's leading
// tokens that an earlier prompt still held computed. SGLang's radix cache,
// vLLM's hashed KV blocks and llama.cpp's slot and RAM prompt caches all match
// from the first token and all recompute at least the last prompt token, so at
// most prompt_tokens - 1 tokens are cached (docs/specsim.md cites each).
class PrefixCache {
public:
  explicit PrefixCache(PrefixCacheConfig config);

  // The cached tokens `keys` would get now.
  int match(const TokenKeys& keys) const;
  // Keeps `keys` as the most recently used prompt, evicting the least recently used
  // ones past the capacity; a held prompt that is a prefix of `keys` is replaced.
  void insert(const SharedTokenKeys& keys);

  long tokens() const { return m_tokens; }
  std::size_t entries() const { return m_lru.size(); }

private:
  PrefixCacheConfig m_config;
  std::list<SharedTokenKeys> m_lru; // most recently used first
  long m_tokens = 0;
};

} // namespace specctl::sim
