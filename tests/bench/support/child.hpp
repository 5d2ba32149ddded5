#pragma once

// Child processes for the benchmark suite: specsim servers and the specctl
// binary. Every child runs in its own process group and is killed with it by
// a destructor, even when a test fails; every wait has a deadline.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace specctl::testing {

// Bounds for a loaded two-core machine.
inline constexpr std::chrono::seconds k_ready_timeout{30};
inline constexpr std::chrono::seconds k_command_timeout{90};

// A port nobody listens on right now.
int free_port();

class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return m_path; }

private:
  std::filesystem::path m_path;
};

class Child {
public:
  // stdout and stderr go to the files given.
  Child(const std::vector<std::string>& argv, const std::filesystem::path& out, const std::filesystem::path& err);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return m_pid; }
  // The exit code (128 + signal when killed) within the timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  void kill_group();

private:
  pid_t m_pid = -1;
  std::optional<int> m_code;
};

struct CommandResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs argv to completion (killed at the timeout, code -1) and captures its output.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = k_command_timeout);

std::string read_file(const std::filesystem::path& path);

// One specsim on a free port with a short load time, ready when constructed.
class Specsim {
public:
  explicit Specsim(const std::vector<std::string>& extra_args);
  ~Specsim();
  Specsim(const Specsim&) = delete;
  Specsim& operator=(const Specsim&) = delete;

  std::string url() const;
  std::string log() const;

private:
  TempDir m_dir;
  int m_port = 0;
  std::optional<Child> m_child;
};

// Where the specsim binary is, or empty when this build has none.
std::string specsim_binary();
std::string specctl_binary();

} // namespace specctl::testing
