#include "shell_pool.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/shell.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include <poll.h>
#include <sys/socket.h>

namespace specctl::remote {

namespace {

using Clock = std::chrono::steady_clock;

// What the login shell runs: it reads the user's rc files, then becomes the
// /bin/sh that reads our commands from the channel.
constexpr std::string_view k_shell_command = "exec /bin/sh";

// The shell's own definitions, sent once. `specctl_run SECONDS COMMAND` runs
// COMMAND as a session of its own would (ssh_exec.cpp's wrap_command). The
// commands' stderr goes, byte for byte (a shell variable would lose NUL
// bytes), to a file of the shell's that is deleted at once: fd 8 appends to
// it, and fd 7 reads each command's part back from where the last one ended,
// so nothing is left behind however the shell ends. Without such a file the
// shell does not start.
std::string preamble(const std::string& nonce) {
  return fmt::format("specctl_err=$(mktemp 2>/dev/null) && exec 8>>\"$specctl_err\" 7<\"$specctl_err\" || exit 1\n"
                     "rm -f \"$specctl_err\"\n"
                     "if command -v timeout >/dev/null 2>&1; then specctl_t=1; else specctl_t=; fi\n"
                     "specctl_run() {{ if [ -n \"$specctl_t\" ]; then "
                     "(exec timeout -s KILL \"$1\" /bin/sh -c \"$2\" 2>&9 9>&- 8>&- 7<&-); "
                     "else (exec /bin/sh -c \"$2\" 2>&9 9>&- 8>&- 7<&-); fi; }}\n"
                     "printf '%s\\n' {}-ready\n",
                     nonce);
}

// One command, framed (shell_pool.hpp). The command's stderr is fd 9 until it
// runs; the shell's own, where dash says "Terminated" of a child killed by a
// signal (a session of its own never shows that), is /dev/null, and the child
// it waits for is a subshell that became the command, not the command's line.
std::string framed(const std::string& marker, const std::string& command_line, util::Duration timeout) {
  return fmt::format("printf '%s\\n' {m}-go; "
                     "specctl_run {seconds} {command} </dev/null 9>&8 2>/dev/null; "
                     "printf '\\n%s %s\\n' {m}-status \"$?\"; cat <&7; printf '\\n%s\\n' {m}-end\n",
                     fmt::arg("m", marker), fmt::arg("seconds", remote_kill_seconds(timeout)),
                     fmt::arg("command", util::shell_quote(command_line)));
}

// Appends what fits under k_max_command_output; `cut` once anything did not.
void append_capped(std::string& to, std::string_view bytes, bool& cut) {
  const std::size_t room = to.size() < k_max_command_output ? k_max_command_output - to.size() : 0;
  cut = cut || bytes.size() > room;
  to.append(bytes.substr(0, room));
}

// Reads one command's framed answer as it arrives, in one pass.
class Frame {
public:
  explicit Frame(const std::string& marker)
      : m_go(marker + "-go\n"), m_status("\n" + marker + "-status "), m_end("\n" + marker + "-end\n") {}

  void feed(std::string_view bytes) {
    m_pending.append(bytes);
    bool moved = true;
    while (moved && m_stage != Stage::done) {
      moved = advance();
    }
  }
  bool done() const { return m_stage == Stage::done; }
  bool garbled() const { return m_garbled; }
  CommandResult take() {
    if (m_cut) {
      m_result.err += fmt::format("\n[specctl: output cut at {} MiB]\n", k_max_command_output / (1024 * 1024));
    }
    return std::move(m_result);
  }
  // What a command that ran out of time printed so far, the bytes held back
  // in case they began the status marker included.
  std::string take_out() {
    if (m_stage == Stage::out) {
      append_capped(m_result.out, m_pending, m_cut);
    }
    return std::move(m_result.out);
  }

private:
  enum class Stage { go, out, status, err, done };

  // Moves what cannot be the start of `marker` into `to` (or drops it when `to`
  // is null); true when the marker was found and taken out.
  bool until(const std::string& marker, std::string* to) {
    auto at = m_pending.find(marker);
    std::size_t keep_from = at;
    if (at == std::string::npos) {
      keep_from = m_pending.size() < marker.size() ? 0 : m_pending.size() - marker.size() + 1;
    }
    if (to != nullptr) {
      append_capped(*to, std::string_view(m_pending).substr(0, keep_from), m_cut);
    }
    m_pending.erase(0, at == std::string::npos ? keep_from : at + marker.size());
    return at != std::string::npos;
  }

