#include "openssh_host_impl.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fcntl.h>
#include <sys/socket.h>

// Commands over the OpenSSH master.
//
// ssh's exit status cannot tell its own failures from the command's: both
// can be 255, and ssh also exits 255 without a word when the remote command
// died of a signal or the master died under it. So the node runs a small
// wrapper around the command that talks to us on stderr, with markers that
// carry a random nonce no command can guess:
//
//   1. it prints "specctl-start-<nonce>" and waits for one line on stdin;
//   2. we send "<nonce>" (then the command's input, then end of file): only
//      now may the command run, so a command whose go never left this
//      machine did not start and can be tried again on a new master;
//   3. it runs the command as SshHost does (/bin/sh under `timeout -s KILL`),
//      then prints "\nspecctl-exit-<nonce> <status>".
//
// The markers are taken out of stderr. With the exit marker the result is the
// command's; without it, ssh failed: before the go that is an error (or a new
// try on a new master), after it "connection lost".

namespace specctl::remote::openssh {

namespace {

// Beyond the connect timeout (the master may have to be re-established by
// the command's own ssh), what opening a session and starting the login
// shell may take before the wrapper answers.
constexpr auto k_start_slack = std::chrono::seconds{10};
// Tries of a command whose master went away before it started.
constexpr int k_max_start_attempts = 3;

std::string start_marker(const std::string& nonce) {
  return "specctl-start-" + nonce;
}

std::string exit_marker(const std::string& nonce) {
  return "specctl-exit-" + nonce;
}

// The line the node's login shell runs. Markers and nonce are [a-z0-9-], so
// they need no quoting; the command gets /bin/sh like everywhere else. While
// the command runs, the shell's own stderr is /dev/null (the command's is the
// real one, kept on fd 9): bash would print "Terminated" there for a command
// killed by a signal, which an `exec` into the command (SshHost) never shows.
std::string wrapper(const std::string& nonce, const std::string& command_line, util::Duration timeout) {
  const long seconds = remote_kill_seconds(timeout);
  return fmt::format("printf '%s\\n' {start} >&2; "
                     "IFS= read -r specctl_go && [ \"$specctl_go\" = {nonce} ] || exit 97; "
                     "command -v timeout >/dev/null 2>&1 && set -- timeout -s KILL {seconds}; "
                     "exec 9>&2 2>/dev/null; \"$@\" /bin/sh -c {command} 2>&9 9>&-; specctl_status=$?; "
                     "printf '\\n%s %s\\n' {exit} \"$specctl_status\" >&9; exit \"$specctl_status\"",
                     fmt::arg("start", start_marker(nonce)), fmt::arg("nonce", nonce), fmt::arg("seconds", seconds),
                     fmt::arg("command", util::shell_quote(command_line)), fmt::arg("exit", exit_marker(nonce)));
}

// Takes "<marker>\n" out of `err`; whether it was there.
bool take_start_marker(std::string& err, const std::string& line) {
  auto at = err.find(line);
  if (at == std::string::npos) {
    return false;
  }
  err.erase(at, line.size());
  return true;
}

// Takes the last "\n<marker> <status>\n" out of `err`; the status.
std::optional<int> take_exit_marker(std::string& err, const std::string& marker) {
  const std::string head = "\n" + marker + " ";
  auto at = err.rfind(head);
  if (at == std::string::npos) {
    return std::nullopt;
  }
  auto digits_at = at + head.size();
  auto end = err.find('\n', digits_at);
  if (end == std::string::npos || end == digits_at || end - digits_at > 3) {
    return std::nullopt;
  }
  int status = 0;
  for (auto i = digits_at; i < end; ++i) {
    if (err[i] < '0' || err[i] > '9') {
      return std::nullopt;
    }
    status = status * 10 + (err[i] - '0');
  }
  err.erase(at, end + 1 - at);
  return status;
}

// A shell's ssh, holding one of the host's command slots while it lives: killed
// (and reaped) before the slot is given back.
struct ShellProcess {
  CommandSlot slot;
  Child child;
};

} // namespace

std::expected<ShellStream, Error> OpenSshHost::open_shell(const std::string& command_line) {
  auto slot = CommandSlot::try_take(m_exec_slots);
  if (!slot) {
    return std::unexpected(Error(fmt::format("{}: every command slot is taken", m_where)));
  }
  if (auto up = ensure_master(); !up) {
    return std::unexpected(up.error());
  }
  std::array<int, 2> pair{};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair.data()) != 0) {
    return std::unexpected(Error(fmt::format("{}: socketpair: {}", m_where, std::strerror(errno))));
  }
  util::UniqueFd ours(pair[0]);
  util::UniqueFd theirs(pair[1]);
  ::fcntl(ours.get(), F_SETFL, ::fcntl(ours.get(), F_GETFL) | O_NONBLOCK);
  auto command = argv();
  command.push_back(command_line);
  auto spawned = spawn_ssh(command, Stdio::socket, theirs.get());
  if (!spawned) {
    return std::unexpected(
        Error(fmt::format("{}: cannot start {}: {}", m_where, m_program, std::strerror(spawned.error()))));
  }
  auto process = std::make_shared<ShellProcess>(ShellProcess{std::move(*slot), std::move(spawned->child)});
  return ShellStream{std::move(ours), std::move(process)};
}

