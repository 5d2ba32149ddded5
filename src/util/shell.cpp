#include <specctl/util/shell.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <random>

namespace specctl::util {

namespace {

bool is_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == '/' || c == ',' || c == ':' || c == '+' || c == '@' || c == '%' || c == '=';
}

} // namespace

std::string shell_quote(std::string_view word) {
  bool safe = !word.empty();
  for (char c : word) {
    safe = safe && is_safe(c);
  }
  // A leading '=' or '~'-free word is fine, but "=x" is harmless only mid-word in some shells.
  if (safe && word.front() != '=') {
    return std::string(word);
  }
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& word : argv) {
    if (!out.empty()) {
      out += ' ';
    }
    out += shell_quote(word);
  }
  return out;
}

std::string marker_nonce() {
  std::random_device device;
  std::uniform_int_distribution<std::uint64_t> bits;
  return fmt::format("{:016x}{:016x}", bits(device), bits(device));
}

std::string brief_command(std::string_view command_line) {
  constexpr std::size_t k_max = 120;
  if (command_line.size() <= k_max) {
    return fmt::format("\"{}\"", command_line);
  }
  return fmt::format("\"{}...\"", command_line.substr(0, k_max));
}

} // namespace specctl::util
