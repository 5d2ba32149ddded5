#pragma once

// A report filled by hand with everything report.html draws: four variants
// (one failed, with its reason and log tail), a single-stream table with
// intervals, a concurrency table over 1, 10, 70 with a crossover, one over
// 1..256 with a missing level, a rate table, a command table and
// expectations, one of them missed. Fields are set one by one, so a field
// added to the model later does not break the sample.

#include <specctl/report/report.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace specctl::test {

namespace sample_detail {

using namespace specctl::report;

inline VariantRow variant(const std::string& name, const std::string& host, int attempt, std::optional<double> load_s,
                          std::optional<double> accept_length) {
  VariantRow row;
  row.name = name;
  row.status = VariantStatus::ok;
  row.host = host;
  row.attempt = attempt;
  row.load_s = load_s;
  row.duration_s = load_s ? std::optional<double>(*load_s + 300) : std::nullopt;
  row.accept_length = accept_length;
  return row;
}

inline SingleStreamRow single_row(const std::string& name, std::optional<Spread> tok_s, std::optional<Ratio> speedup,
                                  Verdict verdict, std::optional<double> accept_length, std::optional<double> ttft_ms,
                                  std::optional<double> tpot_ms) {
  SingleStreamRow row;
  row.variant = name;
  row.tok_s = tok_s;
  row.speedup = speedup;
  row.verdict = verdict;
  row.accept_length = accept_length;
  row.ttft_ms = ttft_ms;
  row.tpot_ms = tpot_ms;
  return row;
}

inline Spread spread(double mean, double stdev, int n) {
  Spread s;
  s.mean = mean;
  s.stdev = stdev;
  s.n = n;
  return s;
}

inline Ratio ratio(double value, double low, double high) {
  Ratio r;
  r.value = value;
  r.low = low;
  r.high = high;
  return r;
}

// Figures at one level, three repeats; p99 and the TPOT follow from the p50 so
// the sample stays short. A speedup gets a narrow interval and the verdict it implies.
inline LevelFigures figures(std::optional<double> tok_s, std::optional<double> speedup, double ttft, double tpot) {
  LevelFigures f;
  if (tok_s) {
    f.tok_s = spread(*tok_s, *tok_s * 0.01, 3);
    f.counts.requests = 30;
    f.counts.completed = 30;
    f.ttft_p50_ms = ttft;
    f.ttft_p99_ms = ttft * 2.6;
    f.tpot_p50_ms = tpot;
    f.tpot_p99_ms = tpot * 1.8;
  }
  if (speedup) {
    f.speedup = ratio(*speedup, *speedup - 0.02, *speedup + 0.02);
    f.verdict = *speedup > 1.02 ? Verdict::faster : *speedup < 0.98 ? Verdict::slower : Verdict::inconclusive;
  } else {
    f.verdict = Verdict::baseline;
  }
  return f;
}

// The runs of equal verdicts along the levels, as the report finds them.
inline LevelsRow levels_row(const std::string& name, std::vector<LevelFigures> levels,
                            std::optional<double> estimate = std::nullopt) {
  LevelsRow row;
  row.variant = name;
  row.levels = std::move(levels);
  for (std::size_t i = 0; i < row.levels.size(); ++i) {
    if (!row.levels[i].speedup) {
      continue;
    }
    auto& runs = row.crossover.runs;
    if (!runs.empty() && runs.back().verdict == row.levels[i].verdict) {
      runs.back().last = i;
    } else {
      runs.push_back({row.levels[i].verdict, i, i});
    }
  }
  row.crossover.estimate = estimate;
  return row;
}

inline LevelsTable levels_table(const std::string& benchmark, const std::string& spec, bool rate,
                                std::vector<double> levels) {
  LevelsTable table;
  table.benchmark = benchmark;
  table.spec = spec;
  table.rate = rate;
  table.levels = std::move(levels);
  table.repeats = 3;
  return table;
}

inline ExpectationRow expectation(const std::string& variant, const std::string& benchmark, const std::string& level,
                                  double expected, std::optional<double> measured, std::optional<double> delta_pct,
                                  double tolerance_pct, bool reproduced) {
  ExpectationRow row;
  row.variant = variant;
  row.benchmark = benchmark;
  row.level = level;
  row.metric = "output_tok_s";
  row.expected = expected;
  row.measured = measured;
  row.delta_pct = delta_pct;
  row.tolerance_pct = tolerance_pct;
  row.reproduced = reproduced;
  return row;
}

} // namespace sample_detail

