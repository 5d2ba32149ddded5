#pragma once

// Test support: processes on this machine, without a shell. Start a program
// with its output in a file (killed when the starting thread dies), wait for it
// with a deadline, run one to completion, and read /proc: a process's children,
// name, liveness and SPECCTL_TAG.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

namespace specctl::test {

inline constexpr auto k_program_timeout = std::chrono::seconds{30};

struct ProgramResult {
  int exit_code = -1; // -1: did not start or did not finish in time
  std::string output; // stdout and stderr together
};

// argv[0] as a path: itself when it has a slash, else the first executable in PATH.
std::string find_program(const std::string& name);

// In a child just forked by `parent`: dies with the thread that forked it
// (PR_SET_PDEATHSIG), a process group of its own, default signal handling and
// an empty mask. Async-signal-safe, for the time between fork and exec.
void prepare_forked_child(pid_t parent);

// Starts argv[0] (looked up in PATH) with stdin from /dev/null and stdout and
// stderr into `log`, in its own process group. `env` entries ("K=V") are added.
// The child is killed when the thread that started it dies (PR_SET_PDEATHSIG),
// so a crashing test leaves no sshd behind; start fixtures from the test's thread.
// Returns the child's pid, or -1.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log,
            const std::vector<std::string>& env = {});

// Waits for `pid` until the deadline; SIGKILLs it past the deadline. Returns its exit code, or -1.
int wait_for(pid_t pid, std::chrono::steady_clock::duration timeout);

// Runs a program without a shell, bounded by `timeout`; its log goes to `scratch_dir` meanwhile.
ProgramResult run_program(const std::vector<std::string>& argv, const std::filesystem::path& scratch_dir,
                          const std::vector<std::string>& env = {},
                          std::chrono::steady_clock::duration timeout = k_program_timeout);

// The processes whose parent is `root`, transitively, read from /proc.
std::vector<pid_t> descendants(pid_t root);

// A process's name (/proc/PID/comm), without the newline.
std::string comm_of(pid_t pid);

// The name of the user this process runs as.
std::string current_user();

// Whether `pid` is a running process. Zombies count as gone: processes
// orphaned to an init that does not reap (a container's) stay zombies forever,
// holding nothing.
bool process_alive(pid_t pid);

// The live (not zombie) processes that carry SPECCTL_TAG=tag in their environment.
std::vector<pid_t> live_tagged_processes(const std::string& tag);

// The SPECCTL_TAG a process was started with; empty when it has none or is gone.
std::string tag_of(pid_t pid);

} // namespace specctl::test
