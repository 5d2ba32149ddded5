#include <specctl/util/shell.hpp>

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

} // namespace specctl::util
