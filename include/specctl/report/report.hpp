#pragma once

// The comparison report of one run: built from the result folder alone
// (run.json, experiment.json, variants/*/result.json), so `specctl report DIR`
// regenerates exactly what `specctl run` wrote, also for a partial or resumed
// run. The model below is what every format (Markdown, CSV, JSON, HTML, JUnit)
// renders; none of them computes a figure of its own.

#include <specctl/report/results.hpp>
#include <specctl/report/slo.hpp>
#include <specctl/report/stats.hpp>
#include <specctl/report/variant_status.hpp>

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
  // tune.json, the answer of `specctl tune`, when the folder is a tuning; else null.
  nlohmann::json tune;
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
  // The 95% interval contains 1.0, or the difference is within the A/A noise.
  inconclusive,
  // A side has one sample: a ratio without an interval, so no verdict.
  one_sample,
  // No figure on one side (a failed variant, a missing benchmark), or too many
  // of its requests failed.
  not_measured,
  // The row is the baseline itself.
  baseline,
  // The row is the baseline measured again (report: {noise: true}, repeat_of).
  repeat,
};
// "faster", "slower", "inconclusive", "one sample", "not measured", "baseline", "A/A".
std::string_view verdict_name(Verdict verdict);

// A ratio of means with its 95% confidence interval (absent for fewer than 2 samples on a side).
struct Ratio {
  double value = 0;
  std::optional<double> low;
  std::optional<double> high;
};

// a.mean / b.mean, with its 95% interval when both sides have 2 samples or more;
// nullopt when b's mean is not positive.
std::optional<Ratio> compare_spreads(const Spread& a, const Spread& b);

// A ratio and what it says.
struct Judgement {
  std::optional<Ratio> ratio;
  Verdict verdict = Verdict::not_measured;
  // Why a verdict is not faster or slower, for people: "one sample a side",
  // "within the A/A noise (±3.1%)", "18 of 20 requests failed (90%, more than 5%)".
  std::string why;
};

// The one rule of every comparison (report rows, levels, `specctl compare`),
// higher is better: with 2+ samples a side, faster or slower when the 95%
// interval of a / b excludes 1.0 and the difference exceeds `noise` (a relative
// A/A difference, 0.031 for 3.1%) when one was measured; inconclusive otherwise.
// With one sample on a side: the ratio, and no verdict (one_sample).
Judgement judge(const std::optional<Spread>& a, const std::optional<Spread>& b, std::optional<double> noise = {});

// Where a figure came from, as the result says it.
struct Sources {
  // Accept length: "server log lines", "/metrics delta", "response timings", ...; empty when none.
  std::string accept_length;
  // Token counts: "usage", "chunks" (a lower bound), "mixed"; empty when unknown.
  std::string tokens;
};

// The model load's peak memory per GPU, from result.json's telemetry.load.
struct LoadMemory {
  // nvidia-smi's indices, or positions 0.. where the result does not name them.
  std::vector<int> gpus;
  // One per GPU, in `gpus` order.
  std::vector<double> peak_mib;
  // The fullest GPU's memory; absent when nvidia-smi did not say.
  std::optional<double> total_mib;
  int samples = 0;
};

// A variant's GPU telemetry as a whole (result.json's top-level telemetry and its levels').
struct VariantTelemetry {
  std::optional<LoadMemory> load;
  // What could not be sampled ("host gpu1: nvidia-smi not found: no GPU telemetry").
  std::vector<std::string> warnings;
  // Where its energy figures came from: "counter", "integrated power", or both
  // joined by " and "; empty when no level has one.
  std::string energy_source;
  // Its levels throttled for more than 5% of their time, as its flags say them.
  std::vector<std::string> throttled;
};

