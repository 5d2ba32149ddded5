#pragma once

// The pieces of the OpenSSH transport (openssh_host.cpp: the target, ssh's
// arguments, the master and the host; openssh_exec.cpp: commands;
// openssh_tunnel.cpp: forwarded ports; openssh_jumps.cpp: jump hosts).

#include "openssh_process.hpp"
#include "shell_pool.hpp"

#include <specctl/remote/openssh_host.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specctl::remote::openssh {

// How ssh's stderr reads after it failed: the error for the caller, and
// whether the master went away under it (the command did not start, and
// another try on a new master may work).
struct SshFailure {
  Error error;
  bool master_gone = false;
};

// `err` is what ssh wrote, `status` its exit status.
SshFailure classify_failure(const std::string& where, std::string_view err, int status);

// ssh's `-o ConnectTimeout`-style whole seconds, at least one.
long long whole_seconds(util::Duration d);
// A value for `-o Name=value`: ssh splits option lines at spaces and takes
// quotes, so such values go in double quotes.
std::string option_value(std::string_view value);
// ssh expands %-tokens in paths (ControlPath, UserKnownHostsFile, IdentityFile).
std::string escape_tokens(std::string_view path);

// -o BatchMode=yes, the timeouts and keepalives, LogLevel=ERROR, no
// forwardings, then `t`'s known_hosts, host key policy, user, port and keys:
// what every ssh of the transport is given, a hop's included.
void add_login_options(const OpenSshTarget& t, std::vector<std::string>& args);

// openssh_jumps.cpp. `target.jumps` as the line ssh runs as ProxyCommand: a
// chain of `ssh -W`, one per hop, each with its own settings. Each hop's ssh
// writes its stderr to a file in the control folder: a master's ProxyCommand
// gets /dev/null otherwise, and with it the reason a hop failed.
std::string proxy_command(const OpenSshTarget& target, const std::string& program);
// Forgets what the hops said before (before a new master starts).
void clear_jump_errors(const OpenSshTarget& target);
// Why the nearest hop that said something failed ("cannot reach jump host
// bastion (openssh: ...): ..."), to follow `where`; nothing when no hop spoke.
std::optional<Error> jump_failure(const OpenSshTarget& target, const std::string& where);

// ssh's argv for `target` up to the destination: `extra` options come before `--`.
std::vector<std::string> ssh_argv(const OpenSshTarget& target, const std::string& program,
                                  const std::vector<std::string>& extra);

// connect_openssh's work.
std::expected<std::unique_ptr<Host>, Error> connect_host(const OpenSshTarget& target);

class TunnelRelay;

// Commands (and shells) at once over one master: below sshd's default MaxSessions (10).
using CommandSlots = std::counting_semaphore<8>;

// One of a host's command slots, given back when dropped.
class CommandSlot {
public:
  // Waits for a slot.
  static CommandSlot take(CommandSlots& slots) {
    slots.acquire();
    return CommandSlot(slots);
  }
  // A slot when one is free now.
  static std::optional<CommandSlot> try_take(CommandSlots& slots) {
    return slots.try_acquire() ? std::optional<CommandSlot>(CommandSlot(slots)) : std::nullopt;
  }
  CommandSlot(CommandSlot&& other) noexcept : m_slots(std::exchange(other.m_slots, nullptr)) {}
  CommandSlot(const CommandSlot&) = delete;
  CommandSlot& operator=(const CommandSlot&) = delete;
  CommandSlot& operator=(CommandSlot&&) = delete;
  ~CommandSlot() {
    if (m_slots != nullptr) {
      m_slots->release();
    }
  }

private:
  explicit CommandSlot(CommandSlots& slots) : m_slots(&slots) {}
  CommandSlots* m_slots;
};

class OpenSshHost final : public Host {
public:
  // `program` is the client's absolute path; `control_path` the master's
  // socket as `ssh -G` expands it.
  OpenSshHost(OpenSshTarget target, std::string program, std::string control_path);
  ~OpenSshHost() override;

  std::string describe() const override { return m_where; }
  std::expected<CommandResult, Error> exec(const std::string& command_line, util::Duration timeout) override;
  std::expected<int, Error> open_tunnel(const std::string& target_host, int target_port) override;
  std::expected<void, Error> write_file(const std::string& path, std::string_view bytes,
                                        util::Duration timeout = k_default_upload_timeout) override;
  bool over_ssh() const override { return true; }
  // Masters seen after the first.
  int reconnect_count() const override { return std::max(0, m_masters_seen.load() - 1); }

  // Makes sure a master listens on the control socket, starting one with a
  // command that only checks the node answers when none does; `Check::always`
  // runs that command over a listening master too.
  enum class Check { when_missing, always };
  std::expected<void, Error> ensure_master(Check check = Check::when_missing);

  // ssh's argv up to the destination: `extra` options come before `--`.
  std::vector<std::string> argv(const std::vector<std::string>& extra = {}) const;

private:
  // A shell of m_shells: `ssh HOST COMMAND` over the master, its stdin and
  // stdout a socket pair; it holds a command slot while it lives.
  std::expected<ShellStream, Error> open_shell(const std::string& command_line);
  std::expected<CommandResult, Error> run_command(const std::string& command_line, util::Duration timeout,
                                                  std::string_view input);
  // The pid that made the listening control socket (SO_PEERCRED): one per
  // master, whichever ssh started it (a tunnel's `ssh -W` may); nothing when
  // no master listens.
  std::optional<pid_t> master_listening() const;
  // Counts a master not seen before. Under m_master_mutex.
  void note_master(std::optional<pid_t> pid);
  // After a command could not start in time: when the master does not answer
  // `ssh -O check` either, it hangs (a stopped process, a stuck connection),
  // and its socket is removed so that the next try starts a new master. The
  // old one is not our child to kill; its keepalives or ControlPersist end it.
  void abandon_master_if_hung();
  // Asks the master to exit (bounded) and removes its socket.
  void drop_master();

  OpenSshTarget m_target;
  std::string m_program;
  std::string m_control_path;
  std::string m_where;
  // Held while a master is checked or started, so that concurrent commands do
  // not each start one.
  std::mutex m_master_mutex;
  // Guarded by m_master_mutex.
  std::optional<pid_t> m_master_pid;
  std::atomic<int> m_masters_seen{0};
  CommandSlots m_exec_slots{8};
  std::mutex m_tunnel_mutex;
  std::unique_ptr<TunnelRelay> m_tunnels;
  // After the slots, which its shells hold while they live.
  std::unique_ptr<ShellPool> m_shells;
};

} // namespace specctl::remote::openssh