  bool advance() {
    switch (m_stage) {
    case Stage::go:
      return until(m_go, nullptr) && (m_stage = Stage::out, true);
    case Stage::out:
      return until(m_status, &m_result.out) && (m_stage = Stage::status, true);
    case Stage::status: {
      auto end = m_pending.find('\n');
      if (end == std::string::npos) {
        if (m_pending.size() > 4) {
          m_garbled = true;
          m_stage = Stage::done;
        }
        return false;
      }
      int status = 0;
      bool digits = end > 0 && end <= 3;
      for (std::size_t i = 0; digits && i < end; ++i) {
        digits = m_pending[i] >= '0' && m_pending[i] <= '9';
        status = status * 10 + (m_pending[i] - '0');
      }
      m_garbled = !digits;
      m_result.exit_code = digits ? status : -1;
      m_pending.erase(0, end + 1);
      m_stage = digits ? Stage::err : Stage::done;
      return true;
    }
    case Stage::err:
      return until(m_end, &m_result.err) && (m_stage = Stage::done, true);
    case Stage::done:
      return false;
    }
    return false;
  }

  const std::string m_go;
  const std::string m_status;
  const std::string m_end;
  std::string m_pending;
  Stage m_stage = Stage::go;
  CommandResult m_result;
  bool m_cut = false;
  bool m_garbled = false;
};

} // namespace

// One shell: its stream, and the nonce its markers carry.
class ShellPool::Shell {
public:
  explicit Shell(ShellStream stream) : m_stream(std::move(stream)), m_nonce(util::marker_nonce()) {}

  enum class Start { ready, ended, timed_out };

  // Sends the preamble and waits for the shell to say it is ready; whatever
  // the user's rc files print before that is dropped.
  Start start(Clock::time_point deadline) {
    if (!send(preamble(m_nonce), deadline)) {
      return Start::ended;
    }
    return await_line(m_nonce + "-ready\n", deadline);
  }

  // Whether the shell still answers, within `deadline`: only then may a
  // command be sent, so that one sent is one that runs (an idle shell's
  // connection may have died or hung meanwhile).
  Start ping(Clock::time_point deadline) {
    const std::string line = fmt::format("{}-{}-alive", m_nonce, m_serial + 1);
    if (!send(fmt::format("printf '%s\\n' {}\n", line), deadline)) {
      return Start::ended;
    }
    return await_line(line + "\n", deadline);
  }

  struct Ran {
    std::expected<CommandResult, Error> outcome = std::unexpected(Error("not run"));
    bool reusable = false; // the shell is ready for the next command
  };

  // Runs one command in a shell that just answered a ping.
  Ran run(const std::string& where, const std::string& command_line, util::Duration timeout) {
    Ran ran;
    const auto began = Clock::now();
    const auto deadline = began + timeout;
    const std::string marker = fmt::format("{}-{}", m_nonce, ++m_serial);
    Frame frame(marker);
    frame.feed(m_leftover);
    m_leftover.clear();
    Received got = send(framed(marker, command_line, timeout), deadline) ? Received::data : Received::end;
    while (got == Received::data && !frame.done()) {
      got = receive(deadline);
      if (got == Received::data) {
        frame.feed(m_chunk);
      }
    }
    if (got == Received::timeout) {
      // The remote `timeout` kills the command; the shell goes with our end.
      CommandResult result;
      result.timed_out = true;
      result.out = frame.take_out();
      ran.outcome = std::move(result);
    } else if (got == Received::end) {
      auto took = std::chrono::duration_cast<util::Duration>(Clock::now() - began);
      ran.outcome = std::unexpected(
          Error(fmt::format("{}: connection lost while running {} (its shell ended after {}); it was not run again "
                            "and may still be running on the host until its {} timeout kills it",
                            where, util::brief_command(command_line), util::format_duration(took),
                            util::format_duration(timeout)),
                ErrorKind::unreachable));
    } else if (frame.garbled()) {
      ran.outcome = std::unexpected(
          Error(fmt::format("{}: the shell's answer to {} was garbled", where, util::brief_command(command_line))));
    } else {
      ran.reusable = true;
      ran.outcome = frame.take();
    }
    return ran;
  }

