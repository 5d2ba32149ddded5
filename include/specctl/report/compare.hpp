#pragma once

// `specctl compare A B`: two runs of the same experiment (before and after an
// upgrade), variant by variant, by the report's rule (report::judge): after /
// before with a 95% interval where both runs repeated a measurement, and a
// verdict only outside that interval and outside the A/A noise either run
// measured; one sample a side gives a ratio and no verdict.

#include <specctl/report/report.hpp>
#include <specctl/report/variant_status.hpp>

#include <string>
#include <vector>

namespace specctl::report {

// tok/J after / before, where either run sampled GPU telemetry: judged by the
// same rule as tok/s, faster reading "better" (more tokens per joule).
struct EnergyChange {
  // Either side was sampled; all else is empty without.
  bool sampled = false;
  std::optional<Spread> before;
  std::optional<Spread> after;
  std::optional<Ratio> change;
  Verdict verdict = Verdict::not_measured;
  std::string why;
};

struct SingleStreamChange {
  std::string benchmark;
  std::optional<Spread> before;
  std::optional<Spread> after;
  std::optional<Ratio> change;
  Verdict verdict = Verdict::not_measured;
  std::string why;
  EnergyChange tok_per_j;
};

struct LevelChange {
  std::string benchmark;
  bool rate = false;
  double level = 0;
  // Output tok/s over each run's repeats of the level.
  std::optional<Spread> before_tok_s;
  std::optional<Spread> after_tok_s;
  // after / before output tok/s, with its 95% interval when both runs repeated the level.
  std::optional<Ratio> change;
  Verdict verdict = Verdict::not_measured;
  std::string why;
  std::optional<double> before_ttft_p99_ms;
  std::optional<double> after_ttft_p99_ms;
  EnergyChange tok_per_j;
};

struct VariantChange {
  std::string variant;
  // "not run" on a side that has no such variant.
  VariantStatus before_status = VariantStatus::not_run;
  VariantStatus after_status = VariantStatus::not_run;
  std::vector<SingleStreamChange> single_stream;
  std::vector<LevelChange> levels;
};

struct Comparison {
  std::string experiment;
  std::string before_dir;
  std::string after_dir;
  std::string before_started;
  std::string after_started;
  // Said when the two runs' experiment files differ (content hash).
  std::vector<std::string> notes;
  std::vector<VariantChange> variants;

  // A variant that was ok before and is not after, or is slower (or worse in tok/J) anywhere.
  bool regressed() const;
};

// Throws specctl::Error (bad_input) when the two folders hold different experiments.
Comparison compare_runs(const RunData& before, const RunData& after);

std::string compare_markdown(const Comparison& comparison);
std::string compare_csv(const Comparison& comparison);
std::string compare_json(const Comparison& comparison);
// A testcase per variant: failed when it regressed.
std::string compare_junit(const Comparison& comparison);
std::string render(const Comparison& comparison, std::string_view format);

} // namespace specctl::report
