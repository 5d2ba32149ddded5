#include <specctl/report/report.hpp>

#include "build_parts.hpp"
#include "cells.hpp"
#include "json_fields.hpp"
#include "noise.hpp"
#include "tuning.hpp"
#include "workload.hpp"

#include <specctl/bench/stats.hpp>
#include <specctl/experiment/experiment.hpp>
#include <specctl/report/results.hpp>
#include <specctl/report/stats.hpp>
#include <specctl/util/error.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>
#include <specctl/util/duration.hpp>

namespace specctl::report {

namespace {

using json = nlohmann::json;
using detail::json_number;
using detail::json_text;

// The array at j[k1][k2]..., or an empty one.
const json& array_at(const json& j, std::initializer_list<std::string_view> keys) {
  static const json k_empty = json::array();
  const json& at = dig(j, keys);
  return at.is_array() ? at : k_empty;
}

// The benchmarks in the experiment's order, with their kind; an experiment.json
// written before kinds were recorded gets them from the results.
struct BenchmarkInfo {
  std::string name;
  std::string kind;
  std::string spec;
  std::vector<double> levels;
  int repeats = 1;
  Slo slo;
  int bisect = 0;
};

std::vector<BenchmarkInfo> benchmarks_of(const RunData& data) {
  std::vector<BenchmarkInfo> out;
  for (const auto& b : array_at(data.experiment, {"benchmarks"})) {
    BenchmarkInfo info{
        json_text(dig(b, {"name"})), json_text(dig(b, {"kind"})), json_text(dig(b, {"description"})), {}, 1, {}, 0};
    for (const auto& key : {"levels", "rates"}) {
      for (const auto& level : array_at(b, {key})) {
        if (auto v = json_number(level)) {
          info.levels.push_back(*v);
        }
      }
    }
    info.repeats = static_cast<int>(json_number(dig(b, {"repeats"})).value_or(1));
    if (const auto& slo = dig(b, {"slo"}); slo.is_object()) {
      for (const auto& [metric, bound] : slo.items()) {
        if (auto v = json_number(bound)) {
          info.slo.emplace_back(metric, *v);
        }
      }
    }
    info.bisect = static_cast<int>(json_number(dig(b, {"bisect"})).value_or(0));
    for (const auto& [variant, result] : data.results) {
      if (info.kind.empty()) {
        info.kind = json_text(dig(result, {"benchmarks", info.name, "kind"}));
      }
    }
    if (!info.name.empty()) {
      out.push_back(std::move(info));
    }
  }
  return out;
}

std::vector<double> run_figures(const json& benchmark) {
  std::vector<double> out;
  for (const auto& run : array_at(benchmark, {"result", "runs"})) {
    if (dig(run, {"ok"}) == true) {
      if (auto v = json_number(dig(run, {"tok_s"}))) {
        out.push_back(*v);
      }
    }
  }
  return out;
}

Sources sources_of(const json& holder, const json& result) {
  Sources out;
  out.accept_length = detail::accept_source_text(holder);
  out.tokens = json_text(dig(holder, {"metrics", "token_source"}), json_text(dig(result, {"token_source"})));
  return out;
}

// Verdicts are refused for a variant's whole benchmark when it failed (the
// server died in it) or too many of its requests failed: why, or empty.
std::string unjudgeable(const json& entry, const Counts& counts, double max_failed_pct) {
  if (auto why = too_many_failed(counts.requests, counts.failed, max_failed_pct)) {
    return *why;
  }
  if (status_of(entry) != VariantStatus::ok) {
    return "the benchmark did not finish";
  }
  return "";
}

// Judges a row against the baseline's, with what refuses a verdict on either side.
Judgement judged(const std::optional<Spread>& a, const std::optional<Spread>& b, const std::string& own_refusal,
                 const std::string& base_refusal, std::optional<double> noise) {
  if (!own_refusal.empty()) {
    return {std::nullopt, Verdict::not_measured, own_refusal};
  }
  if (!base_refusal.empty()) {
    return {std::nullopt, Verdict::not_measured, "the baseline: " + base_refusal};
  }
  return judge(a, b, noise);
}

struct SingleFigures {
  SingleStreamRow row;
  std::string refusal;
};

SingleFigures single_figures(const RunData& data, const std::string& name, const BenchmarkInfo& info,
                             double max_failed_pct) {
  SingleFigures out;
  out.row.variant = name;
  const json* b = detail::benchmark_entry(data, name, info.name);
  if (b == nullptr) {
    out.refusal = "not measured";
    return out;
  }
  const auto& m = dig(*b, {"metrics"});
  auto& row = out.row;
  auto runs = run_figures(*b);
  if (!runs.empty()) {
    row.tok_s = spread_of(runs);
  } else if (auto mean = json_number(dig(m, {"output_tok_s"}))) {
    row.tok_s = Spread{*mean, json_number(dig(m, {"output_tok_s_stdev"})).value_or(0), 1};
  }
  row.counts = counts_of(*b);
  row.accept_length = json_number(dig(m, {"accept_length"}));
  row.ttft_ms = json_number(dig(m, {"ttft_ms"}));
  row.tpot_ms = json_number(dig(m, {"tpot_ms"}));
  row.sources = sources_of(*b, dig(*b, {"result", "level"}));
  out.refusal = unjudgeable(*b, row.counts, max_failed_pct);
  if (!row.tok_s && out.refusal.empty()) {
    out.refusal = "no run completed";
  }
  return out;
}

SingleStreamTable single_stream_table(const RunData& data, const BenchmarkInfo& info,
                                      const std::vector<std::string>& variants, const std::string& baseline,
                                      const std::string& repeat, double max_failed_pct) {
  SingleStreamTable table{info.name, info.spec, {}};
  std::map<std::string, SingleFigures> figures;
  for (const auto& name : variants) {
    figures[name] = single_figures(data, name, info, max_failed_pct);
  }
  const SingleFigures* base = baseline.empty() ? nullptr : &figures[baseline];
  std::optional<double> noise;
  if (base != nullptr && !repeat.empty()) {
    const auto& again = figures[repeat];
    auto aa = judged(again.row.tok_s, base->row.tok_s, again.refusal, base->refusal, std::nullopt);
    if (aa.ratio) {
      noise = std::abs(aa.ratio->value - 1.0);
    }
  }
  for (const auto& name : variants) {
    auto [row, refusal] = figures[name];
    row.refused = refusal == "not measured" ? "" : refusal;
    if (name == baseline) {
      row.verdict = Verdict::baseline;
      row.why = refusal;
    } else if (base != nullptr) {
      auto j = judged(row.tok_s, base->row.tok_s, refusal, base->refusal, name == repeat ? std::nullopt : noise);
      row.speedup = j.ratio;
      row.verdict = name == repeat ? Verdict::repeat : j.verdict;
      row.why = name == repeat && j.verdict != Verdict::not_measured ? "" : j.why;
    } else {
      row.why = refusal;
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

// Where the verdicts change along the levels.
struct LevelSet {
  std::vector<LevelFigures> levels;
  // Why the benchmark's verdicts are refused for this variant; empty when they are not.
  std::string refusal;
};

LevelsTable levels_table(const RunData& data, const BenchmarkInfo& info, const std::vector<std::string>& variants,
                         const std::string& baseline, const std::string& repeat, double max_failed_pct) {
  LevelsTable table;
  table.benchmark = info.name;
  table.spec = info.spec;
  table.rate = info.kind == "rate";
  table.repeats = info.repeats;
  table.slo = info.slo;
  table.bisect = info.bisect;
  const char* key = table.rate ? "rate" : "concurrency";
  // The rates an SLO search bisected are each variant's own, not columns to compare.
  const auto searched = [](const json& level) { return dig(level, {"search"}) == true; };
  std::set<double> levels(info.levels.begin(), info.levels.end());
  for (const auto& name : variants) {
    if (const json* b = detail::benchmark_entry(data, name, info.name)) {
      for (const auto& level : array_at(*b, {"levels"})) {
        if (auto v = json_number(dig(level, {key})); v && !searched(level)) {
          levels.insert(*v);
        }
      }
    }
  }
  table.levels.assign(levels.begin(), levels.end());
  auto figures_of = [&](const std::string& name) {
    LevelSet out;
    out.levels.resize(table.levels.size());
    const json* b = detail::benchmark_entry(data, name, info.name);
    if (b == nullptr) {
      out.refusal = "not measured";
      return out;
    }
    // Every measurement of a level (one per repeat), in the order they ran.
    std::vector<std::vector<const json*>> samples(table.levels.size());
    for (const auto& level : array_at(*b, {"levels"})) {
      auto v = searched(level) ? std::nullopt : json_number(dig(level, {key}));
      auto at = v ? std::find(table.levels.begin(), table.levels.end(), *v) : table.levels.end();
      if (at != table.levels.end()) {
        samples[static_cast<std::size_t>(at - table.levels.begin())].push_back(&level);
      }
    }
    Counts total;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      auto& f = out.levels[i];
      std::vector<double> tok_s;
      std::map<std::string, std::vector<double>> latency;
      std::vector<double> accept;
      std::vector<double> goodput;
      std::vector<const json*> metrics;
      for (const json* level : samples[i]) {
        const auto& m = dig(*level, {"metrics"});
        const auto& r = dig(*level, {"result"});
        metrics.push_back(&m);
        if (auto v = json_number(dig(m, {"goodput_rps"}))) {
          goodput.push_back(*v);
        }
        f.counts += counts_of(*level);
        if (auto v = json_number(dig(m, {"output_tok_s"}))) {
          tok_s.push_back(*v);
        }
        for (const char* metric : {"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"}) {
          if (auto v = json_number(dig(m, {metric}))) {
            latency[metric].push_back(*v);
          }
        }
        if (auto v = json_number(dig(m, {"accept_length"}))) {
          accept.push_back(*v);
        }
        if (f.sources.accept_length.empty() && f.sources.tokens.empty()) {
          f.sources = sources_of(*level, r);
        }
      }
      if (!tok_s.empty()) {
        f.tok_s = spread_of(tok_s);
      }
      auto mean_at = [&](const char* metric) -> std::optional<double> {
        auto it = latency.find(metric);
        return it == latency.end() ? std::nullopt : std::optional(bench::mean(it->second));
      };
      f.ttft_p50_ms = mean_at("ttft_p50_ms");
      f.ttft_p99_ms = mean_at("ttft_p99_ms");
      f.tpot_p50_ms = mean_at("tpot_p50_ms");
      f.tpot_p99_ms = mean_at("tpot_p99_ms");
      if (!accept.empty()) {
        f.accept_length = bench::mean(accept);
      }
      if (!goodput.empty()) {
        f.goodput_rps = bench::mean(goodput);
      }
      if (!table.slo.empty() && !metrics.empty()) {
        // The runner's rule, on the mean over the repeats, as its SLO search judges a rate.
        f.slo_met = slo_missed(metrics, table.slo, max_failed_pct).empty();
      }
      total += f.counts;
    }
    out.refusal = unjudgeable(*b, total, max_failed_pct);
    return out;
  };
  std::map<std::string, LevelSet> sets;
  for (const auto& name : variants) {
    sets[name] = figures_of(name);
  }
  const LevelSet* base = baseline.empty() ? nullptr : &sets[baseline];
  std::vector<std::optional<double>> noise(table.levels.size());
  if (base != nullptr && !repeat.empty()) {
    const auto& again = sets[repeat];
    for (std::size_t i = 0; i < table.levels.size(); ++i) {
      auto aa = judged(again.levels[i].tok_s, base->levels[i].tok_s, again.refusal, base->refusal, std::nullopt);
      if (aa.ratio) {
        noise[i] = std::abs(aa.ratio->value - 1.0);
      }
    }
  }
  for (const auto& name : variants) {
    LevelsRow row{name, sets[name].levels, {}, std::nullopt};
    if (const json* b = detail::benchmark_entry(data, name, info.name)) {
      if (const auto& found = dig(*b, {"slo_search"}); found.is_object()) {
        row.search =
            SloSearchFigures{json_number(dig(found, {"max_rate"})), json_number(dig(found, {"missed_at"})),
                             static_cast<int>(array_at(found, {"steps"}).size()), json_text(dig(found, {"why"}))};
      }
    }
    const std::string& refusal = sets[name].refusal;
    for (std::size_t i = 0; i < row.levels.size(); ++i) {
      auto& f = row.levels[i];
      f.refused = refusal == "not measured" ? "" : refusal;
      if (name == baseline) {
        f.verdict = Verdict::baseline;
        f.why = refusal;
        continue;
      }
      if (base == nullptr) {
        f.why = refusal;
        continue;
      }
      if (!f.tok_s && refusal.empty()) {
        f.why = "not measured at this level";
        continue;
      }
      auto j = judged(f.tok_s, base->levels[i].tok_s, refusal, base->refusal, name == repeat ? std::nullopt : noise[i]);
      f.speedup = j.ratio;
      f.verdict = name == repeat ? Verdict::repeat : j.verdict;
      f.why = name == repeat && j.verdict != Verdict::not_measured ? "" : j.why;
    }
    if (name != baseline && name != repeat && base != nullptr) {
      row.crossover = crossover_of(table, row);
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

const json* finished_benchmark(const RunData& data, const std::string& variant, const std::string& benchmark) {
  const json* entry = detail::benchmark_entry(data, variant, benchmark);
  return entry != nullptr && status_of(*entry) == VariantStatus::ok ? entry : nullptr;
}

CommandTable command_table(const RunData& data, const BenchmarkInfo& info, const std::vector<std::string>& variants) {
  CommandTable table{info.name, info.spec, {}, {}};
  for (const auto& name : variants) {
    if (const json* b = finished_benchmark(data, name, info.name)) {
      for (const auto& [metric, value] : dig(*b, {"metrics"}).items()) {
        if (std::find(table.metrics.begin(), table.metrics.end(), metric) == table.metrics.end()) {
          table.metrics.push_back(metric);
        }
      }
    }
  }
  for (const auto& name : variants) {
    std::vector<std::optional<double>> values;
    const json* b = finished_benchmark(data, name, info.name);
    for (const auto& metric : table.metrics) {
      values.push_back(b != nullptr ? json_number(dig(*b, {"metrics", metric})) : std::nullopt);
    }
    table.rows.emplace_back(name, std::move(values));
  }
  return table;
}

VariantRow variant_row(const RunData& data, const std::string& name, const std::vector<BenchmarkInfo>& benchmarks,
                       double max_failed_pct) {
  VariantRow row;
  row.name = name;
  auto it = data.results.find(name);
  if (it == data.results.end()) {
    auto damage = data.damaged.find(name);
    row.status = damage != data.damaged.end() ? VariantStatus::damaged : VariantStatus::not_run;
    row.reason =
        damage != data.damaged.end() ? damage->second : "no result: the run stopped before this variant finished";
    return row;
  }
  const json& r = it->second;
  row.status = status_of(r);
  if (row.status != VariantStatus::ok) {
    row.reason = json_text(dig(r, {"reason"}), json_text(dig(r, {"status"}), "no status"));
  }
  row.failed_phase = json_text(dig(r, {"failure", "phase"}));
  for (const auto& line : array_at(r, {"failure", "log_tail"})) {
    row.log_tail += json_text(line) + "\n";
  }
  row.host = json_text(dig(r, {"host"}));
  for (const auto& flag : array_at(r, {"flags"})) {
    if (flag.is_string()) {
      row.flags.push_back(flag.get<std::string>());
    }
  }
  row.attempt = dig(r, {"attempt"}).is_number_integer() ? dig(r, {"attempt"}).get<int>() : 0;
  row.load_s = json_number(dig(r, {"load", "load_s"}));
  row.duration_s = json_number(dig(r, {"duration_s"}));
  if (const auto& phases = dig(r, {"phases"}); !row.duration_s && phases.is_object()) {
    for (const auto& [phase, seconds] : phases.items()) {
      if (auto s = json_number(seconds)) {
        row.duration_s = row.duration_s.value_or(0) + *s;
      }
    }
  }
  for (const auto& b : benchmarks) {
    const auto& entry = dig(r, {"benchmarks", b.name});
    if (!entry.is_object()) {
      continue;
    }
    if (!row.accept_length) {
      row.accept_length = json_number(dig(entry, {"metrics", "accept_length"}));
      // A level benchmark says it per level: the first level that has one.
      for (const auto& level : array_at(entry, {"levels"})) {
        if (!row.accept_length) {
          row.accept_length = json_number(dig(level, {"metrics", "accept_length"}));
        }
      }
    }
    if (b.kind == "command") {
      continue;
    }
    Counts counts = benchmark_counts(entry);
    // Beyond the failure share the run failed the variant when it wrote the result (ResultWriter).
    if (counts.failed > 0 && !too_many_failed(counts.requests, counts.failed, max_failed_pct)) {
      row.flags.push_back(fmt::format("benchmark \"{}\": {} of {} requests failed ({:.1f}%)", b.name, counts.failed,
                                      counts.requests, 100.0 * counts.error_rate()));
    }
  }
  return row;
}

} // namespace

const VariantRow* Report::find_variant(const std::string& name) const {
  for (const auto& v : variants) {
    if (v.name == name) {
      return &v;
    }
  }
  return nullptr;
}

std::string LevelsTable::label(std::size_t i) const {
  return detail::level_label(rate, levels.at(i));
}

bool Report::has_telemetry() const {
  return std::any_of(variants.begin(), variants.end(), [](const auto& v) { return v.telemetry.has_value(); });
}

bool Report::passed() const {
  return std::all_of(variants.begin(), variants.end(), [](const auto& v) { return v.status == VariantStatus::ok; }) &&
         std::all_of(expectations.begin(), expectations.end(), [](const auto& e) { return e.reproduced; });
}

Report build_report(const RunData& data, const ReportOptions& options) {
  Report report;
  report.experiment = json_text(dig(data.run, {"experiment"}));
  report.description = json_text(dig(data.experiment, {"description"}));
  report.started = json_text(dig(data.run, {"started"}));
  report.specctl_version = json_text(dig(data.run, {"specctl_version"}));
  std::vector<std::string> variants;
  for (const auto& v : array_at(data.run, {"variants"})) {
    if (v.is_string()) {
      variants.push_back(v.get<std::string>());
    }
  }
  std::string baseline = options.baseline.value_or(json_text(dig(data.experiment, {"baseline"})));
  if (!baseline.empty() && std::find(variants.begin(), variants.end(), baseline) == variants.end()) {
    if (options.baseline) {
      throw Error(fmt::format("--baseline \"{}\": not a variant of this run{}", baseline,
                              util::did_you_mean(baseline, variants)),
                  ErrorKind::bad_input);
    }
    report.notes.push_back(fmt::format("the baseline \"{}\" is not a variant of this run: no speedups", baseline));
    baseline.clear();
  }
  report.baseline = baseline;

  report.max_failed_pct = json_number(dig(data.experiment, {"max_failed_pct"})).value_or(k_default_max_failed_pct);
  // The A/A repeat: a variant that measured this baseline again.
  for (const auto& v : array_at(data.experiment, {"variants"})) {
    std::string name = json_text(dig(v, {"name"}));
    if (!baseline.empty() && json_text(dig(v, {"repeat_of"})) == baseline && report.repeat.empty() &&
        std::find(variants.begin(), variants.end(), name) != variants.end()) {
      report.repeat = name;
    }
  }

  auto benchmarks = benchmarks_of(data);
  for (const auto& name : variants) {
    report.variants.push_back(variant_row(data, name, benchmarks, report.max_failed_pct));
  }
  for (const auto& v : array_at(data.experiment, {"variants"})) {
    for (auto& row : report.variants) {
      if (row.name == json_text(dig(v, {"name"}))) {
        row.repeat_of = json_text(dig(v, {"repeat_of"}));
      }
    }
  }
  if (baseline.empty() && report.notes.empty()) {
    report.notes.push_back("no baseline: no speedups");
  }
  for (const auto& v : report.variants) {
    if (v.name == baseline && v.status != VariantStatus::ok) {
      report.notes.push_back(
          fmt::format("the baseline \"{}\" did not finish ({}): speedups only where it measured", baseline, v.status));
    }
  }
  auto not_run = std::count_if(report.variants.begin(), report.variants.end(),
                               [](const auto& v) { return v.status == VariantStatus::not_run; });
  if (not_run > 0) {
    report.notes.push_back(fmt::format("{} variant{} without a result; `specctl run --resume` completes the run",
                                       not_run, not_run == 1 ? "" : "s"));
  }
  for (const auto& info : benchmarks) {
    if (info.kind == "single_stream") {
      report.single_stream.push_back(
          single_stream_table(data, info, variants, baseline, report.repeat, report.max_failed_pct));
      if (auto table = detail::single_stream_categories(data, report.single_stream.back())) {
        report.categories.push_back(std::move(*table));
      }
    } else if (info.kind == "concurrency" || info.kind == "rate") {
      report.levels.push_back(levels_table(data, info, variants, baseline, report.repeat, report.max_failed_pct));
      for (auto& table : detail::level_categories(data, report.levels.back())) {
        report.categories.push_back(std::move(table));
      }
    } else if (info.kind == "command") {
      report.commands.push_back(command_table(data, info, variants));
    }
    if (info.kind != "command") {
      if (auto lengths = detail::length_histograms(data, info.name, variants, baseline)) {
        report.lengths.push_back(std::move(*lengths));
      }
    }
  }
  detail::add_telemetry(data, report);
  report.power = detail::power_traces(data, variants);
  if (!report.repeat.empty()) {
    report.noise = detail::noise_rows(report);
    report.notes.push_back(detail::noise_note(data, report));
  } else if (dig(data.experiment, {"noise"}) == true) {
    report.notes.push_back("the noise was to be measured, but the baseline's repeat is not in this run: "
                           "verdicts do not account for it");
  }
  report.expectations = detail::expectation_rows(data, report);
  report.tuning = detail::tuning_section(data);
  return report;
}

} // namespace specctl::report
