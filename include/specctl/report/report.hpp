#pragma once

// The comparison report of one run: built from the result folder alone
// (run.json, experiment.json, variants/*/result.json), so `specctl report DIR`
// regenerates exactly what `specctl run` wrote, also for a partial or resumed
// run. The model below is what every format (Markdown, CSV, JSON, HTML, JUnit)
// renders; none of them computes a figure of its own.

#include <specctl/report/stats.hpp>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::report {

// Everything read back from a result folder.
struct RunData {
  std::filesystem::path dir;
  nlohmann::json run;        // run.json
  nlohmann::json experiment; // experiment.json (the resolved plan)
  // result.json of each variant that has one; a variant killed before writing it has none.
  std::map<std::string, nlohmann::json> results;
  // A variant whose result.json is there but cannot be read: what is wrong with it.
  std::map<std::string, std::string> damaged;
};

// Reads a result folder. Throws specctl::Error (bad_input) naming the file
// when run.json or experiment.json is missing or not JSON.
RunData read_run(const std::filesystem::path& dir);

struct ReportOptions {
  // Overrides the experiment's baseline.
  std::optional<std::string> baseline;
};

// What a comparison says about "is A faster than B".
enum class Verdict {
  faster,
  slower,
  // The 95% interval contains 1.0, or a single measurement moved less than the noise threshold.
  inconclusive,
  // No figure on one side (a failed variant, a missing benchmark).
  not_measured,
  // The row is the baseline itself.
  baseline,
};
std::string_view verdict_name(Verdict verdict);

// Without an interval (fewer than 2 runs on a side), a ratio further than
// this from 1.0 is called faster or slower; closer is inconclusive.
inline constexpr double k_noise_pct = 5.0;

// A ratio of means with its 95% confidence interval (absent for fewer than 2 runs on a side).
struct Ratio {
  double value = 0;
  std::optional<double> low;
  std::optional<double> high;
};

// a.mean / b.mean, with its 95% interval when both sides have 2 runs or more;
// nullopt when b's mean is not positive.
std::optional<Ratio> compare_spreads(const Spread& a, const Spread& b);

// Faster / slower / inconclusive from a ratio (higher is better).
Verdict verdict_of(const Ratio& ratio);

struct VariantRow {
  std::string name;
  // ok, failed, interrupted, or "not run" (no result.json).
  std::string status;
  // Why it is not ok: the failure's message, or "never started".
  std::string reason;
  std::string failed_phase;
  // The last lines of the server's log when it failed.
  std::string log_tail;
  std::string host;
  int attempt = 0;
  std::optional<double> load_s;
  // The variant's phases end to end, connect to teardown.
  std::optional<double> duration_s;
  // Mean accept length the server reported over all benchmarks (EAGLE variants).
  std::optional<double> accept_length;
  // What the run found doubtful about its figures: speculation that did
  // nothing, a GPU slot that shared its host with other variants.
  std::vector<std::string> flags;
};

struct SingleStreamRow {
  std::string variant;
  std::optional<Spread> tok_s;
  // Against the baseline's runs; absent for the baseline and for rows without figures.
  std::optional<Ratio> speedup;
  Verdict verdict = Verdict::not_measured;
  std::optional<double> accept_length;
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
};

struct SingleStreamTable {
  std::string benchmark;
  std::string spec;
  std::vector<SingleStreamRow> rows;
};

// One variant at one concurrency level (or request rate).
struct LevelFigures {
  std::optional<double> tok_s;
  std::optional<double> speedup;
  std::optional<double> ttft_p50_ms;
  std::optional<double> ttft_p99_ms;
  std::optional<double> tpot_p50_ms;
  std::optional<double> tpot_p99_ms;
  std::optional<double> accept_length;
};

// Where a variant stops beating the baseline as load grows.
struct Crossover {
  enum class Kind {
    // The baseline's own row, or no baseline figures to compare with.
    none,
    // Faster at every level measured.
    always_faster,
    // Never faster, from the lowest level on.
    never_faster,
    // Faster up to `last_faster`, not from `first_not_faster` on.
    crosses,
    // Not faster at the lowest level, faster at some higher one.
    mixed,
  };
  Kind kind = Kind::none;
  std::optional<double> last_faster;
  std::optional<double> first_not_faster;
  // Where the speedup crosses 1.0, interpolated linearly in log(level)
  // between the two levels; an estimate, not a measurement.
  std::optional<double> estimate;
};

struct LevelsRow {
  std::string variant;
  // One per entry of LevelsTable::levels.
  std::vector<LevelFigures> levels;
  Crossover crossover;
};

// A concurrency (or rate) benchmark: variants as rows, levels as columns.
struct LevelsTable {
  std::string benchmark;
  std::string spec;
  // Request rates (per second) rather than concurrency levels.
  bool rate = false;
  // Ascending: concurrency levels, or rates.
  std::vector<double> levels;
  std::vector<LevelsRow> rows;

  // "c10" or "2/s".
  std::string label(std::size_t i) const;
};

// A command benchmark: the metrics its output gave, per variant.
struct CommandTable {
  std::string benchmark;
  std::string spec;
  std::vector<std::string> metrics;
  // variant → one value per metric.
  std::vector<std::pair<std::string, std::vector<std::optional<double>>>> rows;
};

struct ExpectationRow {
  std::string variant;
  std::string benchmark;
  // "c10", "2/s", or empty.
  std::string level;
  std::string metric;
  double expected = 0;
  std::optional<double> measured;
  std::optional<double> delta_pct;
  double tolerance_pct = 0;
  bool reproduced = false;
};

// "baseline single-stream output_tok_s: 925.7 vs 926 expected (-0.0%, within 10%)".
std::string expectation_text(const ExpectationRow& row);

struct Report {
  std::string experiment;
  std::string description;
  // When the run started (run.json), so regenerating gives the same bytes.
  std::string started;
  std::string specctl_version;
  // Empty when the experiment has none, or the named one is not a variant.
  std::string baseline;
  std::vector<VariantRow> variants;
  std::vector<SingleStreamTable> single_stream;
  std::vector<LevelsTable> levels;
  std::vector<CommandTable> commands;
  std::vector<ExpectationRow> expectations;
  // Things a reader must know to trust the tables ("the baseline failed: no speedups").
  std::vector<std::string> notes;

  // Every variant ok and every expectation reproduced: what the exit code says.
  bool passed() const;
};

Report build_report(const RunData& data, const ReportOptions& options = {});

std::string to_markdown(const Report& report);
// One tidy table: a row per (variant, benchmark, level, metric), and one per expectation.
std::string to_csv(const Report& report);
std::string to_json(const Report& report);
// One self-contained page: tables and inline SVG plots, no script, no network.
std::string to_html(const Report& report);
// A testcase per variant and per expectation.
std::string to_junit(const Report& report);

// The file a format is written to inside a result folder: report.md, report.csv,
// report.json, report.html, junit.xml.
std::string file_name(std::string_view format);
std::string render(const Report& report, std::string_view format);

// Writes each format's file into dir atomically; returns the paths written.
std::vector<std::filesystem::path> write_reports(const Report& report, const std::filesystem::path& dir,
                                                 const std::vector<std::string>& formats);

} // namespace specctl::report
