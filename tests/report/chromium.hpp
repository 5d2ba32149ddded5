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

#include "process.hpp"

#include <sys/wait.h>
#include <unistd.h>

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
  // --user-data-dir is not all: Chromium still writes ~/.config/chromium/Crash Reports and
  // dconf ~/.cache/dconf. HOME and the XDG folders are the profile's, so nothing reaches $HOME.
  std::vector<std::string> env;
  for (const auto& arg : args) {
    if (arg.starts_with("--user-data-dir=")) {
      const auto profile = arg.substr(std::strlen("--user-data-dir="));
      env = {"HOME=" + profile, "XDG_CONFIG_HOME=" + profile, "XDG_CACHE_HOME=" + profile};
    }
  }
  // spawn() appends to its log; each run's output stands alone.
  std::filesystem::remove(output_file);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = spawn(args, output_file, env);
  if (pid <= 0) {
    throw std::runtime_error("cannot start " + args.front());
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
