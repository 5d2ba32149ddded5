#include <specctl/report/report.hpp>

#include "format.hpp"

#include <specctl/bench/stats.hpp>
#include <specctl/experiment/experiment.hpp>
#include <specctl/report/results.hpp>
#include <specctl/report/stats.hpp>
#include <specctl/util/error.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <set>

namespace specctl::report {

namespace {

using json = nlohmann::json;

// The array at j[k1][k2]..., or an empty one.
const json& array_at(const json& j, std::initializer_list<std::string_view> keys) {
  static const json k_empty = json::array();
  const json& at = dig(j, keys);
  return at.is_array() ? at : k_empty;
}

std::optional<double> number(const json& value) {
  if (value.is_number() && std::isfinite(value.get<double>())) {
    return value.get<double>();
  }
  return std::nullopt;
}

std::string text(const json& value, std::string fallback = {}) {
  return value.is_string() ? value.get<std::string>() : fallback;
}

json read_json_file(const std::filesystem::path& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) {
    throw Error(fmt::format("{}: cannot read {} (is \"{}\" a specctl result folder?)", path.string(), what,
                            path.parent_path().string()),
                ErrorKind::bad_input);
  }
  auto doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw Error(fmt::format("{}: not valid JSON", path.string()), ErrorKind::bad_input);
  }
  return doc;
}

// The benchmarks in the experiment's order, with their kind; an experiment.json
// written before kinds were recorded gets them from the results.
struct BenchmarkInfo {
  std::string name;
  std::string kind;
  std::string spec;
  std::vector<double> levels;
};

std::vector<BenchmarkInfo> benchmarks_of(const RunData& data) {
  std::vector<BenchmarkInfo> out;
  for (const auto& b : array_at(data.experiment, {"benchmarks"})) {
    BenchmarkInfo info{text(dig(b, {"name"})), text(dig(b, {"kind"})), text(dig(b, {"description"})), {}};
    for (const auto& key : {"levels", "rates"}) {
      for (const auto& level : array_at(b, {key})) {
        if (auto v = number(level)) {
          info.levels.push_back(*v);
        }
      }
    }
    for (const auto& [variant, result] : data.results) {
      if (info.kind.empty()) {
        info.kind = text(dig(result, {"benchmarks", info.name, "kind"}));
      }
    }
    if (!info.name.empty()) {
      out.push_back(std::move(info));
    }
  }
  return out;
}

// A benchmark's entry in a result, when it ran to the end.
const json* finished_benchmark(const RunData& data, const std::string& variant, const std::string& benchmark) {
  auto it = data.results.find(variant);
  if (it == data.results.end()) {
    return nullptr;
  }
  const auto& entry = dig(it->second, {"benchmarks", benchmark});
  if (!entry.is_object() || text(dig(entry, {"status"})) != "ok") {
    return nullptr;
  }
  return &entry;
}

std::vector<double> run_figures(const json& benchmark) {
  std::vector<double> out;
  for (const auto& run : array_at(benchmark, {"result", "runs"})) {
    if (dig(run, {"ok"}) == true) {
      if (auto v = number(dig(run, {"tok_s"}))) {
        out.push_back(*v);
      }
    }
  }
  return out;
}

