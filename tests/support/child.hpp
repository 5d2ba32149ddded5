#pragma once

// Test support: child processes for the benchmark suite, specsim servers and
// the specctl binary, with stdout and stderr apart. Every child runs in its own
// process group and is killed with it by a destructor, even when a test fails;
// every wait has a deadline.

#include "binaries.hpp"
#include "files.hpp"
#include "net.hpp"
#include "temp_dir.hpp"
#include "wait.hpp"

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace specctl::test {

// A command of the benchmark suite (specctl bench) finishes within this on a loaded two-core machine.
inline constexpr std::chrono::seconds k_command_timeout{90};

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

struct ChildResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs argv to completion (killed at the timeout, code -1) and captures stdout and stderr apart.
ChildResult run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = k_command_timeout);

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
  TempDir m_dir{"specctl-bench"};
  int m_port = 0;
  std::optional<Child> m_child;
};

} // namespace specctl::test
