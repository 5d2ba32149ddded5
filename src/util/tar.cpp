#include <specctl/util/tar.hpp>

#include <array>
#include <cstring>
#include <fmt/format.h>
#include <numeric>
#include <stdexcept>
#include <string>

namespace specctl::util {

namespace {

constexpr std::size_t k_block = 512;
// Field offsets and widths of a ustar header (POSIX.1-1988).
constexpr std::size_t k_name = 0;
constexpr std::size_t k_name_width = 100;
constexpr std::size_t k_mode = 100;
constexpr std::size_t k_uid = 108;
constexpr std::size_t k_gid = 116;
constexpr std::size_t k_size = 124;
constexpr std::size_t k_mtime = 136;
constexpr std::size_t k_checksum = 148;
constexpr std::size_t k_checksum_width = 8;
constexpr std::size_t k_type = 156;
constexpr std::size_t k_magic = 257;
constexpr std::size_t k_version = 263;
// Octal fields hold their digits and a NUL: 12 bytes give 11 digits (8 GiB).
constexpr std::size_t k_size_width = 12;
constexpr std::size_t k_id_width = 8;
constexpr std::size_t k_max_size = (std::size_t{1} << 33) - 1;

void put(std::array<char, k_block>& block, std::size_t at, std::string_view text) {
  std::memcpy(block.data() + at, text.data(), text.size());
}

// `value` in octal, zero-padded to width - 1 digits and a NUL.
void put_octal(std::array<char, k_block>& block, std::size_t at, std::size_t width, std::size_t value) {
  put(block, at, fmt::format("{:0{}o}", value, width - 1));
}

void check_name(std::string_view name) {
  if (name.empty() || name.size() > k_name_width || name.front() == '/' || name.find("..") != std::string_view::npos) {
    throw std::invalid_argument(fmt::format("tar: unsuitable member name \"{}\"", name));
  }
}

} // namespace

void TarWriter::header(std::string_view name, std::size_t size, unsigned mode, char type) {
  check_name(name);
  if (size > k_max_size) {
    throw std::invalid_argument(fmt::format("tar: {} is larger than ustar holds", name));
  }
  std::array<char, k_block> block{};
  put(block, k_name, name);
  put_octal(block, k_mode, k_id_width, mode & 07777U);
  put_octal(block, k_uid, k_id_width, 0);
  put_octal(block, k_gid, k_id_width, 0);
  put_octal(block, k_size, k_size_width, size);
  put_octal(block, k_mtime, k_size_width, 0);
  block[k_type] = type;
  put(block, k_magic, "ustar"); // and its NUL, from the zeroed block
  put(block, k_version, "00");
  // The checksum is summed with its own field as spaces, then written as six
  // octal digits, a NUL and a space.
  std::memset(block.data() + k_checksum, ' ', k_checksum_width);
  const unsigned sum = std::accumulate(block.begin(), block.end(), 0U,
                                       [](unsigned total, char c) { return total + static_cast<unsigned char>(c); });
  put(block, k_checksum, fmt::format("{:06o}", sum));
  block[k_checksum + 6] = '\0';
  m_bytes.append(block.data(), block.size());
}

void TarWriter::add_file(std::string_view name, std::string_view bytes, unsigned mode) {
  header(name, bytes.size(), mode, '0');
  m_bytes.append(bytes);
  m_bytes.append((k_block - bytes.size() % k_block) % k_block, '\0');
}

void TarWriter::add_directory(std::string_view name) {
  constexpr unsigned k_directory_mode = 0755;
  // A directory's name ends in '/', as tar writes it.
  header(name.ends_with('/') ? std::string(name) : std::string(name) + "/", 0, k_directory_mode, '5');
}

std::string TarWriter::finish() && {
  m_bytes.append(2 * k_block, '\0');
  return std::move(m_bytes);
}

} // namespace specctl::util
