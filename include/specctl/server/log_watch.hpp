#pragma once

#include <specctl/server/server_template.hpp>

#include <cstdint>
#include <deque>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::server {

// Removes ANSI escape sequences (vLLM colours its log) so patterns match the text.
std::string strip_ansi(std::string_view line);

struct LoadProgress {
  std::optional<double> percent;
  std::optional<long> done;
  std::optional<long> total;
};

// What one log line says, by the template's patterns.
struct LineFacts {
  bool ready = false;
  bool fatal = false;
  // Which fatal pattern matched first, in the template's order: templates list
  // the specific ones ("CUDA out of memory") before the generic ("Traceback").
  std::optional<std::size_t> fatal_pattern;
  std::optional<LoadProgress> progress;
  std::optional<std::string> milestone;
  std::vector<std::pair<std::string, double>> metrics;
};

// Every pattern of each kind that matches one line, by index in the template (classify
// stops at the first fatal pattern and the first milestone). For checking templates.
struct PatternMatches {
  std::vector<std::size_t> ready;
  std::vector<std::size_t> fatal;
  bool progress = false;
  std::vector<std::size_t> milestones;
  std::vector<std::size_t> metrics;
};

// A template's log patterns, compiled once.
class LogMatcher {
public:
  explicit LogMatcher(const LogPatterns& patterns);
  LineFacts classify(std::string_view line) const;
  PatternMatches matches(std::string_view line) const;

private:
  std::vector<std::regex> m_ready;
  std::vector<std::regex> m_fatal;
  std::optional<std::regex> m_progress;
  ProgressPattern m_progress_groups;
  std::vector<std::pair<std::string, std::regex>> m_milestones;
  std::vector<std::pair<std::string, std::regex>> m_metrics;
};

// Turns appended log bytes into lines: '\n' and '\r' both end a line (tqdm redraws
// its bar with '\r'), a partial last line waits for the rest, and the last lines
// are kept for error messages.
class LogLines {
public:
  static constexpr std::size_t k_tail_lines = 20;
  static constexpr std::size_t k_max_line = 64 * 1024;

  std::vector<std::string> feed(std::string_view bytes);
  std::uint64_t offset() const { return m_offset; }
  // The last lines seen, oldest first, with the unfinished one if any.
  std::vector<std::string> tail() const;

private:
  std::uint64_t m_offset = 0;
  std::string m_partial;
  std::deque<std::string> m_tail;
};

} // namespace specctl::server
