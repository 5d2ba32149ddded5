#include <specctl/sim/prefix_cache.hpp>

#include <algorithm>

namespace specctl::sim {
namespace {

std::size_t common_prefix(const TokenKeys& a, const TokenKeys& b) {
  const auto [left, right] = std::ranges::mismatch(a, b);
  return static_cast<std::size_t>(left - a.begin());
}

} // namespace

PrefixCache::PrefixCache(PrefixCacheConfig config) : m_config(config) {
  m_config.block = std::max(1, m_config.block);
}

int PrefixCache::match(const TokenKeys& keys) const {
  std::size_t best = 0;
  for (const auto& held : m_lru) {
    best = std::max(best, common_prefix(*held, keys));
    if (best == keys.size()) {
      break;
    }
  }
  // At least the last prompt token is computed again, for its logits.
  const std::size_t limit = keys.empty() ? 0 : keys.size() - 1;
  best = std::min(best, limit);
  const auto block = static_cast<std::size_t>(m_config.block);
  return static_cast<int>(best / block * block);
}

void PrefixCache::insert(const SharedTokenKeys& keys) {
  if (!keys || keys->empty() || m_config.capacity_tokens <= 0) {
    return;
  }
  for (auto it = m_lru.begin(); it != m_lru.end();) {
    const std::size_t common = common_prefix(**it, *keys);
    if (common == keys->size()) {
      // Already held whole (as itself or as the start of a longer prompt): touch it.
      m_lru.splice(m_lru.begin(), m_lru, it);
      return;
    }
    if (common == (*it)->size()) {
      // A held prompt that `keys` extends: the longer one replaces it.
      m_tokens -= static_cast<long>((*it)->size());
      it = m_lru.erase(it);
    } else {
      ++it;
    }
  }
  m_lru.push_front(keys);
  m_tokens += static_cast<long>(keys->size());
  while (m_lru.size() > 1 && (m_tokens > m_config.capacity_tokens ||
                              (m_config.max_entries > 0 && static_cast<int>(m_lru.size()) > m_config.max_entries))) {
    m_tokens -= static_cast<long>(m_lru.back()->size());
    m_lru.pop_back();
  }
}

} // namespace specctl::sim
