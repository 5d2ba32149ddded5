#include <specctl/server/log_replay.hpp>

#include <specctl/server/log_watch.hpp>

#include <algorithm>
#include <fmt/format.h>

namespace specctl::server {

namespace {

struct MetricSum {
  std::size_t samples = 0;
  double sum = 0;
  double min = 0;
  double max = 0;
};

class Replayer {
public:
  explicit Replayer(const ServerTemplate& tmpl)
      : m_patterns(tmpl.log), m_matcher(tmpl.log), m_sums(tmpl.log.metrics.size()) {
    m_out.ready_hits.assign(m_patterns.ready.size(), 0);
    m_out.fatal_hits.assign(m_patterns.fatal.size(), 0);
    m_out.milestone_hits.assign(m_patterns.milestones.size(), 0);
    m_out.metric_hits.assign(m_patterns.metrics.size(), 0);
  }

  void line(std::string_view text, std::size_t number) {
    count_hits(m_matcher.matches(text));
    LineFacts facts = m_matcher.classify(text);
    if (facts.fatal) {
      note_fatal(text, number, *facts.fatal_pattern);
      return;
    }
    if (facts.ready && !m_out.ready_line) {
      m_out.ready_line = number;
    }
    if (facts.milestone) {
      auto it = std::find_if(m_out.milestones.begin(), m_out.milestones.end(),
                             [&](const ReplayMilestone& m) { return m.name == *facts.milestone; });
      if (it == m_out.milestones.end()) {
        m_out.milestones.push_back({*facts.milestone, number, 1});
      } else {
        ++it->count;
      }
    }
    if (facts.progress && facts.progress->percent) {
      m_out.progress.push_back({number, *facts.progress->percent, facts.progress->done, facts.progress->total});
    }
    for (const auto& [name, value] : facts.metrics) {
      auto it = std::find_if(m_patterns.metrics.begin(), m_patterns.metrics.end(),
                             [&](const auto& p) { return p.first == name; });
      MetricSum& sum = m_sums[static_cast<std::size_t>(it - m_patterns.metrics.begin())];
      sum.min = sum.samples == 0 ? value : std::min(sum.min, value);
      sum.max = sum.samples == 0 ? value : std::max(sum.max, value);
      sum.sum += value;
      ++sum.samples;
    }
  }

  LogReplay finish(std::size_t lines) {
    m_out.lines = lines;
    for (std::size_t i = 0; i < m_sums.size(); ++i) {
      if (m_sums[i].samples > 0) {
        const auto& s = m_sums[i];
        m_out.metrics.push_back(
            {m_patterns.metrics[i].first, s.samples, s.sum / static_cast<double>(s.samples), s.min, s.max});
      }
    }
    if (m_out.fatal) {
      m_out.verdict = ReplayVerdict::failed;
      m_out.verdict_line = "failed: " + m_out.fatal->text;
    } else if (m_out.ready_line) {
      m_out.verdict = ReplayVerdict::ready;
      m_out.verdict_line = "ready";
    } else if (m_patterns.ready.empty()) {
      m_out.verdict_line = "no verdict: the template has no ready pattern (readiness is the health check alone)";
    } else {
      std::string where;
      if (!m_out.progress.empty()) {
        where = fmt::format(", the last progress {:.0f}% at line {}", m_out.progress.back().percent,
                            m_out.progress.back().line);
      }
      m_out.verdict_line =
          fmt::format("no verdict: no ready or fatal line in {} line{}{}", lines, lines == 1 ? "" : "s", where);
    }
    return std::move(m_out);
  }

private:
  void count_hits(const PatternMatches& hits) {
    for (auto i : hits.ready) {
      ++m_out.ready_hits[i];
    }
    for (auto i : hits.fatal) {
      ++m_out.fatal_hits[i];
    }
    for (auto i : hits.milestones) {
      ++m_out.milestone_hits[i];
    }
    for (auto i : hits.metrics) {
      ++m_out.metric_hits[i];
    }
    m_out.progress_hits += hits.progress ? 1 : 0;
  }

  void note_fatal(std::string_view text, std::size_t number, std::size_t pattern) {
    if (!m_out.first_fatal_line) {
      m_out.first_fatal_line = number;
    }
    if (!m_out.fatal || pattern < m_out.fatal->pattern) {
      m_out.fatal = ReplayFatal{number, strip_ansi(text), pattern, m_patterns.fatal[pattern]};
    }
  }

  const LogPatterns& m_patterns;
  LogMatcher m_matcher;
  std::vector<MetricSum> m_sums;
  LogReplay m_out;
};

} // namespace

LogReplay replay_log(const ServerTemplate& tmpl, std::string_view text) {
  Replayer replayer(tmpl);
  std::size_t number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    std::string_view line = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? text.size() : end + 1;
    ++number;
    // tqdm redraws its bar with '\r': each redraw is a line to LogLines, and here too.
    std::size_t piece = 0;
    while (piece <= line.size()) {
      auto cr = line.find('\r', piece);
      std::string_view part = line.substr(piece, cr == std::string_view::npos ? std::string_view::npos : cr - piece);
      if (!part.empty()) {
        replayer.line(part, number);
      }
      if (cr == std::string_view::npos) {
        break;
      }
      piece = cr + 1;
    }
  }
  return replayer.finish(number);
}

} // namespace specctl::server
