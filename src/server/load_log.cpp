#include "load_log.hpp"

namespace specctl::server::detail {

namespace {

// How long to keep reading after a fatal line for the exit code and the specific cause.
constexpr util::Duration k_fatal_settle = std::chrono::seconds{3};

} // namespace

LoadLog::LoadLog(const LogPatterns& patterns, std::string label, Clock::time_point start, util::Reporter& reporter)
    : m_matcher(patterns), m_label(std::move(label)), m_start(start), m_reporter(reporter),
      m_needs_ready_line(!patterns.ready.empty()) {}

void LoadLog::feed(std::string_view bytes) {
  for (const auto& line : m_lines.feed(bytes)) {
    auto facts = m_matcher.classify(line);
    if (facts.fatal) {
      note_fatal(line, *facts.fatal_pattern);
      continue;
    }
    m_ready_line = m_ready_line || facts.ready;
    if (facts.milestone) {
      m_milestones.emplace_back(*facts.milestone, std::chrono::duration_cast<util::Duration>(Clock::now() - m_start));
    }
    if (facts.progress && facts.progress->percent) {
      note_progress(*facts.progress->percent);
    }
  }
}

void LoadLog::feed_last(std::string_view bytes) {
  for (const auto& line : m_lines.feed(bytes)) {
    if (auto facts = m_matcher.classify(line); facts.fatal) {
      note_fatal(line, *facts.fatal_pattern);
    }
  }
}

std::optional<std::string> LoadLog::fatal_line() const {
  if (!m_fatal) {
    return std::nullopt;
  }
  return m_fatal->line;
}

bool LoadLog::fatal_settled() const {
  return m_fatal && Clock::now() >= m_fatal->settle_until;
}

void LoadLog::note_fatal(const std::string& line, std::size_t pattern) {
  if (!m_fatal) {
    m_fatal = Fatal{strip_ansi(line), pattern, Clock::now() + k_fatal_settle};
  } else if (pattern < m_fatal->pattern) {
    m_fatal->line = strip_ansi(line);
    m_fatal->pattern = pattern;
  }
}

// The time left is extrapolated from the pace since the first progress line.
void LoadLog::note_progress(double percent) {
  if (!m_first_progress) {
    m_first_progress = Clock::now();
  }
  std::optional<std::chrono::seconds> eta;
  double elapsed = std::chrono::duration<double>(Clock::now() - *m_first_progress).count();
  if (percent > 0 && percent < 100 && elapsed > 0) {
    eta = std::chrono::seconds(static_cast<long>(elapsed * (100.0 - percent) / percent));
  }
  m_reporter.progress(m_label, percent, eta);
}

} // namespace specctl::server::detail
