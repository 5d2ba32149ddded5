#include <specctl/util/reporter.hpp>

#include <specctl/util/duration.hpp>

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

namespace specctl::util {

namespace {

constexpr int k_bar_width = 30;
constexpr int k_plain_step_percent = 10;

std::string eta_text(std::optional<std::chrono::seconds> eta) {
  return eta ? fmt::format(", ETA {}", format_duration(*eta)) : std::string();
}

} // namespace

StderrReporter::StderrReporter() : m_tty(::isatty(STDERR_FILENO) != 0) {}

void StderrReporter::end_bar() {
  if (m_bar_open) {
    std::fputs("\n", stderr);
    m_bar_open = false;
  }
}

void StderrReporter::info(std::string_view message) {
  std::lock_guard lock(m_mutex);
  end_bar();
  std::fputs(fmt::format("{}\n", message).c_str(), stderr);
}

void StderrReporter::warning(std::string_view message) {
  std::lock_guard lock(m_mutex);
  end_bar();
  std::fputs(fmt::format("warning: {}\n", message).c_str(), stderr);
}

void StderrReporter::progress(std::string_view label, double percent, std::optional<std::chrono::seconds> eta) {
  std::lock_guard lock(m_mutex);
  int whole = static_cast<int>(percent);
  if (m_tty) {
    int filled = whole * k_bar_width / 100;
    std::string bar(static_cast<std::size_t>(std::clamp(filled, 0, k_bar_width)), '#');
    bar.resize(k_bar_width, '.');
    std::fputs(fmt::format("\r\x1b[2K{} [{}] {:3d}%{}", label, bar, whole, eta_text(eta)).c_str(), stderr);
    m_bar_open = true;
    return;
  }
  int step = whole / k_plain_step_percent;
  if (label == m_last_label && step == m_last_step) {
    return;
  }
  m_last_label = std::string(label);
  m_last_step = step;
  std::fputs(fmt::format("{}: {}%{}\n", label, whole, eta_text(eta)).c_str(), stderr);
}

void RecordingReporter::info(std::string_view message) {
  std::lock_guard lock(m_mutex);
  m_lines.emplace_back(message);
}

void RecordingReporter::warning(std::string_view message) {
  std::lock_guard lock(m_mutex);
  m_lines.push_back(fmt::format("warning: {}", message));
}

void RecordingReporter::progress(std::string_view label, double percent, std::optional<std::chrono::seconds> eta) {
  std::lock_guard lock(m_mutex);
  m_lines.push_back(fmt::format("{}: {:.0f}%{}", label, percent, eta_text(eta)));
}

std::vector<std::string> RecordingReporter::lines() const {
  std::lock_guard lock(m_mutex);
  return m_lines;
}

} // namespace specctl::util
