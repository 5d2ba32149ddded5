#pragma once

#include <specctl/util/text.hpp>

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace specctl::util {

// The number that `text` spells, without leading and trailing whitespace
// (spaces, tabs, CR, LF), or nullopt when it spells none: the whole rest must
// be the number, in range for T. std::from_chars rules: decimal, no '+', no
// "0x", and a '-' only for signed and floating-point types. Replaces std::stoi
// and friends, which accept trailing garbage and report failure by throwing.
template <typename T> std::optional<T> parse_number(std::string_view text) {
  text = trim_view(text);
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

} // namespace specctl::util
