#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/types.h>

#include <expected>
#include <filesystem>
#include <string>
#include <vector>

namespace specctl::util {

// Where a spawned process stands among process groups and sessions.
enum class ProcessGroup {
  // This process's group and session.
  inherit,
  // A new group led by the child (setpgid(0, 0)): killing -pid reaches what it starts.
  own_group,
  // A new session and group (setsid): also free of this process's terminal.
  own_session,
};

// What posix_spawn does in the child between fork and exec, and the call
// itself. Owns posix_spawn's file actions and attributes and destroys them on
// every path. The file actions run in the order they are added. A failure to
// record a setting is kept and returned by spawn(), so no setting is lost
// silently.
class SpawnSetup {
public:
  SpawnSetup();
  ~SpawnSetup();
  // posix_spawn's objects may not be copied, nor moved by memcpy.
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  // The child opens `path` as descriptor `fd`.
  void add_open(int fd, const std::filesystem::path& path, int flags, mode_t mode = 0);
  // The child's descriptor `to` becomes a copy of `from`, which loses O_CLOEXEC there.
  void add_dup2(int from, int to);
  void add_close(int fd);
  // The child closes every descriptor from `lowest` up.
  void add_close_from(int lowest);

  void set_group(ProcessGroup group);
  // The child starts with no signal blocked, whatever this process blocks.
  void unblock_signals();
  // The child starts with `signals` at their default action, whatever this process ignores.
  void default_signals(const sigset_t& signals);
  // A child that is nobody's but its own: it closes every descriptor above
  // stderr (nothing of ours leaks into it), starts a new session and group
  // (no terminal to prompt on; killing -pid reaches all it starts), and
  // starts with no signal blocked and every signal at its default. Add the
  // stdin/stdout/stderr file actions first.
  void detach();

  // Starts `program` with `argv` (argv[0] included) and the environment
  // `env` ("NAME=value" strings); the child's pid, or the errno of the failure.
  std::expected<pid_t, int> spawn(const std::filesystem::path& program, const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env) const;
  // The same with this process's environment.
  std::expected<pid_t, int> spawn(const std::filesystem::path& program, const std::vector<std::string>& argv) const;

private:
  void note(int rc);
  void add_flags(short flags);
  std::expected<pid_t, int> spawn_with(const std::filesystem::path& program, const std::vector<std::string>& argv,
                                       char* const* envp) const;

  posix_spawn_file_actions_t m_actions{};
  posix_spawnattr_t m_attr{};
  short m_flags = 0;
  int m_error = 0;
};

} // namespace specctl::util
