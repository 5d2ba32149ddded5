#pragma once

#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <chrono>
#include <cstddef>
#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::remote {

// What a finished command left behind. `timed_out` is set when specctl stopped
// waiting (the command was killed), which is never the same as a failure.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
};

inline constexpr util::Duration k_default_command_timeout = std::chrono::seconds{60};
// The seconds a remote command gets under `timeout -s KILL`: one more than
// specctl waits, so that normally specctl is the one who notices the timeout.
inline long remote_kill_seconds(util::Duration timeout) {
  return std::chrono::ceil<std::chrono::seconds>(timeout).count() + 1;
}
// A command's stdout or stderr beyond this is read and dropped, so that a
// runaway command cannot eat specctl's memory; stderr then says so.
inline constexpr std::size_t k_max_command_output = 64 * 1024 * 1024;
// Shells an SSH host keeps open for specctl's commands (src/remote/shell_pool.hpp):
// the host-side benchmark's polls, telemetry and the server's liveness run at
// once. Below sshd's MaxSessions, with room for commands in sessions of their own.
inline constexpr int k_default_shells = 3;
// A program of tens of MiB over a slow link.
inline constexpr util::Duration k_default_upload_timeout = std::chrono::minutes{10};

// A machine specctl runs things on: this one, or a GPU node over SSH.
//
// Everything specctl does on a host is a POSIX shell command line run by
// `exec` (built with util::shell_quote, so no value reaches the shell
// unquoted); remote/host_ops.hpp builds detached launch, liveness, signals and
// log following on top of it. A host therefore needs only two primitives.
class Host {
public:
  Host() = default;
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;
  virtual ~Host() = default;

  // For messages: "local", "node1 (root@10.0.0.7:22)".
  virtual std::string describe() const = 0;

  // Runs `command_line` with /bin/sh on the host and waits at most `timeout`.
  // An error means the host could not be reached or the command not started;
  // a command that ran and failed is a CommandResult with its exit code.
  virtual std::expected<CommandResult, Error> exec(const std::string& command_line,
                                                   util::Duration timeout = k_default_command_timeout) = 0;

  // A TCP port on 127.0.0.1 of *this* machine that reaches `target_host:target_port`
  // as seen from the host. For the local host that is the port itself; for SSH a
  // forwarded port (direct-tcpip) that stays open until the Host is destroyed.
  virtual std::expected<int, Error> open_tunnel(const std::string& target_host, int target_port) = 0;

  // Writes `bytes` (anything, a program included) to `path` on the host,
  // creating its folder; atomically: a temporary file beside it, then a
  // rename, so a reader never sees half of it. Errors name the host and the
  // path. This version needs nothing but exec: the bytes go in base64 pieces
  // small enough for a command line (slow for large files); hosts that can
  // stream a command's input override it.
  virtual std::expected<void, Error> write_file(const std::string& path, std::string_view bytes,
                                                util::Duration timeout = k_default_upload_timeout);

  // Whether the host is another machine reached over SSH, so that its ports
  // come here through a tunnel (whose round trip a client here pays).
  virtual bool over_ssh() const { return false; }

  // How many times the SSH connection dropped and was made again (a new
  // libssh2 session, a new ControlMaster); zero for hosts without one.
  virtual int reconnect_count() const { return 0; }
};

} // namespace specctl::remote
