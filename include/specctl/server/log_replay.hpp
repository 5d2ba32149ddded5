#pragma once

#include <specctl/server/server_template.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::server {

// One progress line: where the bar stood.
struct ReplayProgress {
  std::size_t line = 0;
  double percent = 0;
  std::optional<long> done;
  std::optional<long> total;
};

// A milestone pattern and where it first fired; SGLang logs most of them once per TP rank.
struct ReplayMilestone {
  std::string name;
  std::size_t first_line = 0;
  std::size_t count = 0;
};

struct ReplayFatal {
  std::size_t line = 0;
  // The line without ANSI colours.
  std::string text;
  // Index into the template's log.fatal, and the pattern itself.
  std::size_t pattern = 0;
  std::string pattern_text;
};

struct ReplayMetric {
  std::string name;
  std::size_t samples = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
};

enum class ReplayVerdict { ready, failed, no_verdict };

// What specctl concludes from a whole log, read through a template's patterns the way
// wait_ready reads a loading server: a fatal line is never also ready, a milestone or
// progress; of several fatal lines the earliest pattern of the template's list names the
// cause (the templates list specific causes before generic ones). Line numbers are the
// file's, 1-based; a line tqdm redrew with '\r' counts once per redraw at that number.
// Readiness here is the ready line alone: a real run also waits for the health check.
struct LogReplay {
  std::size_t lines = 0;
  std::vector<ReplayProgress> progress;
  // In order of first occurrence.
  std::vector<ReplayMilestone> milestones;
  std::optional<std::size_t> ready_line;
  // The first fatal line, and the one that names the cause.
  std::optional<std::size_t> first_fatal_line;
  std::optional<ReplayFatal> fatal;
  // The template's order; only the metrics that appeared.
  std::vector<ReplayMetric> metrics;

  // How often each pattern fired, by its index in the template: a pattern that never
  // fires on real logs is a broken pattern.
  std::vector<std::size_t> ready_hits;
  std::vector<std::size_t> fatal_hits;
  std::vector<std::size_t> milestone_hits;
  std::vector<std::size_t> metric_hits;
  std::size_t progress_hits = 0;

  ReplayVerdict verdict = ReplayVerdict::no_verdict;
  // One line: "ready", "failed: <line>", "no verdict: <why>".
  std::string verdict_line;
};

// Replays a log's text through the template's LogMatcher.
LogReplay replay_log(const ServerTemplate& tmpl, std::string_view text);

} // namespace specctl::server
