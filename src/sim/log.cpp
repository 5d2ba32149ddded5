#include <specctl/sim/log.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <ctime>
#include <unistd.h>

namespace specctl::sim {

std::string log_prefix(std::chrono::system_clock::time_point when, std::optional<int> tp_rank) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm local{};
  localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  return tp_rank ? fmt::format("[{} TP{}] ", stamp, *tp_rank) : fmt::format("[{}] ", stamp);
}

std::string tqdm_interval(double seconds) {
  const long total = static_cast<long>(seconds);
  const long minutes = total / 60;
  const long hours = minutes / 60;
  if (hours > 0) {
    return fmt::format("{:d}:{:02d}:{:02d}", hours, minutes % 60, total % 60);
  }
  return fmt::format("{:02d}:{:02d}", minutes, total % 60);
}

std::string progress_line(std::string_view description, int done, int total, double elapsed_s) {
  const double percentage = total > 0 ? 100.0 * done / total : 0.0;
  const double rate = elapsed_s > 0.0 && done > 0 ? done / elapsed_s : 0.0;
  std::string remaining = "?";
  std::string rate_text = "?it/s";
  if (rate > 0.0) {
    remaining = tqdm_interval((total - done) / rate);
    // tqdm flips to seconds per item when items are slower than one a second.
    rate_text = rate < 1.0 ? fmt::format("{:5.2f}s/it", 1.0 / rate) : fmt::format("{:5.2f}it/s", rate);
  }
  return fmt::format("{}: {:3.0f}% Completed | {}/{} [{}<{}, {}]", description, percentage, done, total,
                     tqdm_interval(elapsed_s), remaining, rate_text);
}

std::string python_float(double value) {
  if (std::isnan(value)) {
    return "nan";
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc{} ? end : buffer);
  if (text.find_first_of(".e") == std::string::npos) {
    text += ".0";
  }
  return text;
}

void Log::scheduler(LogLevel level, std::string_view message, int tp_rank) const {
  if (enabled(level)) {
    write_line(m_stderr_fd, log_prefix(std::chrono::system_clock::now(), tp_rank) + std::string(message));
  }
}

void Log::main(LogLevel level, std::string_view message) const {
  if (enabled(level)) {
    write_line(m_stderr_fd, log_prefix(std::chrono::system_clock::now(), std::nullopt) + std::string(message));
  }
}

void Log::uvicorn(LogLevel level, std::string_view message, UvicornStream stream) const {
  if (!enabled(level)) {
    return;
  }
  // uvicorn pads the level name to a fixed column: "INFO:     ", "ERROR:    ".
  const std::string_view name = level == LogLevel::error     ? "ERROR:"
                                : level == LogLevel::warning ? "WARNING:"
                                : level == LogLevel::debug   ? "DEBUG:"
                                                             : "INFO:";
  const std::string prefix =
      m_uvicorn_prefix.empty() ? log_prefix(std::chrono::system_clock::now(), std::nullopt) : m_uvicorn_prefix;
  write_line(stream == UvicornStream::out ? m_stdout_fd : m_stderr_fd,
             fmt::format("{}{:<10}{}", prefix, name, message));
}

void Log::raw(std::string_view text) const {
  write_line(m_stderr_fd, std::string(text));
}

std::string vllm_prefix(std::chrono::system_clock::time_point when, std::string_view process, int pid, LogLevel level,
                        std::string_view fileinfo) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm local{};
  localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%m-%d %H:%M:%S", &local);
  // ColoredFormatter.COLORS and GREY.
  const std::string_view name = level == LogLevel::error     ? "\x1b[31mERROR"
                                : level == LogLevel::warning ? "\x1b[33mWARNING"
                                : level == LogLevel::debug   ? "\x1b[37mDEBUG"
                                                             : "\x1b[32mINFO";
  return fmt::format("({} pid={}) {}\x1b[0m \x1b[90m{}\x1b[0m \x1b[90m[{}]\x1b[0m ", process, pid, name, stamp,
                     fileinfo);
}

std::string llama_prefix(std::chrono::microseconds since_start, LogLevel level) {
  const long long us = since_start.count();
  const char letter = level == LogLevel::error     ? 'E'
                      : level == LogLevel::warning ? 'W'
                      : level == LogLevel::debug   ? 'D'
                                                   : 'I';
  return fmt::format("{}.{:02d}.{:03d}.{:03d} {} ", us / 1000000 / 60, us / 1000000 % 60, us / 1000 % 1000, us % 1000,
                     letter);
}

void Log::vllm(LogLevel level, std::string_view fileinfo, std::string_view message, std::string_view process) const {
  if (enabled(level)) {
    write_line(m_stderr_fd,
               vllm_prefix(std::chrono::system_clock::now(), process, static_cast<int>(::getpid()), level, fileinfo) +
                   std::string(message));
  }
}

void Log::llama(LogLevel level, std::string_view message) const {
  if (enabled(level)) {
    const auto since =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - m_start);
    write_line(m_stderr_fd, llama_prefix(since, level) + std::string(message));
  }
}

void Log::write_line(int fd, std::string line) const {
  line += '\n';
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t written = ::write(fd, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      // Nobody reads the log any more; the server keeps serving.
      return;
    }
    rest.remove_prefix(static_cast<std::size_t>(written));
  }
}

} // namespace specctl::sim
