#include "folder_owner.hpp"

#include <specctl/util/text.hpp>
#include <specctl/util/unique_fd.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/file.h>
#include <unistd.h>

namespace specctl::run::detail {

namespace {

struct HeldFolder {
  util::UniqueFd fd;
  int count = 0;
};

std::mutex g_folders_mutex;
std::map<std::string, HeldFolder>& held_folders() {
  static std::map<std::string, HeldFolder> folders;
  return folders;
}

std::string read_owner_note(int fd) {
  std::string text;
  char buffer[1024];
  ssize_t n = 0;
  while ((n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()))) > 0 && text.size() < 4096) {
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return util::trim(text);
}

bool write_owner_note(int fd, const std::string& text) {
  return ::ftruncate(fd, 0) == 0 && ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
}

} // namespace

std::expected<FolderOwnership, Error> FolderOwnership::take(const std::filesystem::path& dir, const std::string& owner,
                                                            bool create) {
  std::error_code ec;
  if (!create && !std::filesystem::is_directory(dir, ec)) {
    return std::unexpected(
        Error(fmt::format("{}: no run to resume here (no such folder)", dir.string()), ErrorKind::bad_input));
  }
  std::filesystem::create_directories(dir, ec);
  auto canonical = std::filesystem::weakly_canonical(dir, ec);
  std::string key = ec ? std::filesystem::absolute(dir).string() : canonical.string();
  auto path = std::filesystem::path(key) / ".owner";

  std::lock_guard lock(g_folders_mutex);
  if (auto it = held_folders().find(key); it != held_folders().end()) {
    ++it->second.count;
    return FolderOwnership(key);
  }
  // O_CLOEXEC: a server this run starts must not inherit the lock and outlive it holding it.
  util::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) {
    return std::unexpected(Error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno))));
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      return std::unexpected(Error(fmt::format("{}: cannot lock: {}", path.string(), std::strerror(errno))));
    }
    std::string holder = read_owner_note(fd.get());
    return std::unexpected(Error(
        fmt::format("{}: another specctl is writing this folder: {}; wait for it to end (or stop it) before resuming "
                    "or running into it",
                    dir.string(), holder.empty() ? "a process starting now" : holder),
        ErrorKind::bad_input));
  }
  // Without the note the lock still holds: a second run is refused, only less precisely.
  (void)write_owner_note(fd.get(), owner + "\n");
  held_folders()[key] = HeldFolder{std::move(fd), 1};
  return FolderOwnership(key);
}

FolderOwnership::FolderOwnership(FolderOwnership&& other) noexcept : m_key(std::exchange(other.m_key, {})) {}

FolderOwnership::~FolderOwnership() {
  if (m_key.empty()) {
    return;
  }
  std::lock_guard lock(g_folders_mutex);
  auto it = held_folders().find(m_key);
  if (it != held_folders().end() && --it->second.count == 0) {
    held_folders().erase(it);
  }
}

} // namespace specctl::run::detail
