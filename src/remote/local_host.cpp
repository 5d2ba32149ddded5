#include <specctl/remote/local_host.hpp>

#include <specctl/util/atomic_file.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/spawn.hpp>
#include <specctl/util/unique_fd.hpp>

#include <filesystem>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

namespace specctl::remote {

namespace {

using Clock = std::chrono::steady_clock;

// After a timeout's KILL, how long to keep reading: a grandchild that left the
// process group may hold the pipes open forever.
constexpr util::Duration k_drain_after_kill = std::chrono::seconds{2};

struct Pipe {
  util::UniqueFd read;
  util::UniqueFd write;
};

std::expected<Pipe, Error> make_pipe() {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    return std::unexpected(Error(fmt::format("local: pipe: {}", std::strerror(errno))));
  }
  return Pipe{util::UniqueFd(fds[0]), util::UniqueFd(fds[1])};
}

} // namespace

// posix_spawn rather than Boost.Process v2: Boost 1.81's v2 does not compile with
// std::filesystem on g++ 12, and the process trees it launched showed up as
// zombies in /proc (environ unreadable) on our test machines, which breaks the
// tag-based search for escaped workers.
std::expected<CommandResult, Error> LocalHost::exec(const std::string& command_line, util::Duration timeout) {
  auto out = make_pipe();
  auto err = make_pipe();
  if (!out || !err) {
    return std::unexpected(!out ? out.error() : err.error());
  }
  util::SpawnSetup setup;
  setup.add_open(STDIN_FILENO, "/dev/null", O_RDONLY);
  setup.add_dup2(out->write.get(), STDOUT_FILENO);
  setup.add_dup2(err->write.get(), STDERR_FILENO);
  // Nothing of specctl's (sockets, tunnels' listeners) leaks into a server that
  // outlives it, and a timeout kills everything it started (its own group).
  setup.detach();

  auto spawned = setup.spawn("/bin/sh", {"/bin/sh", "-c", command_line});
  if (!spawned) {
    return std::unexpected(Error(fmt::format("local: cannot start /bin/sh: {}", std::strerror(spawned.error()))));
  }
  const pid_t pid = *spawned;
  out->write.reset();
  err->write.reset();

  CommandResult result;
  auto deadline = Clock::now() + timeout;
  std::array<pollfd, 2> fds = {pollfd{out->read.get(), POLLIN, 0}, pollfd{err->read.get(), POLLIN, 0}};
  std::array<std::string*, 2> sinks = {&result.out, &result.err};
  std::array<char, 65536> buffer{};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    int ready = ::poll(fds.data(), fds.size(), util::poll_timeout_ms(deadline));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    // Not `ready == 0` alone: a poll waits at most a minute, and a command may stay
    // silent longer than that well within its timeout (a benchmark command).
    if (Clock::now() >= deadline) {
      if (result.timed_out) {
        break; // drained long enough after the KILL
      }
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      deadline = Clock::now() + k_drain_after_kill;
      continue;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n > 0) {
        sinks[i]->append(buffer.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[i].fd = -1;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

std::expected<int, Error> LocalHost::open_tunnel(const std::string&, int target_port) {
  return target_port;
}

std::expected<void, Error> LocalHost::write_file(const std::string& path, std::string_view bytes, util::Duration) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) {
    if (auto made = util::make_dirs_durable(target.parent_path()); !made) {
      return std::unexpected(Error(fmt::format("local: cannot write {}: {}", path, made.error().what())));
    }
  }
  if (auto written = util::write_file_atomic(target, bytes); !written) {
    return std::unexpected(Error(fmt::format("local: cannot write {}: {}", path, written.error().what())));
  }
  return {};
}

} // namespace specctl::remote
