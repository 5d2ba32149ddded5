#include <specctl/util/atomic_file.hpp>
#include <specctl/util/unique_fd.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <random>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace specctl::util {

namespace {

Error io_error(std::string_view what, const std::filesystem::path& path, int error) {
  return Error(fmt::format("{}: {}: {}", path.string(), what, std::strerror(error)));
}

std::expected<void, Error> write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return std::unexpected(io_error("cannot write", path, errno));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

std::expected<void, Error> fsync_dir(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return std::unexpected(io_error("cannot open folder", dir, errno));
  }
  if (::fsync(fd.get()) != 0) {
    return std::unexpected(io_error("cannot fsync folder", dir, errno));
  }
  return {};
}

} // namespace

std::expected<void, Error> write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  std::random_device random;
  auto temp = path;
  temp += fmt::format(".tmp-{}-{:08x}", ::getpid(), random());
  // Errors name the file being written, not its temporary twin.
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) {
    return std::unexpected(io_error("cannot create", path, errno));
  }
  auto written = write_all(fd.get(), content, path);
  if (written && ::fsync(fd.get()) != 0) {
    written = std::unexpected(io_error("cannot fsync", path, errno));
  }
  fd.reset();
  if (written && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = std::unexpected(io_error("cannot rename into place", path, errno));
  }
  if (!written) {
    ::unlink(temp.c_str());
    return written;
  }
  return fsync_dir(path.parent_path());
}

std::expected<void, Error> make_dirs_durable(const std::filesystem::path& dir) {
  if (dir.empty() || std::filesystem::is_directory(dir)) {
    return {};
  }
  if (auto parent = make_dirs_durable(dir.parent_path()); !parent) {
    return parent;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return std::unexpected(io_error("cannot create folder", dir, errno));
  }
  return fsync_dir(dir.parent_path());
}

std::expected<AppendFile, Error> AppendFile::open(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) {
    return std::unexpected(io_error("cannot open for appending", path, errno));
  }
  return AppendFile(path, std::move(fd));
}

AppendFile::AppendFile(AppendFile&& other) noexcept : m_path(std::move(other.m_path)), m_fd(std::move(other.m_fd)) {}

std::expected<void, Error> AppendFile::append(std::string_view line) {
  std::string whole;
  whole.reserve(line.size() + 1);
  whole.append(line);
  whole.push_back('\n');
  std::lock_guard lock(m_mutex);
  struct stat before {};
  bool sized = ::fstat(m_fd.get(), &before) == 0;
  // One write: O_APPEND puts it at the end even with other writers, and a
  // kill -9 can at worst leave a torn last line, which readers skip.
  if (auto written = write_all(m_fd.get(), whole, m_path); !written) {
    // A full disk took part of the line: take it back, so the next line starts whole.
    if (sized) {
      // Should even that fail, readers skip the torn line.
      (void)!::ftruncate(m_fd.get(), before.st_size);
    }
    return written;
  }
  if (::fsync(m_fd.get()) != 0) {
    return std::unexpected(io_error("cannot fsync", m_path, errno));
  }
  return {};
}

void WriteFailures::record(const Error& error, std::uint64_t bytes) {
  std::lock_guard lock(m_mutex);
  if (!m_first) {
    m_first = error;
  }
  m_unwritten += bytes;
  m_any = true;
}

std::optional<Error> WriteFailures::first() const {
  std::lock_guard lock(m_mutex);
  return m_first;
}

std::uint64_t WriteFailures::unwritten_bytes() const {
  std::lock_guard lock(m_mutex);
  return m_unwritten;
}

bool WriteFailures::write(const std::filesystem::path& path, std::string_view content) {
  if (auto written = write_file_atomic(path, content); !written) {
    record(written.error(), content.size());
    return false;
  }
  return true;
}

std::optional<std::uint64_t> free_bytes(const std::filesystem::path& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

std::optional<std::uint64_t> free_inodes(const std::filesystem::path& path) {
  struct statvfs fs {};
  // f_files 0: the file system does not count inodes (btrfs), so none can run out.
  if (::statvfs(path.c_str(), &fs) != 0 || fs.f_files == 0) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(fs.f_favail);
}

} // namespace specctl::util