struct VariantRow {
  std::string name;
  // As its result.json says (the run failed a variant with a benchmark beyond
  // the failure share when it wrote it), or not run (no result.json) or damaged.
  VariantStatus status = VariantStatus::not_run;
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
  // Mean accept length the server reported: the first benchmark of the
  // experiment's order that has one (the same figure in every format).
  std::optional<double> accept_length;
  // The variant repeats this one (A/A noise); empty for others.
  std::string repeat_of;
  // What the run found doubtful about its figures: speculation that did
  // nothing, a GPU slot that shared its host with other variants, failed
  // requests, prompts served from the prefix cache, a level throttled by its GPUs.
  std::vector<std::string> flags;
  // Absent when the variant's result says nothing of GPU telemetry.
  std::optional<VariantTelemetry> telemetry;
};

// A repeat of a level (or a single-stream benchmark) during which the GPUs held a
// clock-event reason for more than 5% of the time: (reason, share of the time).
struct ThrottledRepeat {
  int repeat = 1;
  std::vector<std::pair<std::string, double>> reasons;
};

// A level's (or single-stream benchmark's) GPU figures from its telemetry, over
// its repeats, and its tok/J against the baseline's by the rule of judge(), where
// faster reads "better" (more tokens per joule) and slower "worse".
struct EnergyFigures {
  // Some repeat was sampled; every other field is empty without.
  bool sampled = false;
  // Output tokens / joules of all the variant's GPUs, one sample per repeat.
  std::optional<Spread> tok_per_j;
  std::optional<Ratio> ratio;
  Verdict verdict = Verdict::not_measured;
  std::string why;
  // The GPUs' summed mean power (W) and energy (J), means over the repeats.
  std::optional<double> power_w;
  std::optional<double> energy_j;
  std::vector<ThrottledRepeat> throttled;
};

struct SingleStreamRow {
  std::string variant;
  // Over the successful runs.
  std::optional<Spread> tok_s;
  // Against the baseline's runs; absent for the baseline and for rows without figures.
  std::optional<Ratio> speedup;
  Verdict verdict = Verdict::not_measured;
  std::string why;
  // Why this variant's own figures get no verdict (too many failed requests, the
  // benchmark did not finish); empty when they may.
  std::string refused;
  Counts counts;
  std::optional<double> accept_length;
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  Sources sources;
  EnergyFigures energy;
};

struct SingleStreamTable {
  std::string benchmark;
  std::string spec;
  std::vector<SingleStreamRow> rows;
};

// One variant at one concurrency level (or request rate), over its repeats.
struct LevelFigures {
  // Output tok/s, one sample per repeat.
  std::optional<Spread> tok_s;
  // Against the baseline at the same level.
  std::optional<Ratio> speedup;
  Verdict verdict = Verdict::not_measured;
  std::string why;
  // As SingleStreamRow::refused.
  std::string refused;
  // Summed over the repeats.
  Counts counts;
  // Means over the repeats.
  std::optional<double> ttft_p50_ms;
  std::optional<double> ttft_p99_ms;
  std::optional<double> tpot_p50_ms;
  std::optional<double> tpot_p99_ms;
  std::optional<double> accept_length;
  // With an SLO (LevelsTable::slo): the requests that met it per second, the mean
  // over the repeats, and whether the level met it (slo_missed over the repeats).
  std::optional<double> goodput_rps;
  std::optional<bool> slo_met;
  Sources sources;
  EnergyFigures energy;
};

// A variant's search for the highest request rate that meets the SLO (a rate
// benchmark's `bisect:`), as its result.json's slo_search says it.
struct SloSearchFigures {
  std::optional<double> max_rate;
  std::optional<double> missed_at;
  // Rates judged: the listed ones and those bisected.
  int steps = 0;
  std::string why;
};

// Where a variant stops beating the baseline as load grows, from the verdicts
// of its levels: "faster up to c5, inconclusive at c10, slower from c30".
struct Crossover {
  // Consecutive levels with the same verdict, lowest first.
  struct Run {
    Verdict verdict = Verdict::not_measured;
    std::size_t first = 0;
    std::size_t last = 0;
  };
  std::vector<Run> runs;
  // Faster at the lowest levels and slower at a higher one: where the speedup
  // crosses 1.0, interpolated linearly in log(level) between the last faster
  // and the first slower level; an estimate, not a measurement.
  std::optional<double> estimate;
};