SingleStreamTable single_stream_table(const RunData& data, const BenchmarkInfo& info,
                                      const std::vector<std::string>& variants, const std::string& baseline) {
  SingleStreamTable table{info.name, info.spec, {}};
  std::optional<Spread> base;
  if (const json* b = baseline.empty() ? nullptr : finished_benchmark(data, baseline, info.name)) {
    if (auto runs = run_figures(*b); !runs.empty()) {
      base = spread_of(runs);
    }
  }
  for (const auto& name : variants) {
    SingleStreamRow row;
    row.variant = name;
    const json* b = finished_benchmark(data, name, info.name);
    if (b != nullptr) {
      const auto& m = dig(*b, {"metrics"});
      auto runs = run_figures(*b);
      if (!runs.empty()) {
        row.tok_s = spread_of(runs);
      } else if (auto mean = number(dig(m, {"output_tok_s"}))) {
        row.tok_s = Spread{*mean, number(dig(m, {"output_tok_s_stdev"})).value_or(0), 1};
      }
      row.accept_length = number(dig(m, {"accept_length"}));
      row.ttft_ms = number(dig(m, {"ttft_ms"}));
      row.tpot_ms = number(dig(m, {"tpot_ms"}));
      if (name == baseline) {
        row.verdict = Verdict::baseline;
      } else if (row.tok_s && base) {
        row.speedup = compare_spreads(*row.tok_s, *base);
        row.verdict = row.speedup ? verdict_of(*row.speedup) : Verdict::not_measured;
      }
    } else if (name == baseline) {
      row.verdict = Verdict::baseline;
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

Crossover crossover_of(const LevelsTable& table, const LevelsRow& row) {
  Crossover out;
  std::optional<std::size_t> previous_faster;
  bool any_faster = false;
  bool any_slower = false;
  bool first = true;
  bool first_faster = false;
  for (std::size_t i = 0; i < row.levels.size(); ++i) {
    auto s = row.levels[i].speedup;
    if (!s) {
      continue;
    }
    bool faster = *s > 1.0;
    if (first) {
      first_faster = faster;
      first = false;
    }
    any_faster |= faster;
    any_slower |= !faster;
    if (faster) {
      previous_faster = i;
    } else if (previous_faster && out.kind == Crossover::Kind::none && first_faster) {
      out.kind = Crossover::Kind::crosses;
      double l1 = table.levels[*previous_faster];
      double l2 = table.levels[i];
      double s1 = *row.levels[*previous_faster].speedup;
      out.last_faster = l1;
      out.first_not_faster = l2;
      double f = (s1 - 1.0) / (s1 - *s);
      out.estimate = l1 > 0 ? std::exp(std::log(l1) + f * (std::log(l2) - std::log(l1))) : l1 + f * (l2 - l1);
    }
  }
  if (first) {
    return out;
  }
  if (!any_slower) {
    out.kind = Crossover::Kind::always_faster;
  } else if (!any_faster) {
    out.kind = Crossover::Kind::never_faster;
  } else if (out.kind != Crossover::Kind::crosses) {
    // Slower at the lowest level, faster at a higher one. A variant that crossed
    // and became faster again keeps its first crossing.
    out.kind = Crossover::Kind::mixed;
  }
  return out;
}

LevelsTable levels_table(const RunData& data, const BenchmarkInfo& info, const std::vector<std::string>& variants,
                         const std::string& baseline) {
  LevelsTable table;
  table.benchmark = info.name;
  table.spec = info.spec;
  table.rate = info.kind == "rate";
  const char* key = table.rate ? "rate" : "concurrency";
  std::set<double> levels(info.levels.begin(), info.levels.end());
  for (const auto& name : variants) {
    if (const json* b = finished_benchmark(data, name, info.name)) {
      for (const auto& level : array_at(*b, {"levels"})) {
        if (auto v = number(dig(level, {key}))) {
          levels.insert(*v);
        }
      }
    }
  }
  table.levels.assign(levels.begin(), levels.end());
  auto figures_of = [&](const std::string& name) {
    std::vector<LevelFigures> out(table.levels.size());
    const json* b = finished_benchmark(data, name, info.name);
    if (b == nullptr) {
      return out;
    }
    for (const auto& level : array_at(*b, {"levels"})) {
      auto v = number(dig(level, {key}));
      auto at = v ? std::find(table.levels.begin(), table.levels.end(), *v) : table.levels.end();
      if (at == table.levels.end()) {
        continue;
      }
      const auto& m = dig(level, {"metrics"});
      auto& f = out[static_cast<std::size_t>(at - table.levels.begin())];
      f.tok_s = number(dig(m, {"output_tok_s"}));
      f.ttft_p50_ms = number(dig(m, {"ttft_p50_ms"}));
      f.ttft_p99_ms = number(dig(m, {"ttft_p99_ms"}));
      f.tpot_p50_ms = number(dig(m, {"tpot_p50_ms"}));
      f.tpot_p99_ms = number(dig(m, {"tpot_p99_ms"}));
      f.accept_length = number(dig(m, {"accept_length"}));
    }
    return out;
  };
  std::vector<LevelFigures> base = baseline.empty() ? std::vector<LevelFigures>(table.levels.size())
                                                    : figures_of(baseline);
  for (const auto& name : variants) {
    LevelsRow row{name, figures_of(name), {}};
    if (name != baseline) {
      for (std::size_t i = 0; i < row.levels.size(); ++i) {
        if (row.levels[i].tok_s && base[i].tok_s && *base[i].tok_s > 0) {
          row.levels[i].speedup = *row.levels[i].tok_s / *base[i].tok_s;
        }
      }
      row.crossover = crossover_of(table, row);
    }
    table.rows.push_back(std::move(row));
  }
  return table;
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
      values.push_back(b != nullptr ? number(dig(*b, {"metrics", metric})) : std::nullopt);
    }
    table.rows.emplace_back(name, std::move(values));
  }
  return table;
}

std::vector<ExpectationRow> expectation_rows(const RunData& data) {
  std::vector<ExpectationRow> out;
  for (const auto& x : array_at(data.experiment, {"expectations"})) {
    experiment::Expectation e;
    e.variant = text(dig(x, {"variant"}));
    e.benchmark = text(dig(x, {"benchmark"}));
    e.metric = text(dig(x, {"metric"}));
    e.value = number(dig(x, {"value"})).value_or(0);
    e.tolerance_pct = number(dig(x, {"tolerance_pct"})).value_or(0);
    ExpectationRow row{e.variant, e.benchmark, {}, e.metric, e.value, {}, {}, e.tolerance_pct, false};
    if (auto level = number(dig(x, {"level"}))) {
      e.level = static_cast<int>(*level);
      row.level = detail::level_label(false, *level);
    }
    if (auto rate = number(dig(x, {"rate"}))) {
      e.rate = *rate;
      row.level = detail::level_label(true, *rate);
    }
    auto it = data.results.find(e.variant);
    if (it != data.results.end() && text(dig(it->second, {"status"})) == "ok") {
      row.measured = find_metric(it->second, e);
    }
    if (row.measured) {
      row.delta_pct = e.value != 0 ? (*row.measured - e.value) / e.value * 100.0 : 0.0;
      row.reproduced = std::abs(*row.delta_pct) <= e.tolerance_pct;
    }
    out.push_back(std::move(row));
  }
  return out;
}

VariantRow variant_row(const RunData& data, const std::string& name, const std::vector<BenchmarkInfo>& benchmarks) {
  VariantRow row;
  row.name = name;
  auto it = data.results.find(name);
  if (it == data.results.end()) {
    auto damage = data.damaged.find(name);
    row.status = damage != data.damaged.end() ? "damaged" : "not run";
    row.reason = damage != data.damaged.end() ? damage->second
                                              : "no result: the run stopped before this variant finished";
    return row;
  }
  const json& r = it->second;
  row.status = text(dig(r, {"status"}), "?");
  if (row.status != "ok") {
    row.reason = text(dig(r, {"reason"}), row.status);
  }
  row.failed_phase = text(dig(r, {"failure", "phase"}));
  for (const auto& line : array_at(r, {"failure", "log_tail"})) {
    row.log_tail += text(line) + "\n";
  }
  row.host = text(dig(r, {"host"}));
  for (const auto& flag : array_at(r, {"flags"})) {
    if (flag.is_string()) {
      row.flags.push_back(flag.get<std::string>());
    }
  }
  row.attempt = dig(r, {"attempt"}).is_number_integer() ? dig(r, {"attempt"}).get<int>() : 0;
  row.load_s = number(dig(r, {"load", "load_s"}));
  row.duration_s = number(dig(r, {"duration_s"}));
  if (const auto& phases = dig(r, {"phases"}); !row.duration_s && phases.is_object()) {
    for (const auto& [phase, seconds] : phases.items()) {
      if (auto s = number(seconds)) {
        row.duration_s = row.duration_s.value_or(0) + *s;
      }
    }
  }
  for (const auto& b : benchmarks) {
    if (auto a = number(dig(r, {"benchmarks", b.name, "metrics", "accept_length"})); a && !row.accept_length) {
      row.accept_length = a;
    }
  }
  return row;
}

} // namespace

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
  case Verdict::faster:
    return "faster";
  case Verdict::slower:
    return "slower";
  case Verdict::inconclusive:
    return "inconclusive";
  case Verdict::not_measured:
    return "not measured";
  case Verdict::baseline:
    return "baseline";
  }
  return "?";
}

