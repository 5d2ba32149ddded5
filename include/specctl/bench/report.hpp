#pragma once

// Benchmark results for machines (a versioned JSON document, JSON lines of
// requests) and for people (tables, a progress line).

#include <specctl/bench/bench.hpp>
#include <specctl/bench/prompts.hpp>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace specctl::bench {

// Bumped whenever a field changes meaning or disappears; adding fields keeps it.
inline constexpr int k_document_version = 1;

// Everything one `specctl bench` invocation measured.
struct Document {
  Target target;
  RequestOptions request;
  std::string prompts;
  int warmup = 0;
  // What the requests ask to generate (describe_output); empty: max_tokens for each.
  std::string output;
  std::optional<SingleStreamResult> single_stream;
  std::optional<ConcurrencyResult> concurrency;
  std::optional<RateResult> rate;
};

nlohmann::json to_json(const Summary& summary);
nlohmann::json to_json(const LevelResult& level);
nlohmann::json to_json(const SingleStreamResult& result);
// {"format": "specctl-bench", "version": 1, "target": ..., "request": ...,
//  "single_stream": ..., "levels": [...], "rates": [...]}; the API key never appears.
nlohmann::json to_json(const Document& document);
// One request as a JSON line: timing, tokens, failure, and [at_ms, tokens] per chunk.
nlohmann::json request_to_json(const RequestRecord& record, std::string_view phase);

// Tables for a terminal, each ending in a newline.
std::string format_single_stream(const SingleStreamResult& result);
std::string format_levels(const std::vector<LevelResult>& levels, std::string_view title);
// Failures by kind with their first message, and warnings; empty when there are none.
std::string format_problems(const std::vector<const LevelResult*>& levels);
std::string format_document(const Document& document);

// Shows Progress on a terminal as one line redrawn in place, elsewhere
// (logs, CI) as a plain line every few seconds and at the end of each phase.
class ProgressPrinter {
public:
  enum class Style { terminal, plain };
  // Plain lines are this far apart, so a log stays readable.
  static constexpr std::chrono::seconds k_plain_interval{5};

  ProgressPrinter(std::FILE* out, Style style) : m_out(out), m_style(style) {}
  // Style::terminal when `out` is a TTY.
  static Style detect(std::FILE* out);

  void update(const Progress& progress);
  // Clears a half-drawn terminal line before other output.
  void clear();

  // The text of one update, without "\r" or newline: "concurrency 10: 12/20 requests, 834 tok/s, 0 failed".
  static std::string line(const Progress& progress);

private:
  std::FILE* m_out;
  Style m_style;
  bool m_line_open = false;
  double m_last_plain_s = -1;
  std::string m_last_phase;
};

} // namespace specctl::bench
