#include <specctl/util/hash.hpp>

#include <fmt/format.h>

namespace specctl::util {

std::string fingerprint(std::string_view data) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", hash);
}

} // namespace specctl::util