  // Whether the shell is still there: an idle shell has nothing to say, so
  // anything readable (its end, most likely) means it is gone.
  bool alive() const {
    pollfd p{m_stream.fd.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

private:
  Start await_line(const std::string& line, Clock::time_point deadline) {
    std::string seen = std::move(m_leftover);
    m_leftover.clear();
    while (true) {
      if (auto at = seen.find(line); at != std::string::npos) {
        m_leftover = seen.substr(at + line.size());
        return Start::ready;
      }
      if (seen.size() > line.size()) {
        seen.erase(0, seen.size() - line.size());
      }
      auto got = receive(deadline);
      if (got != Received::data) {
        return got == Received::timeout ? Start::timed_out : Start::ended;
      }
      seen += m_chunk;
    }
  }

  enum class Received { data, end, timeout };

  bool send(std::string_view bytes, Clock::time_point deadline) {
    while (!bytes.empty()) {
      ssize_t n = ::send(m_stream.fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && Clock::now() < deadline) {
        pollfd p{m_stream.fd.get(), POLLOUT, 0};
        ::poll(&p, 1, util::poll_timeout_ms(deadline));
        continue;
      }
      return false;
    }
    return true;
  }

  Received receive(Clock::time_point deadline) {
    while (true) {
      ssize_t n = ::recv(m_stream.fd.get(), m_buffer.data(), m_buffer.size(), MSG_DONTWAIT);
      if (n > 0) {
        m_chunk.assign(m_buffer.data(), static_cast<std::size_t>(n));
        return Received::data;
      }
      if (n == 0) {
        return Received::end;
      }
      if (errno == EINTR) {
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return Received::end;
      }
      if (Clock::now() >= deadline) {
        return Received::timeout;
      }
      pollfd p{m_stream.fd.get(), POLLIN, 0};
      ::poll(&p, 1, util::poll_timeout_ms(deadline));
    }
  }

  ShellStream m_stream;
  const std::string m_nonce;
  long m_serial = 0;
  std::string m_leftover;
  std::string m_chunk;
  std::array<char, 64 * 1024> m_buffer{};
};

ShellPool::ShellPool(std::string where, ShellOpener opener, util::Duration answer_timeout, int max_shells)
    : m_where(std::move(where)), m_opener(std::move(opener)), m_answer_timeout(answer_timeout),
      m_max_shells(max_shells) {}

ShellPool::~ShellPool() = default;

ShellCounts ShellPool::counts() const {
  std::lock_guard lock(m_mutex);
  return m_counts;
}

std::unique_ptr<ShellPool::Shell> ShellPool::take_idle() {
  std::lock_guard lock(m_mutex);
  while (!m_idle.empty()) {
    auto shell = std::move(m_idle.back());
    m_idle.pop_back();
    if (shell->alive()) {
      return shell;
    }
    --m_open;
  }
  return nullptr;
}

void ShellPool::give_back(std::unique_ptr<Shell> shell) {
  std::lock_guard lock(m_mutex);
  m_idle.push_back(std::move(shell));
}

void ShellPool::drop(bool failed_start) {
  std::lock_guard lock(m_mutex);
  --m_open;
  if (failed_start) {
    ++m_counts.failed;
    ++m_failures_in_a_row;
  }
}

std::unique_ptr<ShellPool::Shell> ShellPool::start_shell(util::Duration timeout) {
  {
    std::lock_guard lock(m_mutex);
    if (m_open >= m_max_shells || m_failures_in_a_row >= k_max_shell_failures) {
      return nullptr;
    }
    ++m_open;
  }
  auto stream = m_opener(std::string(k_shell_command), timeout);
  if (!stream) {
    drop(true);
    return nullptr;
  }
  auto shell = std::make_unique<Shell>(std::move(*stream));
  // The user's start-up runs now. A shell that is not ready within the answer
  // bound may be a hung connection as well as a slow ~/.bashrc: either way the
  // command goes to a channel of its own, which knows how to tell them apart.
  if (shell->start(Clock::now() + std::min(timeout, m_answer_timeout)) != Shell::Start::ready) {
    drop(true);
    return nullptr;
  }
  std::lock_guard lock(m_mutex);
  ++m_counts.started;
  m_failures_in_a_row = 0;
  return shell;
}

std::optional<std::expected<CommandResult, Error>> ShellPool::run(const std::string& command_line,
                                                                  util::Duration timeout) {
  const auto pass_over = [this] {
    std::lock_guard lock(m_mutex);
    ++m_counts.passed_over;
    return std::nullopt;
  };
  if (timeout <= util::Duration::zero()) {
    // The caller's own session refuses it, with its message.
    return pass_over();
  }
  auto shell = take_idle();
  if (shell && shell->ping(Clock::now() + m_answer_timeout) != Shell::Start::ready) {
    // Its connection died or hangs: nothing was sent, so a session of its own may run it.
    shell.reset();
    drop(false);
    return pass_over();
  }
  if (!shell) {
    shell = start_shell(timeout);
    if (!shell) {
      return pass_over();
    }
  }
  auto ran = shell->run(m_where, command_line, timeout);
  if (ran.reusable) {
    give_back(std::move(shell));
  } else {
    shell.reset();
    drop(false);
  }
  std::lock_guard lock(m_mutex);
  ++m_counts.commands;
  return std::move(ran.outcome);
}

} // namespace specctl::remote