std::expected<CommandResult, Error> OpenSshHost::exec(const std::string& command_line, util::Duration timeout) {
  if (auto ran = m_shells->run(command_line, timeout)) {
    return std::move(*ran);
  }
  return run_command(command_line, timeout, {});
}

std::expected<CommandResult, Error> OpenSshHost::run_command(const std::string& command_line, util::Duration timeout,
                                                             std::string_view input) {
  if (timeout <= util::Duration::zero()) {
    return std::unexpected(
        Error(fmt::format("{}: the timeout for \"{}\" must be positive", m_where, command_line), ErrorKind::bad_input));
  }
  const auto slot = CommandSlot::take(m_exec_slots);

  const auto nonce = util::marker_nonce();
  const auto start_line = start_marker(nonce) + "\n";
  RunSpec spec;
  spec.argv = argv();
  spec.argv.push_back(wrapper(nonce, command_line, timeout));
  // What ssh printed before the command started (its warnings; the command's own stderr follows).
  std::string before_start;
  spec.ready = [&](std::string& err) {
    before_start = err.substr(0, err.find(start_line));
    return take_start_marker(err, start_line);
  };
  spec.input.reserve(nonce.size() + 1 + input.size());
  spec.input.append(nonce).append("\n").append(input);
  spec.run_timeout = timeout;
  const auto start_bound = m_target.connect_timeout + k_start_slack;

  std::string why;
  for (int attempt = 1; attempt <= k_max_start_attempts; ++attempt) {
    if (auto up = ensure_master(); !up) {
      return std::unexpected(up.error());
    }
    spec.start_deadline = Clock::now() + start_bound;
    auto run = run_ssh(spec);
    if (!run) {
      return std::unexpected(
          Error(fmt::format("{}: cannot start {}: {}", m_where, m_program, std::strerror(run.error()))));
    }
    if (run->ready) {
      // OpenSSH 10 gives up on a master that accepts but does not answer after a few seconds
      // ("muxclient: master hello exchange failed") and connects on its own, "disabling
      // multiplexing": the command ran, but every later one would pay that wait and a login
      // of its own. A hung master is left behind, so the next command starts a new one (the
      // check keeps a master that answers: a loser of a race to become one says the same).
      if (before_start.find("disabling multiplexing") != std::string::npos) {
        abandon_master_if_hung();
      }
      CommandResult result;
      result.out = std::move(run->out);
      if (run->timed_out) {
        result.timed_out = true;
        result.err = std::move(run->err);
        return result;
      }
      auto status = take_exit_marker(run->err, exit_marker(nonce));
      if (!status) {
        // stderr is the command's by now: what ssh might add is no better a reason.
        auto ran = std::chrono::duration_cast<util::Duration>(Clock::now() - run->ready_at);
        return std::unexpected(
            Error(fmt::format("{}: connection lost while running {} (ssh exited with status {} before the command's "
                              "status arrived, after {}); it was not run again and may still be running on the host "
                              "until its {} timeout kills it",
                              m_where, util::brief_command(command_line), run->status.value_or(-1),
                              util::format_duration(ran), util::format_duration(timeout)),
                  ErrorKind::unreachable));
      }
      result.exit_code = *status;
      result.err = std::move(run->err);
      return result;
    }
    if (run->timed_out) {
      // The command did not start, so it may be tried again; a master that
      // takes connections but does not answer is left behind first.
      why = fmt::format("no answer within {}", util::format_duration(start_bound));
      abandon_master_if_hung();
      continue;
    }
    auto failure = classify_failure(m_where, run->err, run->status.value_or(-1));
    if (!failure.master_gone) {
      return std::unexpected(failure.error);
    }
    why = std::string(failure.error.what()).substr(m_where.size() + 2);
  }
  return std::unexpected(Error(fmt::format("{}: could not start {}: the connection dropped {} times (last: {})",
                                           m_where, util::brief_command(command_line), k_max_start_attempts, why),
                               ErrorKind::unreachable));
}

std::expected<void, Error> OpenSshHost::write_file(const std::string& path, std::string_view bytes,
                                                   util::Duration timeout) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const std::string temp = path + ".part";
  auto ran =
      run_command(fmt::format("mkdir -p {0} && cat > {1} && mv -f {1} {2}", util::shell_quote(dir.empty() ? "." : dir),
                              util::shell_quote(temp), util::shell_quote(path)),
                  timeout, bytes);
  if (!ran) {
    return std::unexpected(ran.error());
  }
  if (ran->timed_out) {
    return std::unexpected(
        Error(fmt::format("{}: writing {} timed out after {}", m_where, path, util::format_duration(timeout)),
              ErrorKind::timed_out));
  }
  if (ran->exit_code != 0) {
    return std::unexpected(Error(fmt::format("{}: cannot write {}: {}", m_where, path, util::first_line(ran->err))));
  }
  return {};
}

} // namespace specctl::remote::openssh
