#pragma once

// A tar archive (POSIX ustar) written in memory, for what specctl uploads to a
// host as one file and unpacks there with the host's own `tar -x` (GNU tar,
// busybox and bsdtar all read ustar):
//
//   util::TarWriter tar;
//   tar.add_directory("lib");
//   tar.add_file("lib/libfmt.so.9", bytes, 0755);
//   std::string archive = std::move(tar).finish();

#include <string>
#include <string_view>

namespace specctl::util {

class TarWriter {
public:
  // `name` is relative, at most 100 bytes, without ".." (std::invalid_argument otherwise).
  void add_file(std::string_view name, std::string_view bytes, unsigned mode);
  void add_directory(std::string_view name);
  // The archive, ended by its two zero blocks.
  std::string finish() &&;

private:
  void header(std::string_view name, std::size_t size, unsigned mode, char type);
  std::string m_bytes;
};

} // namespace specctl::util
