#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::util {

// Where long operations say what they are doing. On a terminal a progress bar
// redraws in place; in logs and CI each message is one plain line, and progress
// is a line every few percent.
class Reporter {
public:
  Reporter() = default;
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;
  virtual ~Reporter() = default;

  virtual void info(std::string_view message) = 0;
  virtual void warning(std::string_view message) = 0;
  // `label` is what is progressing ("node1 baseline: loading"); eta when known.
  virtual void progress(std::string_view label, double percent, std::optional<std::chrono::seconds> eta) = 0;
};

// Writes to stderr: a redrawn bar when stderr is a terminal, plain lines otherwise.
class StderrReporter final : public Reporter {
public:
  StderrReporter();
  void info(std::string_view message) override;
  void warning(std::string_view message) override;
  void progress(std::string_view label, double percent, std::optional<std::chrono::seconds> eta) override;

private:
  void end_bar();
  std::mutex m_mutex;
  bool m_tty = false;
  bool m_bar_open = false;
  // Plain mode: the last step (of 10%) printed per label, so logs get a line every 10%.
  std::string m_last_label;
  int m_last_step = -1;
};

// Keeps every message, for tests and for embedding in results.
class RecordingReporter final : public Reporter {
public:
  void info(std::string_view message) override;
  void warning(std::string_view message) override;
  void progress(std::string_view label, double percent, std::optional<std::chrono::seconds> eta) override;
  std::vector<std::string> lines() const;

private:
  mutable std::mutex m_mutex;
  std::vector<std::string> m_lines;
};

} // namespace specctl::util
