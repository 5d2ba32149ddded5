// %-tokens and ${NAME} in ssh_config values (misc.c vdollar_percent_expand),
// and the SHA-1 that %C needs.

#include "ssh_config_internal.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstdlib>

namespace specctl::remote::sshcfg {

std::expected<std::string, std::string> expand_tokens(std::string_view text, const std::vector<Token>& tokens,
                                                      bool environment) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (environment && text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      std::size_t close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        return std::unexpected(fmt::format("environment variable \"{}\" lacks its closing '}}'", text.substr(i)));
      }
      std::string name(text.substr(i + 2, close - i - 2));
      if (name.empty()) {
        return std::unexpected(std::string("an empty environment variable name \"${}\""));
      }
      const char* value = std::getenv(name.c_str());
      if (value == nullptr) {
        return std::unexpected(fmt::format("environment variable ${{{}}} is not set", name));
      }
      out += value;
      i = close;
      continue;
    }
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) {
      return std::unexpected(std::string("a '%' ends the value (write %% for a '%')"));
    }
    if (text[i] == '%') {
      out += '%';
      continue;
    }
    bool known = false;
    for (const auto& token : tokens) {
      if (token.key == text[i]) {
        out += token.value;
        known = true;
        break;
      }
    }
    if (!known) {
      std::string keys;
      for (const auto& token : tokens) {
        keys += fmt::format(" %{}", token.key);
      }
      return std::unexpected(fmt::format("unknown token %{} (this keyword takes{} and %%)", text[i], keys));
    }
  }
  return out;
}

namespace {

std::uint32_t rotate_left(std::uint32_t value, int bits) {
  return (value << bits) | (value >> (32 - bits));
}

} // namespace

std::string sha1_hex(std::string_view bytes) {
  std::array<std::uint32_t, 5> h = {0x67452301U, 0xEFCDAB89U, 0x98BADCFEU, 0x10325476U, 0xC3D2E1F0U};
  std::string message(bytes);
  const std::uint64_t bit_length = static_cast<std::uint64_t>(bytes.size()) * 8U;
  message += static_cast<char>(0x80);
  while (message.size() % 64 != 56) {
    message += '\0';
  }
  for (int shift = 56; shift >= 0; shift -= 8) {
    message += static_cast<char>((bit_length >> shift) & 0xFFU);
  }
  for (std::size_t block = 0; block < message.size(); block += 64) {
    std::array<std::uint32_t, 80> w{};
    for (std::size_t t = 0; t < 16; ++t) {
      for (std::size_t b = 0; b < 4; ++b) {
        w[t] = (w[t] << 8) | static_cast<unsigned char>(message[block + 4 * t + b]);
      }
    }
    for (std::size_t t = 16; t < 80; ++t) {
      w[t] = rotate_left(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    }
    std::uint32_t a = h[0];
    std::uint32_t b = h[1];
    std::uint32_t c = h[2];
    std::uint32_t d = h[3];
    std::uint32_t e = h[4];
    for (std::size_t t = 0; t < 80; ++t) {
      std::uint32_t f = 0;
      std::uint32_t k = 0;
      if (t < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999U;
      } else if (t < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1U;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDCU;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6U;
      }
      std::uint32_t next = rotate_left(a, 5) + f + e + k + w[t];
      e = d;
      d = c;
      c = rotate_left(b, 30);
      b = a;
      a = next;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  std::string hex;
  for (auto word : h) {
    hex += fmt::format("{:08x}", word);
  }
  return hex;
}

} // namespace specctl::remote::sshcfg
