#include <specctl/util/sha256.hpp>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace specctl::util {

namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube
// roots of the first 64 primes.
constexpr std::array<std::uint32_t, 64> k_round = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// Section 5.3.3: the first 32 bits of the fractional parts of the square roots of
// the first 8 primes.
constexpr std::array<std::uint32_t, 8> k_initial = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

// Section 4.1.2's functions.
constexpr std::uint32_t ch(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return (x & y) ^ (~x & z);
}
constexpr std::uint32_t maj(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return (x & y) ^ (x & z) ^ (y & z);
}
constexpr std::uint32_t big_sigma0(std::uint32_t x) {
  return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22);
}
constexpr std::uint32_t big_sigma1(std::uint32_t x) {
  return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25);
}
constexpr std::uint32_t small_sigma0(std::uint32_t x) {
  return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3);
}
constexpr std::uint32_t small_sigma1(std::uint32_t x) {
  return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10);
}

// The file is read in blocks of this size: large enough that the read calls cost
// nothing next to the hashing, small enough to live on any stack or heap.
constexpr std::size_t k_file_block = 1 << 16;

} // namespace

Sha256::Sha256() : m_state(k_initial) {}

void Sha256::compress(const unsigned char* block) {
  // Section 6.2.2: the message schedule, big-endian words.
  std::array<std::uint32_t, 64> w{};
  for (std::size_t t = 0; t < 16; ++t) {
    w[t] = (std::uint32_t{block[4 * t]} << 24) | (std::uint32_t{block[4 * t + 1]} << 16) |
           (std::uint32_t{block[4 * t + 2]} << 8) | std::uint32_t{block[4 * t + 3]};
  }
  for (std::size_t t = 16; t < 64; ++t) {
    w[t] = small_sigma1(w[t - 2]) + w[t - 7] + small_sigma0(w[t - 15]) + w[t - 16];
  }
  std::uint32_t a = m_state[0];
  std::uint32_t b = m_state[1];
  std::uint32_t c = m_state[2];
  std::uint32_t d = m_state[3];
  std::uint32_t e = m_state[4];
  std::uint32_t f = m_state[5];
  std::uint32_t g = m_state[6];
  std::uint32_t h = m_state[7];
  for (std::size_t t = 0; t < 64; ++t) {
    const std::uint32_t t1 = h + big_sigma1(e) + ch(e, f, g) + k_round[t] + w[t];
    const std::uint32_t t2 = big_sigma0(a) + maj(a, b, c);
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  m_state[0] += a;
  m_state[1] += b;
  m_state[2] += c;
  m_state[3] += d;
  m_state[4] += e;
  m_state[5] += f;
  m_state[6] += g;
  m_state[7] += h;
}

void Sha256::update(std::string_view bytes) {
  m_length += bytes.size();
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t left = bytes.size();
  if (m_buffered > 0) {
    const std::size_t take = std::min(left, m_buffer.size() - m_buffered);
    std::memcpy(m_buffer.data() + m_buffered, data, take);
    m_buffered += take;
    data += take;
    left -= take;
    if (m_buffered < m_buffer.size()) {
      return;
    }
    compress(m_buffer.data());
    m_buffered = 0;
  }
  for (; left >= 64; left -= 64, data += 64) {
    compress(data);
  }
  if (left > 0) {
    std::memcpy(m_buffer.data(), data, left);
    m_buffered = left;
  }
}

std::string Sha256::hex_digest() {
  // Section 5.1.1: a 1 bit, zeros up to 56 bytes mod 64, then the length in bits, big-endian.
  const std::uint64_t bits = m_length * 8;
  std::array<unsigned char, 72> padding{};
  padding[0] = 0x80;
  const std::size_t zeros = (m_buffered < 56) ? 56 - m_buffered : 120 - m_buffered;
  for (std::size_t i = 0; i < 8; ++i) {
    padding[zeros + i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  }
  update(std::string_view(reinterpret_cast<const char*>(padding.data()), zeros + 8));
  std::string hex;
  hex.reserve(64);
  for (const std::uint32_t word : m_state) {
    hex += fmt::format("{:08x}", word);
  }
  return hex;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes);
  return hash.hex_digest();
}

std::expected<std::string, Error> sha256_file(const std::filesystem::path& path) {
  std::error_code ignored;
  std::ifstream in(path, std::ios::binary);
  // A folder opens like a file on Linux and fails only on the first read.
  if (!in || std::filesystem::is_directory(path, ignored)) {
    return std::unexpected(
        Error(fmt::format("{}: cannot open the file to hash it", path.string()), ErrorKind::bad_input));
  }
  Sha256 hash;
  std::vector<char> block(k_file_block);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    hash.update(std::string_view(block.data(), static_cast<std::size_t>(in.gcount())));
  }
  if (in.bad()) {
    return std::unexpected(
        Error(fmt::format("{}: error while reading the file to hash it", path.string()), ErrorKind::bad_input));
  }
  return hash.hex_digest();
}

} // namespace specctl::util
