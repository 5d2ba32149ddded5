#pragma once

// What the harnesses share: one scratch folder per process (inputs that are
// read from a file are written there, the same file every iteration), and a
// view of the input as text.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>

namespace specctl::fuzz {

// A folder under $TMPDIR, made on first use and removed when the process
// exits; scripts/fuzz.sh also points TMPDIR at a folder it removes, for
// processes that die of what they found.
class ScratchDir {
public:
  static const std::filesystem::path& path() {
    static ScratchDir dir;
    return dir.m_path;
  }

  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

private:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "specctl-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::abort();
    }
    m_path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }

  std::filesystem::path m_path;
};

// Replaces the file's content; the stream is closed before this returns, so
// no descriptor outlives the iteration.
inline void write_file(const std::filesystem::path& path, std::string_view content) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) {
    std::abort();
  }
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Inputs larger than this only slow the search down: every real file the
// targets read is far smaller.
inline constexpr std::size_t k_max_input = 64 * 1024;

} // namespace specctl::fuzz