inline report::Report sample_report() {
  using namespace sample_detail;
  Report r;
  r.experiment = "eagle3-sweep";
  r.description = "EAGLE-3 against the plain server at TP 1, with and without CUDA graphs.";
  r.started = "2025-01-15T10:42:07Z";
  r.specctl_version = "0.1.0";
  r.baseline = "baseline";

  VariantRow failed = variant("eagle3-tp2", "gpu-2", 1, std::nullopt, std::nullopt);
  failed.status = VariantStatus::failed;
  failed.reason = "server exited with code 1 before it was ready";
  failed.failed_phase = "load";
  failed.log_tail = "INFO loading weights\nERROR CUDA out of memory. Tried to allocate 2.00 GiB\nexit 1\n";
  failed.duration_s = 95.5;
  r.variants = {variant("baseline", "gpu-1", 1, 41.5, std::nullopt), variant("eagle3", "gpu-1", 1, 58.25, 3.12),
                variant("eagle3-no-graphs", "gpu-2", 2, 37.0, 3.05), failed};

  r.notes = {"eagle3-tp2 failed while loading: it has no figures.",
             "c70 of eagle3-no-graphs is missing: the benchmark timed out."};

  SingleStreamTable single;
  single.benchmark = "single";
  single.spec = "single_stream, 5 runs, 256 tokens out";
  single.rows = {
      single_row("baseline", spread(92.4, 1.1, 5), std::nullopt, Verdict::baseline, std::nullopt, 31.2, 10.82),
      single_row("eagle3", spread(187.9, 6.4, 5), ratio(2.03, 1.95, 2.11), Verdict::faster, 3.12, 35.8, 5.32),
      single_row("eagle3-no-graphs", spread(95.6, 3.9, 5), ratio(1.04, 0.98, 1.10), Verdict::inconclusive, 3.05, 44.0,
                 10.46),
      single_row("eagle3-tp2", std::nullopt, std::nullopt, Verdict::not_measured, std::nullopt, std::nullopt,
                 std::nullopt),
  };
  r.single_stream.push_back(single);

  LevelsTable parallel = levels_table("parallel", "concurrency 1, 10, 70", false, {1, 10, 70});
  parallel.rows = {
      levels_row("baseline", {figures(92.0, std::nullopt, 31, 10.8), figures(780.5, std::nullopt, 48, 12.7),
                              figures(3120.0, std::nullopt, 210, 22.4)}),
      levels_row("eagle3",
                 {figures(185.3, 2.01, 36, 5.4), figures(902.4, 1.16, 55, 11.0), figures(2650.8, 0.85, 260, 26.4)},
                 33.0),
      levels_row("eagle3-no-graphs", {figures(96.1, 1.04, 44, 10.4), figures(640.2, 0.82, 70, 15.6),
                                      figures(std::nullopt, std::nullopt, 0, 0)}),
      levels_row("eagle3-tp2", std::vector<LevelFigures>(3)),
  };
  r.levels.push_back(parallel);

  LevelsTable wide = levels_table("wide", "concurrency 1 to 256, doubling", false, {1, 2, 4, 8, 16, 32, 64, 128, 256});
  LevelsRow wide_base = levels_row("baseline", {});
  LevelsRow wide_eagle = levels_row("eagle3", {});
  for (std::size_t i = 0; i < wide.levels.size(); ++i) {
    const double level = wide.levels[i];
    const double base = 92 * level / (1 + level / 40);
    wide_base.levels.push_back(figures(base, std::nullopt, 30 + level, 10.8 + level / 20));
    // A hole at c16: the line breaks there rather than drawing through it.
    const auto eagle = level == 16 ? std::nullopt : std::optional<double>(base * (1.9 - 0.7 * i / 9.0));
    wide_eagle.levels.push_back(figures(eagle, eagle ? std::optional<double>(*eagle / base) : std::nullopt,
                                        34 + 1.1 * level, 5.4 + level / 18));
  }
  wide.rows = {wide_base, levels_row("eagle3", wide_eagle.levels)};
  r.levels.push_back(wide);

  LevelsTable rate = levels_table("poisson", "rates 0.5, 1, 2, 4/s", true, {0.5, 1, 2, 4});
  rate.rows = {
      levels_row("baseline", {figures(46, std::nullopt, 30, 10.9), figures(91, std::nullopt, 33, 11.2),
                              figures(180, std::nullopt, 41, 11.9), figures(350, std::nullopt, 66, 13.5)}),
      levels_row("eagle3", {figures(45, 0.98, 20, 5.5), figures(90, 0.99, 24, 5.9), figures(181, 1.01, 35, 6.8),
                            figures(349, 1.0, 71, 8.9)}),
  };
  r.levels.push_back(rate);

  CommandTable command;
  command.benchmark = "gsm8k";
  command.spec = "lm_eval --tasks gsm8k --limit 200";
  command.metrics = {"accuracy", "wall_s"};
  command.rows = {{"baseline", {0.8523, 412.5}},
                  {"eagle3", {0.851, 251.0}},
                  {"eagle3-no-graphs", {0.8515, std::nullopt}},
                  {"eagle3-tp2", {std::nullopt, std::nullopt}}};
  r.commands.push_back(command);

  r.expectations = {
      expectation("eagle3", "single", "", 180, 187.9, 4.39, 10, true),
      expectation("eagle3", "parallel", "c70", 3000, 2650.8, -11.64, 5, false),
      expectation("eagle3-tp2", "single", "", 200, std::nullopt, std::nullopt, 5, false),
  };
  return r;
}

} // namespace specctl::test