std::optional<Ratio> compare_spreads(const Spread& a, const Spread& b) {
  if (auto ci = ratio_interval(a, b)) {
    return Ratio{ci->ratio, ci->low, ci->high};
  }
  if (!(b.mean > 0)) {
    return std::nullopt;
  }
  return Ratio{a.mean / b.mean, std::nullopt, std::nullopt};
}

Verdict verdict_of(const Ratio& ratio) {
  if (ratio.low && ratio.high) {
    return *ratio.low > 1.0 ? Verdict::faster : *ratio.high < 1.0 ? Verdict::slower : Verdict::inconclusive;
  }
  double noise = k_noise_pct / 100.0;
  return ratio.value > 1.0 + noise ? Verdict::faster : ratio.value < 1.0 - noise ? Verdict::slower
                                                                                : Verdict::inconclusive;
}

std::string LevelsTable::label(std::size_t i) const { return detail::level_label(rate, levels.at(i)); }

bool Report::passed() const {
  return std::all_of(variants.begin(), variants.end(), [](const auto& v) { return v.status == "ok"; }) &&
         std::all_of(expectations.begin(), expectations.end(), [](const auto& e) { return e.reproduced; });
}

RunData read_run(const std::filesystem::path& dir) {
  ResultPaths paths{dir};
  RunData data;
  data.dir = dir;
  data.run = read_json_file(paths.run_info(), "run.json");
  if (text(dig(data.run, {"format"})) != k_run_format) {
    throw Error(fmt::format("{}: not a specctl run (format is not \"{}\")", paths.run_info().string(), k_run_format),
                ErrorKind::bad_input);
  }
  data.experiment = read_json_file(paths.resolved(), "experiment.json");
  for (const auto& v : array_at(data.run, {"variants"})) {
    if (v.is_string()) {
      if (auto result = read_result(paths, v.get<std::string>())) {
        data.results[v.get<std::string>()] = std::move(*result);
      } else if (auto damage = result_damage(paths, v.get<std::string>())) {
        data.damaged[v.get<std::string>()] = std::move(*damage);
      }
    }
  }
  return data;
}

