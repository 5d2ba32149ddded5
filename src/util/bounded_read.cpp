#include <specctl/util/bounded_read.hpp>
#include <specctl/util/size.hpp>
#include <specctl/util/unique_fd.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace specctl::util {

namespace {

std::expected<void, ReadRefusal> check_stat(const struct stat& st, std::uint64_t max_bytes, const std::string& what) {
  if (S_ISDIR(st.st_mode)) {
    return std::unexpected(ReadRefusal{0, "it is a directory"});
  }
  if (S_ISFIFO(st.st_mode)) {
    return std::unexpected(ReadRefusal{0, "it is a FIFO, not a file"});
  }
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    return std::unexpected(ReadRefusal{0, "it is a device, not a file"});
  }
  if (!S_ISREG(st.st_mode)) {
    return std::unexpected(ReadRefusal{0, "it is not a regular file"});
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return std::unexpected(ReadRefusal{0, fmt::format("it is {}, more than the {} {} may be",
                                                      format_bytes(static_cast<std::uint64_t>(st.st_size)),
                                                      format_bytes(max_bytes), what)});
  }
  return {};
}

ReadRefusal from_errno(int error) {
  return ReadRefusal{error, std::strerror(error)};
}

} // namespace

std::expected<void, ReadRefusal> check_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                                    const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return std::unexpected(from_errno(errno));
  }
  return check_stat(st, max_bytes, what);
}

std::expected<std::string, ReadRefusal> read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                                          const std::string& what) {
  // O_NONBLOCK: a FIFO put in the file's place opens at once (and is refused) instead of waiting for a writer.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    return std::unexpected(from_errno(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return std::unexpected(from_errno(errno));
  }
  if (auto ok = check_stat(st, max_bytes, what); !ok) {
    return std::unexpected(ok.error());
  }
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t at = 0;
  while (true) {
    if (at == text.size()) {
      // The file may have grown since fstat: take what is there, within the cap.
      if (text.size() >= max_bytes + 1) {
        return std::unexpected(
            ReadRefusal{0, fmt::format("it grew past the {} {} may be", format_bytes(max_bytes), what)});
      }
      text.resize(std::min<std::size_t>(max_bytes + 1, text.size() + 64 * 1024));
    }
    ssize_t n = ::read(fd.get(), text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return std::unexpected(from_errno(errno));
    }
    if (n == 0) {
      break;
    }
    at += static_cast<std::size_t>(n);
  }
  text.resize(at);
  return text;
}

} // namespace specctl::util
