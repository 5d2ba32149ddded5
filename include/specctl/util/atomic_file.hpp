#pragma once

#include <specctl/util/error.hpp>
#include <specctl/util/unique_fd.hpp>

#include <atomic>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>

namespace specctl::util {

// Writes a whole file so that a crash at any moment leaves either the old
// content or the new one, never a torn file: a temporary file in the same
// folder, fsync, rename over the target, fsync of the folder.
std::expected<void, Error> write_file_atomic(const std::filesystem::path& path, std::string_view content);

// Creates the folder and its parents, fsyncing each new entry's parent so
// the folder itself survives a power loss.
std::expected<void, Error> make_dirs_durable(const std::filesystem::path& dir);

// An append-only file of lines, each written whole with one write(2) on an
// O_APPEND descriptor and fsynced before append() returns. Thread-safe.
class AppendFile {
public:
  static std::expected<AppendFile, Error> open(const std::filesystem::path& path);
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&&) = delete;
  AppendFile(const AppendFile&) = delete;
  ~AppendFile() = default;

  // Appends `line` and a newline.
  std::expected<void, Error> append(std::string_view line);
  const std::filesystem::path& path() const { return m_path; }

private:
  AppendFile(std::filesystem::path path, UniqueFd fd) : m_path(std::move(path)), m_fd(std::move(fd)) {}
  std::filesystem::path m_path;
  UniqueFd m_fd;
  std::mutex m_mutex;
};

// The failures to write a run's files, shared by everything that writes them from
// any thread: a full disk, EIO or a read-only folder stops the run cleanly (no more
// launches; what was written stays) instead of throwing from a worker.
class WriteFailures {
public:
  // A write of `bytes` that failed with `error`.
  void record(const Error& error, std::uint64_t bytes);
  bool any() const { return m_any.load(); }
  std::optional<Error> first() const;
  // Bytes of every failed write together: the least the disk lacked.
  std::uint64_t unwritten_bytes() const;

  // write_file_atomic that records its failure; true when written.
  bool write(const std::filesystem::path& path, std::string_view content);

private:
  mutable std::mutex m_mutex;
  std::optional<Error> m_first;
  std::uint64_t m_unwritten = 0;
  std::atomic<bool> m_any{false};
};

// Bytes free to an unprivileged writer on the filesystem holding `path`; nullopt if unknown.
std::optional<std::uint64_t> free_bytes(const std::filesystem::path& path);
// Files the file system of `path` can still create (statvfs f_favail); nullopt when unknown.
std::optional<std::uint64_t> free_inodes(const std::filesystem::path& path);

} // namespace specctl::util
