#include <specctl/util/hash.hpp>

#include <fmt/format.h>

namespace specctl::util {

std::uint64_t fnv1a_64(std::string_view data) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string fingerprint(std::string_view data) {
  return fmt::format("{:016x}", fnv1a_64(data));
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace specctl::util
