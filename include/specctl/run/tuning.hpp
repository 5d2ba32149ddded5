#pragma once

// `specctl tune` (issue #19): the search of tune/search.hpp driven by real
// launches. Each trial is an ordinary variant of the tuning file's grid, run by
// run_experiment into one result folder; what has been measured is read back from
// that folder before every step, so a killed tuning resumes, and trials of earlier
// runs of the same server (--from) are reused, without launching a trial twice.

#include <specctl/experiment/experiment.hpp>
#include <specctl/report/variant_status.hpp>
#include <specctl/run/runner.hpp>
#include <specctl/tune/search.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace specctl::run {

// One load point of one trial, as measured: the objective's samples (one per
// repeat), and the SLO metrics that were over their bound ("ttft_p99_ms 2310 > 2000").
// A rate load that bisects (`bisect:`) has one more point, "max rate": the highest
// rate that met the SLO (its one sample) and the lowest above it that missed.
struct TrialPoint {
  std::vector<double> samples;
  std::vector<std::string> slo_missed;
  // The max rate point's: the true highest rate lies in [samples[0], missed_at), so the
  // figure's half-width is the gap (both sides: intervals are compared as symmetric).
  std::optional<double> missed_at;
  tune::Figure figure() const;
};

// A trial read from its result.json: nullopt when it has no answer yet (missing,
// interrupted); a failed trial has no samples and meets no SLO, so it never wins.
struct Trial {
  tune::Config config;
  std::string variant;
  report::VariantStatus status = report::VariantStatus::failed;
  double duration_s = 0;
  std::vector<TrialPoint> points;
};
std::optional<Trial> read_trial(const nlohmann::json& result, const experiment::Experiment& experiment,
                                const tune::Config& config);
// The trials as the search sees them: each configuration's figure per load point.
tune::Measured measured_of(const std::vector<Trial>& trials);

// The load points of a tuning: "c1", "c10" or "r2", and "max rate" last where a rate load bisects.
inline constexpr std::string_view k_max_rate_point = "max rate";
std::vector<std::string> load_points(const experiment::Experiment& experiment);
tune::Options search_options(const experiment::Experiment& experiment);

// The answer at one load point.
struct PointVerdict {
  std::string point;
  std::optional<Trial> best;
  std::optional<Trial> runner_up;
  bool tie = false;
  // best / the best configuration of the other kind (speculative or not): a ratio
  // with its 95% interval, and which configuration it is taken against.
  std::optional<double> ratio, low, high;
  std::string against;
};

struct TuneAnswer {
  std::vector<PointVerdict> points;
  // "c ≤ 5: eagle3 ...; c ≥ 10: no speculation (2.1x ... at c70)".
  std::string recommendation;
  // "speculation stops paying above c5" (or that it pays everywhere or nowhere); empty without a speculation knob.
  std::string crossover;
  // Trials measured, and the grid's size.
  int trials = 0;
  int grid = 0;
  std::string why_stopped;
};
TuneAnswer make_answer(const experiment::Experiment& experiment, const std::vector<Trial>& trials,
                       const std::string& why_stopped);
std::string answer_markdown(const experiment::Experiment& experiment, const TuneAnswer& answer);
nlohmann::json answer_json(const experiment::Experiment& experiment, const TuneAnswer& answer);
// tuned.yaml: the tuning file as an ordinary experiment whose variants are the
// winners and the start configuration (the baseline), to confirm with `specctl run`.
std::string tuned_yaml(const experiment::Experiment& experiment, const TuneAnswer& answer);

struct TuneOptions {
  // out_dir, resume, force, retries, render, state_dir, stop, history_dir as for `run`.
  RunOptions run;
  // Earlier result folders whose trials are reused where the launch command and benchmarks match.
  std::vector<std::filesystem::path> from;
};

struct TuneOutcome {
  std::filesystem::path dir;
  // Trials launched by this invocation, taken from --from folders, and kept from the folder (--resume).
  int launched = 0;
  int reused = 0;
  int kept = 0;
  bool interrupted = false;
  std::optional<std::string> write_error;
  TuneAnswer answer;
  std::string summary;

  // 0 answered, 1 no load point has a configuration meeting the SLO (or the start
  // failed) or a file could not be written, 130 interrupted.
  int exit_code() const;
};

// Throws specctl::Error (bad_input) for a file that is not a tuning, or a folder that cannot be used.
TuneOutcome tune_experiment(const experiment::Experiment& experiment, const TuneOptions& options, Display& display);

} // namespace specctl::run
