#pragma once

// Private to src/server: the log watch of wait_ready.

#include <specctl/server/log_watch.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/reporter.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specctl::server::detail {

// Reads the log of a loading server by its template's patterns: whether the ready
// line appeared, the most specific fatal line, the milestones, and the progress bar,
// which it reports with an estimate of the time left.
class LoadLog {
public:
  using Clock = std::chrono::steady_clock;

  // `label` names the load in progress reports; milestones are timed from `start`.
  LoadLog(const LogPatterns& patterns, std::string label, Clock::time_point start, util::Reporter& reporter);

  // Reads the log bytes appended since offset().
  void feed(std::string_view bytes);
  // Reads the last bytes of a process that ended: only fatal lines count then.
  void feed_last(std::string_view bytes);

  std::uint64_t offset() const { return m_lines.offset(); }
  // The last log lines, for error messages.
  std::vector<std::string> tail() const { return m_lines.tail(); }
  // The template's ready line appeared, or the template has none.
  bool ready() const { return m_ready_line || !m_needs_ready_line; }
  // The most specific fatal line seen so far, without colours.
  std::optional<std::string> fatal_line() const;
  // A fatal line was seen long enough ago that the server should have died of it.
  bool fatal_settled() const;
  const std::vector<std::pair<std::string, util::Duration>>& milestones() const { return m_milestones; }

private:
  // After a fatal line the server usually dies within moments, printing the
  // specific cause last (a traceback ends with the exception): the watch keeps
  // the most specific fatal line while it settles.
  struct Fatal {
    std::string line;
    std::size_t pattern = 0;
    Clock::time_point settle_until;
  };

  void note_fatal(const std::string& line, std::size_t pattern);
  void note_progress(double percent);

  LogMatcher m_matcher;
  LogLines m_lines;
  std::string m_label;
  Clock::time_point m_start;
  util::Reporter& m_reporter;
  bool m_needs_ready_line = false;
  bool m_ready_line = false;
  std::optional<Fatal> m_fatal;
  std::optional<Clock::time_point> m_first_progress;
  std::vector<std::pair<std::string, util::Duration>> m_milestones;
};

} // namespace specctl::server::detail
