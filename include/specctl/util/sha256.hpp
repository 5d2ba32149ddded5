#pragma once

// SHA-256 (FIPS 180-4), so that a result folder can name the exact bytes of the
// dataset file a benchmark read: a colleague who has a file with the same digest
// reruns the same requests.

#include <specctl/util/error.hpp>

#include <array>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <string>
#include <string_view>

namespace specctl::util {

// Incremental: bytes may arrive in pieces of any size (a file read in blocks).
class Sha256 {
public:
  Sha256();

  void update(std::string_view bytes);
  // The digest as 64 lower-case hex digits. Ends the computation: call it once.
  std::string hex_digest();

private:
  void compress(const unsigned char* block);

  std::array<std::uint32_t, 8> m_state;
  std::array<unsigned char, 64> m_buffer{};
  std::size_t m_buffered = 0;
  std::uint64_t m_length = 0;
};

std::string sha256_hex(std::string_view bytes);

// The file is read in blocks, never whole, so a multi-gigabyte dataset costs no memory.
// A file that cannot be opened or read is an error naming it (ErrorKind::bad_input).
std::expected<std::string, Error> sha256_file(const std::filesystem::path& path);

} // namespace specctl::util
