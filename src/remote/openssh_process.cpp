#include "openssh_process.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/spawn.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace specctl::remote::openssh {

namespace {

// How often a run looks whether ssh has exited while its pipes stay open
// (someone else may hold them: a ControlPersist master forked from it).
constexpr auto k_exit_check_interval = std::chrono::milliseconds{100};
constexpr auto k_exit_soon_interval = std::chrono::milliseconds{10};
// After ssh has exited, or was killed, its output is read until end of file
// or until this long passes without a byte: the master may still be writing
// what it had buffered, or may hold the pipes without writing.
constexpr auto k_drain_quiet = std::chrono::seconds{1};
// After a kill at a deadline, what still arrives is read this much longer:
// the master keeps the command's pipes until it notices its client is gone.
constexpr auto k_drain_after_kill = std::chrono::milliseconds{200};
// Reads per descriptor and wakeup, so one stream cannot starve the other.
constexpr int k_reads_per_wakeup = 16;

int exit_status_of(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return -1;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) {
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
}

// What is kept of the bytes past k_max_command_output: the end, where the exit marker
// of a command's wrapper is.
constexpr std::size_t k_kept_tail = 256;

// One output stream of the child.
struct Stream {
  util::UniqueFd fd;
  std::string* sink = nullptr;
  bool cut = false;
  std::string tail; // the last bytes past the cut

  void append(const char* data, std::size_t size) {
    const std::size_t room = sink->size() < k_max_command_output ? k_max_command_output - sink->size() : 0;
    sink->append(data, std::min(size, room));
    if (size > room) {
      cut = true;
      tail.append(data + room, size - room);
      if (tail.size() > k_kept_tail) {
        tail.erase(0, tail.size() - k_kept_tail);
      }
    }
  }

  // Reads what is there; true when anything arrived or the stream ended.
  bool read_some() {
    std::array<char, 65536> buffer{};
    bool progress = false;
    for (int i = 0; i < k_reads_per_wakeup && fd; ++i) {
      ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
      if (n > 0) {
        append(buffer.data(), static_cast<std::size_t>(n));
        progress = true;
        continue;
      }
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      }
      fd.reset();
      progress = true;
    }
    return progress;
  }
};

} // namespace

Child::Child(Child&& other) noexcept : m_pid(std::exchange(other.m_pid, -1)) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    kill();
    m_pid = std::exchange(other.m_pid, -1);
  }
  return *this;
}

Child::~Child() {
  kill();
}

std::optional<int> Child::poll_exit() {
  if (m_pid <= 0) {
    return std::nullopt;
  }
  int status = 0;
  pid_t rc = ::waitpid(m_pid, &status, WNOHANG);
  if (rc == m_pid) {
    m_pid = -1;
    return exit_status_of(status);
  }
  if (rc < 0 && errno == ECHILD) {
    // Reaped elsewhere: it is gone all the same.
    m_pid = -1;
    return -1;
  }
  return std::nullopt;
}

void Child::kill() {
  if (m_pid <= 0) {
    return;
  }
  ::kill(m_pid, SIGKILL);
  int status = 0;
  while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
  }
  m_pid = -1;
}

std::optional<std::string> find_in_path(const std::string& name) {
  if (name.empty()) {
    return std::nullopt;
  }
  if (name.find('/') != std::string::npos) {
    return ::access(name.c_str(), X_OK) == 0 ? std::optional(name) : std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    auto end = dirs.find(':');
    std::string dir(dirs.substr(0, end));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (end == std::string_view::npos) {
      return std::nullopt;
    }
    dirs.remove_prefix(end + 1);
  }
}

std::expected<Spawned, int> spawn_ssh(const std::vector<std::string>& argv, Stdio stdio, int socket) {
  Spawned spawned;
  util::UniqueFd child_in;
  util::UniqueFd child_out;
  util::UniqueFd child_err;
  util::SpawnSetup setup;
  if (stdio == Stdio::captured) {
    std::array<int, 2> pair{};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair.data()) != 0) {
      return std::unexpected(errno);
    }
    spawned.in.reset(pair[0]);
    child_in.reset(pair[1]);
    std::array<int, 2> out{};
    std::array<int, 2> err{};
    if (::pipe2(out.data(), O_CLOEXEC) != 0) {
      return std::unexpected(errno);
    }
    spawned.out.reset(out[0]);
    child_out.reset(out[1]);
    if (::pipe2(err.data(), O_CLOEXEC) != 0) {
      return std::unexpected(errno);
    }
    spawned.err.reset(err[0]);
    child_err.reset(err[1]);
    setup.add_dup2(child_in.get(), STDIN_FILENO);
    setup.add_dup2(child_out.get(), STDOUT_FILENO);
    setup.add_dup2(child_err.get(), STDERR_FILENO);
  } else {
    setup.add_dup2(socket, STDIN_FILENO);
    setup.add_dup2(socket, STDOUT_FILENO);
    setup.add_open(STDERR_FILENO, "/dev/null", O_WRONLY);
  }
  // Nothing of ours (listeners, other commands' pipes) leaks into ssh, nor into
  // a master that outlives this run; no controlling terminal, so ssh cannot
  // open /dev/tty to ask anything, and a Ctrl-C at specctl's does not reach it.
  setup.detach();
  auto pid = setup.spawn(argv.front(), argv);
  if (!pid) {
    return std::unexpected(pid.error());
  }
  spawned.child = Child(*pid);
  for (auto* fd : {&spawned.in, &spawned.out, &spawned.err}) {
    if (*fd) {
      set_nonblocking(fd->get());
    }
  }
  return spawned;
}