Report build_report(const RunData& data, const ReportOptions& options) {
  Report report;
  report.experiment = text(dig(data.run, {"experiment"}));
  report.description = text(dig(data.experiment, {"description"}));
  report.started = text(dig(data.run, {"started"}));
  report.specctl_version = text(dig(data.run, {"specctl_version"}));
  std::vector<std::string> variants;
  for (const auto& v : array_at(data.run, {"variants"})) {
    if (v.is_string()) {
      variants.push_back(v.get<std::string>());
    }
  }
  std::string baseline = options.baseline.value_or(text(dig(data.experiment, {"baseline"})));
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

  auto benchmarks = benchmarks_of(data);
  for (const auto& name : variants) {
    report.variants.push_back(variant_row(data, name, benchmarks));
  }
  if (baseline.empty() && report.notes.empty()) {
    report.notes.push_back("no baseline: no speedups");
  }
  for (const auto& v : report.variants) {
    if (v.name == baseline && v.status != "ok") {
      report.notes.push_back(fmt::format("the baseline \"{}\" did not finish ({}): speedups only where it measured",
                                         baseline, v.status));
    }
  }
  auto not_run = std::count_if(report.variants.begin(), report.variants.end(),
                               [](const auto& v) { return v.status == "not run"; });
  if (not_run > 0) {
    report.notes.push_back(fmt::format("{} variant{} without a result; `specctl run --resume` completes the run",
                                       not_run, not_run == 1 ? "" : "s"));
  }
  for (const auto& info : benchmarks) {
    if (info.kind == "single_stream") {
      report.single_stream.push_back(single_stream_table(data, info, variants, baseline));
    } else if (info.kind == "concurrency" || info.kind == "rate") {
      report.levels.push_back(levels_table(data, info, variants, baseline));
    } else if (info.kind == "command") {
      report.commands.push_back(command_table(data, info, variants));
    }
  }
  report.expectations = expectation_rows(data);
  return report;
}

} // namespace specctl::report
