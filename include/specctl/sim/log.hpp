#pragma once

#include <specctl/sim/options.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace specctl::sim {

// "[2025-01-22 10:00:00 TP0] " (rank given) or "[2025-01-22 10:00:00] ".
std::string log_prefix(std::chrono::system_clock::time_point when, std::optional<int> tp_rank);

// One tqdm line as SGLang's loader prints it:
// "Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:30<00:31,  1.05it/s]".
std::string progress_line(std::string_view description, int done, int total, double elapsed_s);

// tqdm's interval format: "05:07", "1:02:03".
std::string tqdm_interval(double seconds);

// A float the way Python's repr prints it: "92.6", "1.0", "0.05".
std::string python_float(double value);

// vLLM's prefix (vllm/logger.py's format under the ColoredFormatter of
// vllm/logging_utils/formatter.py, inside the per-process decorator):
// "(APIServer pid=11980) \x1b[32mINFO\x1b[0m \x1b[90m12-02 10:00:00\x1b[0m
// \x1b[90m[api_server.py:1234]\x1b[0m ".
std::string vllm_prefix(std::chrono::system_clock::time_point when, std::string_view process, int pid, LogLevel level,
                        std::string_view fileinfo);

// llama.cpp's prefix (common/log.cpp): minutes.seconds.millis.micros since
// the start, then the level letter: "0.01.234.567 I ".
std::string llama_prefix(std::chrono::microseconds since_start, LogLevel level);

// Where a uvicorn line goes: its access log writes to stdout, the rest to stderr.
enum class UvicornStream { err, out };

// The SGLang-like log. Every line is written with one write(2) and no
// buffering, because another process follows the log file while it grows.
// Scheduler and loader lines go to stderr with the TP prefix; uvicorn's
// access lines go to stdout; tqdm bars go to stderr whatever the level.
class Log {
public:
  explicit Log(LogLevel threshold, int stdout_fd = 1, int stderr_fd = 2)
      : m_threshold(threshold), m_stdout_fd(stdout_fd), m_stderr_fd(stderr_fd),
        m_start(std::chrono::steady_clock::now()) {}

  bool enabled(LogLevel level) const { return level >= m_threshold; }
  // vLLM wraps uvicorn's lines in its process prefix: "(APIServer pid=N) ".
  void set_uvicorn_prefix(std::string prefix) { m_uvicorn_prefix = std::move(prefix); }

  // "[ts TP0] message" on stderr.
  void scheduler(LogLevel level, std::string_view message, int tp_rank = 0) const;
  // "[ts] message" on stderr (the main process).
  void main(LogLevel level, std::string_view message) const;
  // "[ts] INFO:     message" the way SGLang configures uvicorn's logger.
  void uvicorn(LogLevel level, std::string_view message, UvicornStream stream = UvicornStream::err) const;
  // Text as is on stderr (tracebacks, tqdm bars); a newline is added.
  void raw(std::string_view text) const;
  // A vLLM line: "(PROCESS pid=N) LEVEL MM-DD HH:MM:SS [fileinfo] message" on stderr.
  void vllm(LogLevel level, std::string_view fileinfo, std::string_view message,
            std::string_view process = "APIServer") const;
  // A llama.cpp line: "0.01.234.567 I message" on stderr.
  void llama(LogLevel level, std::string_view message) const;

private:
  void write_line(int fd, std::string line) const;

  LogLevel m_threshold;
  int m_stdout_fd;
  int m_stderr_fd;
  std::chrono::steady_clock::time_point m_start;
  std::string m_uvicorn_prefix;
};

} // namespace specctl::sim
