#include <specctl/server/log_watch.hpp>

#include <specctl/util/text.hpp>

#include <charconv>

namespace specctl::server {

namespace {

std::optional<double> capture_number(const std::smatch& m, int group) {
  if (group <= 0 || static_cast<std::size_t>(group) >= m.size() || !m[group].matched) {
    return std::nullopt;
  }
  std::string text = m[group].str();
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

} // namespace

std::string strip_ansi(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\x1b') {
      out += line[i];
      continue;
    }
    // CSI: ESC [ parameters... final byte in @..~
    if (i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !(line[i] >= '@' && line[i] <= '~')) {
        ++i;
      }
    } else {
      ++i;
    }
  }
  return out;
}

namespace {

// What the patterns see of a line: colour codes removed, its first util::k_regex_window bytes.
std::string matchable(std::string_view raw) {
  return std::string(util::regex_window(strip_ansi(raw)));
}

} // namespace

LogMatcher::LogMatcher(const LogPatterns& patterns) {
  // Patterns were compiled once already when the template was loaded, so they are valid here.
  for (const auto& p : patterns.ready) {
    m_ready.emplace_back(p, std::regex::ECMAScript | std::regex::optimize);
  }
  for (const auto& p : patterns.fatal) {
    m_fatal.emplace_back(p, std::regex::ECMAScript | std::regex::optimize);
  }
  if (patterns.progress) {
    m_progress.emplace(patterns.progress->pattern, std::regex::ECMAScript | std::regex::optimize);
    m_progress_groups = *patterns.progress;
  }
  for (const auto& p : patterns.milestones) {
    m_milestones.emplace_back(p, std::regex(p, std::regex::ECMAScript | std::regex::optimize));
  }
  for (const auto& [name, p] : patterns.metrics) {
    m_metrics.emplace_back(name, std::regex(p, std::regex::ECMAScript | std::regex::optimize));
  }
}

LineFacts LogMatcher::classify(std::string_view raw) const {
  LineFacts facts;
  std::string line = matchable(raw);
  for (const auto& re : m_ready) {
    facts.ready = facts.ready || std::regex_search(line, re);
  }
  for (std::size_t i = 0; i < m_fatal.size() && !facts.fatal; ++i) {
    if (std::regex_search(line, m_fatal[i])) {
      facts.fatal = true;
      facts.fatal_pattern = i;
    }
  }
  std::smatch m;
  if (m_progress && std::regex_search(line, m, *m_progress)) {
    LoadProgress p;
    p.percent = capture_number(m, m_progress_groups.percent_group);
    if (auto done = capture_number(m, m_progress_groups.done_group)) {
      p.done = static_cast<long>(*done);
    }
    if (auto total = capture_number(m, m_progress_groups.total_group)) {
      p.total = static_cast<long>(*total);
    }
    if (!p.percent && p.done && p.total && *p.total > 0) {
      p.percent = 100.0 * static_cast<double>(*p.done) / static_cast<double>(*p.total);
    }
    facts.progress = p;
  }
  for (const auto& [name, re] : m_milestones) {
    if (std::regex_search(line, re)) {
      facts.milestone = name;
      break;
    }
  }
  for (const auto& [name, re] : m_metrics) {
    if (std::regex_search(line, m, re)) {
      if (auto value = capture_number(m, 1)) {
        facts.metrics.emplace_back(name, *value);
      }
    }
  }
  return facts;
}

PatternMatches LogMatcher::matches(std::string_view raw) const {
  PatternMatches out;
  std::string line = matchable(raw);
  for (std::size_t i = 0; i < m_ready.size(); ++i) {
    if (std::regex_search(line, m_ready[i])) {
      out.ready.push_back(i);
    }
  }
  for (std::size_t i = 0; i < m_fatal.size(); ++i) {
    if (std::regex_search(line, m_fatal[i])) {
      out.fatal.push_back(i);
    }
  }
  out.progress = m_progress && std::regex_search(line, *m_progress);
  for (std::size_t i = 0; i < m_milestones.size(); ++i) {
    if (std::regex_search(line, m_milestones[i].second)) {
      out.milestones.push_back(i);
    }
  }
  std::smatch m;
  for (std::size_t i = 0; i < m_metrics.size(); ++i) {
    if (std::regex_search(line, m, m_metrics[i].second) && capture_number(m, 1)) {
      out.metrics.push_back(i);
    }
  }
  return out;
}

std::vector<std::string> LogLines::feed(std::string_view bytes) {
  m_offset += bytes.size();
  std::vector<std::string> lines;
  for (char c : bytes) {
    if (c == '\n' || c == '\r') {
      if (!m_partial.empty()) {
        lines.push_back(std::move(m_partial));
        m_partial.clear();
      }
      continue;
    }
    // A line without an end (a binary blob, a runaway progress bar) must not grow without bound.
    if (m_partial.size() >= k_max_line) {
      lines.push_back(std::move(m_partial));
      m_partial.clear();
    }
    m_partial += c;
  }
  for (const auto& line : lines) {
    m_tail.push_back(line);
    if (m_tail.size() > k_tail_lines) {
      m_tail.pop_front();
    }
  }
  return lines;
}

std::vector<std::string> LogLines::tail() const {
  std::vector<std::string> out(m_tail.begin(), m_tail.end());
  if (!m_partial.empty()) {
    out.push_back(m_partial);
    if (out.size() > k_tail_lines) {
      out.erase(out.begin());
    }
  }
  return out;
}

} // namespace specctl::server