std::expected<RunOutcome, int> run_ssh(const RunSpec& spec) {
  auto spawned = spawn_ssh(spec.argv, Stdio::captured);
  if (!spawned) {
    return std::unexpected(spawned.error());
  }
  RunOutcome outcome;
  Child child = std::move(spawned->child);
  util::UniqueFd in = std::move(spawned->in);
  std::array<Stream, 2> streams;
  streams[0].fd = std::move(spawned->out);
  streams[0].sink = &outcome.out;
  streams[1].fd = std::move(spawned->err);
  streams[1].sink = &outcome.err;

  std::string_view to_send;
  bool sending = false;
  auto start_sending = [&] {
    sending = true;
    to_send = spec.input;
    if (to_send.empty()) {
      in.reset();
    }
  };
  Clock::time_point deadline = spec.start_deadline;
  if (!spec.ready) {
    outcome.ready = true;
    outcome.ready_at = Clock::now();
    start_sending();
  }
  bool exited = false;
  Clock::time_point drain_until{};
  std::size_t err_seen = 0;

  while (true) {
    const bool streams_open = streams[0].fd || streams[1].fd;
    const auto now = Clock::now();
    if (exited && (!streams_open || now >= drain_until)) {
      break;
    }
    if (!exited && now >= deadline) {
      // Only this ssh dies: the remote command, if it started, is killed by
      // its `timeout` on the node; a master forked from this ssh lives on.
      outcome.timed_out = true;
      child.kill();
      exited = true;
      drain_until = now + k_drain_after_kill;
      continue;
    }
    std::array<pollfd, 3> fds{};
    std::size_t count = 0;
    for (auto& stream : streams) {
      if (stream.fd) {
        fds[count++] = pollfd{stream.fd.get(), POLLIN, 0};
      }
    }
    const bool want_write = sending && in && !to_send.empty();
    if (want_write) {
      fds[count++] = pollfd{in.get(), POLLOUT, 0};
    }
    // With both streams at end of file ssh is about to exit: look again soon.
    const auto check = streams_open ? k_exit_check_interval : k_exit_soon_interval;
    Clock::time_point wake = exited ? drain_until : std::min(deadline, now + check);
    int ready = ::poll(fds.data(), count, util::poll_timeout_ms(wake));
    if (ready < 0 && errno != EINTR) {
      return std::unexpected(errno);
    }
    bool progress = false;
    for (auto& stream : streams) {
      if (!stream.fd) {
        continue;
      }
      for (std::size_t i = 0; i < count; ++i) {
        if (fds[i].fd == stream.fd.get() && fds[i].revents != 0) {
          progress = stream.read_some() || progress;
        }
      }
    }
    if (!outcome.ready && spec.ready && outcome.err.size() != err_seen && spec.ready(outcome.err)) {
      outcome.ready = true;
      outcome.ready_at = Clock::now();
      deadline = outcome.ready_at + spec.run_timeout;
      start_sending();
    }
    err_seen = outcome.err.size();
    if (sending && in && !to_send.empty()) {
      ssize_t n = ::send(in.get(), to_send.data(), to_send.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        to_send.remove_prefix(static_cast<std::size_t>(n));
        if (to_send.empty()) {
          in.reset();
        }
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        outcome.input_cut = true;
        in.reset();
      }
    }
    if (exited) {
      if (progress && !outcome.timed_out) {
        drain_until = Clock::now() + k_drain_quiet;
      }
      continue;
    }
    if (auto status = child.poll_exit()) {
      outcome.status = *status;
      exited = true;
      drain_until = Clock::now() + k_drain_quiet;
      if (sending && !to_send.empty()) {
        outcome.input_cut = true;
      }
      in.reset();
    }
  }
  // As SshHost says it; stderr keeps its end, where a wrapper's exit marker is.
  outcome.output_cut = streams[0].cut || streams[1].cut;
  if (outcome.output_cut) {
    outcome.err += "\n[specctl: output cut at " + std::to_string(k_max_command_output / (1024 * 1024)) + " MiB]\n";
    outcome.err += streams[1].tail;
  }
  return outcome;
}

} // namespace specctl::remote::openssh
