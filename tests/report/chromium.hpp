#pragma once

// Runs Debian's Chromium headless with a deadline: its own process group, so
// that a hung browser and every helper process it forked are killed together.

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace specctl::test {

inline const std::filesystem::path k_chromium = "/usr/bin/chromium";
// Chromium starts in 1-2 s on an idle machine and 5-10 s on a loaded two-core one.
inline constexpr auto k_chromium_timeout = std::chrono::seconds{60};
inline constexpr auto k_chromium_poll = std::chrono::milliseconds{50};

struct ChromiumRun {
  int exit_code = -1;
  bool timed_out = false;
  // stdout and stderr together (--dump-dom writes the page to stdout, the rest is logging).
  std::string output;
  std::chrono::milliseconds elapsed{0};
};

// Flags every run needs: no sandbox (the tests run as root), no GPU, and a
// profile of its own so runs neither share state nor write to $HOME.
inline std::vector<std::string> chromium_base_args(const std::filesystem::path& profile) {
  return {k_chromium.string(),
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-dev-shm-usage",
          "--disable-extensions",
          "--disable-background-networking",
          "--disable-breakpad",
          "--no-first-run",
          "--no-default-browser-check",
          "--mute-audio",
          "--hide-scrollbars",
          "--user-data-dir=" + profile.string()};
}

inline ChromiumRun run_chromium(const std::vector<std::string>& args, const std::filesystem::path& output_file) {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (auto& arg : storage) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  const int error = ::posix_spawn(&pid, argv.front(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (error != 0) {
    throw std::runtime_error("cannot start " + args.front() + ": " + std::strerror(error));
  }

  ChromiumRun run;
  const auto deadline = start + k_chromium_timeout;
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      run.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(k_chromium_poll);
  }
  // Helpers that outlive the browser process (a renderer, the zygote) go with its group.
  ::kill(-pid, SIGKILL);
  run.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::ifstream in(output_file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  run.output = text.str();
  return run;
}

} // namespace specctl::test