// The runs of verdicts of a row's levels, and the estimate where it crosses 1.0.
struct LevelsTable;
struct LevelsRow;
Crossover crossover_of(const LevelsTable& table, const LevelsRow& row);

struct LevelsRow {
  std::string variant;
  // One per entry of LevelsTable::levels.
  std::vector<LevelFigures> levels;
  // Empty for the baseline's row, and for rows with nothing measured.
  Crossover crossover;
  // With `bisect:`, when the variant searched.
  std::optional<SloSearchFigures> search;
};

// A concurrency (or rate) benchmark: variants as rows, levels as columns.
struct LevelsTable {
  std::string benchmark;
  std::string spec;
  // Request rates (per second) rather than concurrency levels.
  bool rate = false;
  // Ascending: concurrency levels, or rates.
  std::vector<double> levels;
  // Repeats per level the experiment asked for (1 when it did not say).
  int repeats = 1;
  // The benchmark's `slo:` (empty without one) and `bisect:` (0 without). The rates
  // a search bisected are each variant's own: they are not columns of the table.
  Slo slo;
  int bisect = 0;
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

// One workload category (code, math, ...) of one variant at one benchmark
// (and level): the figures its requests gave, over the level's repeats.
struct CategoryFigures {
  // Summed over the repeats.
  Counts counts;
  // Output tokens / end-to-end seconds of each completed request, averaged: a
  // per-request figure (as single-stream tok/s), not a level's throughput.
  // Over repeats, the mean of the repeats that have it.
  std::optional<double> tok_s;
  // The server's accept length for the category's requests; the mean of the
  // repeats that have one; absent when the server gave none per category.
  std::optional<double> accept_length;
};

struct CategoryRow {
  std::string variant;
  // One per CategoryTable::categories; nullopt where the variant has no figures
  // for the category (no per-category results, a failed or missing variant).
  std::vector<std::optional<CategoryFigures>> categories;
  // Where its accept lengths came from, in Sources::accept_length's words; empty without any.
  std::string accept_length_source;
};

// A benchmark's figures per workload category, at one level: categories as
// rows, variants as columns. Built only where some variant has them, because
// the workload's prompts had categories.
struct CategoryTable {
  std::string benchmark;
  // The benchmark's kind: "single_stream", "concurrency" or "rate".
  std::string kind;
  // "c10", "2/s", or empty for single stream.
  std::string level;
  // Repeats per level the experiment asked for (1 when it did not say, and for single stream).
  int repeats = 1;
  // In the workload's order.
  std::vector<std::string> categories;
  // Every variant of the run, in its order.
  std::vector<CategoryRow> rows;
};

// Counts in equal bins: bin k covers [lo + k * width, lo + (k + 1) * width) tokens.
struct LengthHistogram {
  double lo = 0;
  double width = 1;
  std::vector<int> counts;
  // The counts summed: the requests behind the histogram.
  int requests = 0;

