#pragma once

// The ssh client processes an OpenSshHost starts: spawned without a shell, in
// a session of their own (no controlling terminal, so ssh can never prompt),
// owned by a move-only handle that kills and reaps them on every path.

#include <specctl/remote/host.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/unique_fd.hpp>

#include <chrono>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace specctl::remote::openssh {

using Clock = std::chrono::steady_clock;

// A child process of this one. Destroying it SIGKILLs it (only it: never its
// process group, where a master's ProxyJump helper may live) and reaps it.
class Child {
public:
  Child() = default;
  explicit Child(pid_t pid) : m_pid(pid) {}
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return m_pid; }
  explicit operator bool() const { return m_pid > 0; }
  // The exit status (128 + signal for a signal) once it has ended, reaping it; nothing while it runs.
  std::optional<int> poll_exit();
  // SIGKILLs and reaps it, if it still runs.
  void kill();

private:
  pid_t m_pid = -1;
};

// How a spawned ssh meets this process.
enum class Stdio {
  // stdin a socket (writes to a dead reader fail with EPIPE instead of
  // raising SIGPIPE), stdout and stderr pipes.
  captured,
  // stdin and stdout the given socket (a tunnel connection), stderr /dev/null.
  socket,
};

struct Spawned {
  Child child;
  util::UniqueFd in;  // captured: our end of its stdin
  util::UniqueFd out; // captured: its stdout
  util::UniqueFd err; // captured: its stderr
};

// Starts `argv` (argv[0] an absolute path) in its own session with every other
// descriptor closed. `socket` is used with Stdio::socket only. The error is errno.
std::expected<Spawned, int> spawn_ssh(const std::vector<std::string>& argv, Stdio stdio, int socket = -1);

// The first executable `name` in PATH, or `name` itself when it has a slash.
std::optional<std::string> find_in_path(const std::string& name);

// One run of an ssh client to its end, with two phases: until `ready` says
// the remote side is waiting (bounded by `start_deadline`), then the command
// (bounded by `run_timeout` from that moment). Without `ready` the run starts
// in the second phase at once, bounded by `start_deadline`.
struct RunSpec {
  std::vector<std::string> argv;
  // Called with the stderr read so far until it returns true; it may edit
  // the text (to take a marker out). Then `input` is sent and stdin closed.
  std::function<bool(std::string& err)> ready;
  std::string input;
  Clock::time_point start_deadline;
  util::Duration run_timeout{};
};

struct RunOutcome {
  std::string out;
  std::string err;
  // ssh's exit status; nothing when it was killed at a deadline.
  std::optional<int> status;
  bool ready = false;
  Clock::time_point ready_at{};
  // A deadline passed (of the phase `ready` tells) and ssh was killed.
  bool timed_out = false;
  // stdin was closed before all of `input` went in (ssh ended early).
  bool input_cut = false;
  // A stream passed k_max_command_output and was cut there; stderr then ends with a
  // line saying so, followed by the last 256 bytes of stderr.
  bool output_cut = false;
};

// Runs the spec to its end; the error is errno of a failed spawn or pipe.
std::expected<RunOutcome, int> run_ssh(const RunSpec& spec);

} // namespace specctl::remote::openssh
