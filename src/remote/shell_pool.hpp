#pragma once

// specctl's own commands on an SSH host (polls, probes, liveness, cleanup) run
// in a few long-lived shells per connection, so the user's shell start-up
// (`conda init`, `pyenv init` in ~/.bashrc, homes on NFS: seconds each, or a
// stale lock's 60 s) is paid once per shell, not once per command.
//
// A shell is one session running `exec /bin/sh`: the login shell reads the
// user's rc files once and hands over to /bin/sh, which reads commands from
// the channel. Each command runs as it would in a session of its own:
// `/bin/sh -c COMMAND` under `timeout -s KILL` (when the host has it), stdin
// /dev/null, its stdout streamed back and its stderr collected, then framed by
// markers that carry a random nonce no command can guess:
//
//   <nonce>-<n>-go                 the shell has read the command and runs it
//   stdout
//   \n<nonce>-<n>-status <code>
//   stderr
//   \n<nonce>-<n>-end
//
// An idle shell must answer a ping before a command is sent to it, so a
// command is sent only to a shell that is there: one whose shell died or hangs
// is given back unsent, and the caller runs it in a session of its own. A
// command that was sent and then lost its shell is an error, never run twice.
// A command past its timeout takes its shell with it (the remote `timeout`
// kills the command), and the next command starts a new shell. The commands'
// stderr passes through a deleted file of the shell's own (shell_pool.cpp).

#include <specctl/remote/host.hpp>
#include <specctl/util/unique_fd.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace specctl::remote {

// A byte stream to a command started on a host (its stdin and stdout), and
// whatever must live as long as it does (the ssh process that carries it).
struct ShellStream {
  util::UniqueFd fd;
  std::shared_ptr<void> keep;
};

// Starts `command_line` on the host and returns a stream to it, waiting at
// most `timeout` for the channel.
using ShellOpener =
    std::function<std::expected<ShellStream, Error>(const std::string& command_line, util::Duration timeout)>;

// What went through the shells, for tests and measurements.
struct ShellCounts {
  int started = 0;      // shells that came up
  int failed = 0;       // shells that did not
  long commands = 0;    // commands run in a shell
  long passed_over = 0; // commands the pool gave back to the caller
};

// Shells that fail to start, one after another, before the pool stops trying:
// a login shell that cannot run `exec /bin/sh`, or a start-up slower than the
// answer bound, would cost a start per command.
inline constexpr int k_max_shell_failures = 3;

class ShellPool {
public:
  // `answer_timeout` (the host's connect timeout) bounds how long an idle
  // shell may take to answer before it counts as gone, and a new one to be
  // ready, the user's start-up included.
  ShellPool(std::string where, ShellOpener opener, util::Duration answer_timeout, int max_shells = k_default_shells);
  ShellPool(const ShellPool&) = delete;
  ShellPool& operator=(const ShellPool&) = delete;
  ~ShellPool();

  // Runs `command_line` in an idle shell that answers a ping, or in a new one
  // while fewer than the maximum are open; `timeout` bounds the command from
  // the moment it is sent. Nothing when no shell took it (all busy, shells do
  // not start on this host, or the idle one was gone): the caller then runs it
  // on a channel of its own.
  std::optional<std::expected<CommandResult, Error>> run(const std::string& command_line, util::Duration timeout);

  ShellCounts counts() const;

  class Shell;

private:
  std::unique_ptr<Shell> take_idle();
  // A new shell, ready; nothing when none may or could start.
  std::unique_ptr<Shell> start_shell(util::Duration timeout);
  void give_back(std::unique_ptr<Shell> shell);
  void drop(bool failed_start);

  const std::string m_where;
  const ShellOpener m_opener;
  const util::Duration m_answer_timeout;
  const int m_max_shells;
  mutable std::mutex m_mutex;
  std::vector<std::unique_ptr<Shell>> m_idle;
  int m_open = 0; // idle, busy and starting
  int m_failures_in_a_row = 0;
  ShellCounts m_counts;
};

} // namespace specctl::remote