  bool operator==(const LengthHistogram&) const = default;
};

// The prompt and output lengths of a benchmark's completed requests (all levels
// and repeats). Variants run the same seeded workload, so one variant's
// histograms stand for all: the baseline's, or else the first variant's that has them.
struct LengthHistograms {
  std::string benchmark;
  // Whose histograms these are.
  std::string variant;
  // Prompt tokens as the server counted them.
  std::optional<LengthHistogram> input_tokens;
  // Output tokens served.
  std::optional<LengthHistogram> output_tokens;
  // The other variants that have histograms: the same as these, and not (a
  // workload that changed between them), so the page can say how far they stand for all.
  std::vector<std::string> same;
  std::vector<std::string> differing;
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

// The baseline against its repeat (A/A), one metric of one benchmark (and level).
struct NoiseRow {
  std::string benchmark;
  // "c10", "2/s", or empty for single stream.
  std::string level;
  // "output_tok_s", "ttft_p50_ms", ...
  std::string metric;
  std::optional<double> first;
  std::optional<double> again;
  // (again - first) / first, in percent.
  std::optional<double> difference_pct;
};

// One trial at one load point, on the two axes a serving choice trades: the total
// output tok/s of the server and the tok/s one user sees (1000 / median TPOT).
struct ParetoPoint {
  std::string variant;
  std::string point;
  double total_tok_s = 0;
  double per_user_tok_s = 0;
};

// A tuning's answer (tune.json) with each trial's curve over the load points and the
// Pareto front: the points no other trial's beats on both axes.
struct TuningSection {
  std::string recommendation;
  std::string crossover;
  std::string stopped;
  std::string load;
  int trials = 0;
  int grid = 0;
  std::vector<std::pair<std::string, std::vector<ParetoPoint>>> curves;
  std::vector<ParetoPoint> front;
};

// One sampling window of telemetry.csv: a benchmark's level and repeat, or the load.
struct PowerWindow {
  // Empty for the load.
  std::string benchmark;
  // As telemetry.csv says it: "load", "single", "c10", "r2.5".
  std::string level;
  int repeat = 1;
  // (seconds since the variant's first sample, watts summed over its GPUs), a
  // point per sample, or per run of samples averaged when a run has very many.
  std::vector<std::pair<double, double>> points;
};

// A variant's summed GPU power over time, read from its telemetry.csv.
struct PowerTrace {
  std::string variant;
  int gpus = 0;
  // The GPUs' summed power limit, the largest sampled.
  std::optional<double> limit_w;
  // In the order sampled; a new window wherever benchmark, level or repeat changes.
  std::vector<PowerWindow> windows;
  // Rows that could not be read ("telemetry.csv:7: no power_w"); the rest is drawn.
  std::vector<std::string> problems;
};

struct Report {
  std::string experiment;
  std::string description;
  // When the run started (run.json), so regenerating gives the same bytes.
  std::string started;
  std::string specctl_version;
  // Empty when the experiment has none, or the named one is not a variant.
  std::string baseline;
  // The variant that measured the baseline again, for the A/A noise; empty without one.
  std::string repeat;
  // A benchmark with a larger share of failed requests is not measured.
  double max_failed_pct = 5;
  std::vector<VariantRow> variants;
  std::vector<SingleStreamTable> single_stream;
  std::vector<LevelsTable> levels;
  std::vector<CommandTable> commands;
  // Per benchmark in the experiment's order, and per level within a levels benchmark.
  std::vector<CategoryTable> categories;
  // Per benchmark that ran built-in requests, in the experiment's order.
  std::vector<LengthHistograms> lengths;
  std::vector<ExpectationRow> expectations;
  std::vector<NoiseRow> noise;
  // Things a reader must know to trust the tables ("the baseline failed: no speedups").
  std::vector<std::string> notes;
  std::optional<TuningSection> tuning;
  // Per variant with a telemetry.csv, in the run's order.
  std::vector<PowerTrace> power;

  const VariantRow* find_variant(const std::string& name) const;
  // Every variant ok and every expectation reproduced: what the exit code says.
  bool passed() const;
  // Some variant's result says something of GPU telemetry: only then do the formats
  // add their telemetry columns and sections, so other reports keep their bytes.
  bool has_telemetry() const;
};

Report build_report(const RunData& data, const ReportOptions& options = {});

std::string to_markdown(const Report& report);
// One tidy table: a row per (variant, benchmark, level, metric), and one per expectation.
std::string to_csv(const Report& report);
std::string to_json(const Report& report);
// The run's table for the terminal: a row per variant, its status and main
// figures (load time, tok/s per benchmark and level, accept length), then why
// variants failed and what was flagged. Cells are the model's, as report.md has them.
std::string to_terminal(const Report& report);
// One variant's main figures as (column, cell), the cells of its to_terminal row.
std::vector<std::pair<std::string, std::string>> terminal_figures(const Report& report, const std::string& variant);
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
