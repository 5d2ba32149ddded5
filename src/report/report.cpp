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
#include <cstdio>
#include <ctime>
#include <set>
#include <specctl/util/duration.hpp>

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
  int repeats = 1;
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
    info.repeats = static_cast<int>(number(dig(b, {"repeats"})).value_or(1));
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

// A benchmark's entry in a result, whatever its status: its figures are shown,
// its verdicts only when it ran to the end (see Judged below).
const json* benchmark_entry(const RunData& data, const std::string& variant, const std::string& benchmark) {
  auto it = data.results.find(variant);
  if (it == data.results.end()) {
    return nullptr;
  }
  const auto& entry = dig(it->second, {"benchmarks", benchmark});
  return entry.is_object() ? &entry : nullptr;
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

std::string accept_source_text(const json& holder) {
  std::string kind = text(dig(holder, {"accept_length_source", "kind"}));
  if (kind == "log") {
    return "server log lines";
  }
  if (kind == "prometheus") {
    return "/metrics counters";
  }
  if (kind == "responses") {
    return "response timings";
  }
  return kind;
}

Sources sources_of(const json& holder, const json& result) {
  Sources out;
  out.accept_length = accept_source_text(holder);
  out.tokens = text(dig(holder, {"metrics", "token_source"}), text(dig(result, {"token_source"})));
  return out;
}

// Verdicts are refused for a variant's whole benchmark when it failed (the
// server died in it) or too many of its requests failed: why, or empty.
std::string unjudgeable(const json& entry, const Counts& counts, double max_failed_pct) {
  if (auto why = too_many_failed(counts.requests, counts.failed, max_failed_pct)) {
    return *why;
  }
  if (text(dig(entry, {"status"})) != "ok") {
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
  const json* b = benchmark_entry(data, name, info.name);
  if (b == nullptr) {
    out.refusal = "not measured";
    return out;
  }
  const auto& m = dig(*b, {"metrics"});
  auto& row = out.row;
  auto runs = run_figures(*b);
  if (!runs.empty()) {
    row.tok_s = spread_of(runs);
  } else if (auto mean = number(dig(m, {"output_tok_s"}))) {
    row.tok_s = Spread{*mean, number(dig(m, {"output_tok_s_stdev"})).value_or(0), 1};
  }
  row.counts = counts_of(*b);
  row.accept_length = number(dig(m, {"accept_length"}));
  row.ttft_ms = number(dig(m, {"ttft_ms"}));
  row.tpot_ms = number(dig(m, {"tpot_ms"}));
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
Crossover crossover_of(const LevelsTable& table, const LevelsRow& row) {
  Crossover out;
  for (std::size_t i = 0; i < row.levels.size(); ++i) {
    Verdict v = row.levels[i].verdict;
    if (!out.runs.empty() && out.runs.back().verdict == v) {
      out.runs.back().last = i;
    } else {
      out.runs.push_back({v, i, i});
    }
  }
  if (std::all_of(out.runs.begin(), out.runs.end(), [](const auto& r) { return r.verdict == Verdict::not_measured; })) {
    out.runs.clear();
    return out;
  }
  // Faster from the lowest level on, then slower: estimate where 1.0 is crossed.
  if (out.runs.size() >= 2 && out.runs.front().verdict == Verdict::faster) {
    for (std::size_t k = 1; k < out.runs.size(); ++k) {
      if (out.runs[k].verdict != Verdict::slower) {
        continue;
      }
      std::size_t i1 = out.runs.front().last;
      std::size_t i2 = out.runs[k].first;
      double s1 = row.levels[i1].speedup->value;
      double s2 = row.levels[i2].speedup->value;
      double l1 = table.levels[i1];
      double l2 = table.levels[i2];
      if (s1 > 1.0 && s2 < 1.0) {
        double f = (s1 - 1.0) / (s1 - s2);
        out.estimate = l1 > 0 ? std::exp(std::log(l1) + f * (std::log(l2) - std::log(l1))) : l1 + f * (l2 - l1);
      }
      break;
    }
  }
  return out;
}

struct LevelSet {
  std::vector<LevelFigures> levels;
  // Why the benchmark's verdicts are refused for this variant; empty when they are not.
  std::string refusal;
};

double mean_of(const std::vector<double>& values) { return bench::mean(values); }

LevelsTable levels_table(const RunData& data, const BenchmarkInfo& info, const std::vector<std::string>& variants,
                         const std::string& baseline, const std::string& repeat, double max_failed_pct) {
  LevelsTable table;
  table.benchmark = info.name;
  table.spec = info.spec;
  table.rate = info.kind == "rate";
  table.repeats = info.repeats;
  const char* key = table.rate ? "rate" : "concurrency";
  std::set<double> levels(info.levels.begin(), info.levels.end());
  for (const auto& name : variants) {
    if (const json* b = benchmark_entry(data, name, info.name)) {
      for (const auto& level : array_at(*b, {"levels"})) {
        if (auto v = number(dig(level, {key}))) {
          levels.insert(*v);
        }
      }
    }
  }
  table.levels.assign(levels.begin(), levels.end());
  auto figures_of = [&](const std::string& name) {
    LevelSet out;
    out.levels.resize(table.levels.size());
    const json* b = benchmark_entry(data, name, info.name);
    if (b == nullptr) {
      out.refusal = "not measured";
      return out;
    }
    // Every measurement of a level (one per repeat), in the order they ran.
    std::vector<std::vector<const json*>> samples(table.levels.size());
    for (const auto& level : array_at(*b, {"levels"})) {
      auto v = number(dig(level, {key}));
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
      for (const json* level : samples[i]) {
        const auto& m = dig(*level, {"metrics"});
        const auto& r = dig(*level, {"result"});
        f.counts += counts_of(*level);
        if (auto v = number(dig(m, {"output_tok_s"}))) {
          tok_s.push_back(*v);
        }
        for (const char* metric : {"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"}) {
          if (auto v = number(dig(m, {metric}))) {
            latency[metric].push_back(*v);
          }
        }
        if (auto v = number(dig(m, {"accept_length"}))) {
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
        return it == latency.end() ? std::nullopt : std::optional(mean_of(it->second));
      };
      f.ttft_p50_ms = mean_at("ttft_p50_ms");
      f.ttft_p99_ms = mean_at("ttft_p99_ms");
      f.tpot_p50_ms = mean_at("tpot_p50_ms");
      f.tpot_p99_ms = mean_at("tpot_p99_ms");
      if (!accept.empty()) {
        f.accept_length = mean_of(accept);
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
    LevelsRow row{name, sets[name].levels, {}};
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
      auto j = judged(f.tok_s, base->levels[i].tok_s, refusal, base->refusal,
                      name == repeat ? std::nullopt : noise[i]);
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
  const json* entry = benchmark_entry(data, variant, benchmark);
  return entry != nullptr && text(dig(*entry, {"status"})) == "ok" ? entry : nullptr;
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

std::vector<ExpectationRow> expectation_rows(const RunData& data, const Report& report) {
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
    const VariantRow* v = report.find_variant(e.variant);
    if (it != data.results.end() && v != nullptr && v->status == "ok") {
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

VariantRow variant_row(const RunData& data, const std::string& name, const std::vector<BenchmarkInfo>& benchmarks,
                       double max_failed_pct) {
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
    const auto& entry = dig(r, {"benchmarks", b.name});
    if (!entry.is_object()) {
      continue;
    }
    if (!row.accept_length) {
      row.accept_length = number(dig(entry, {"metrics", "accept_length"}));
      // A level benchmark says it per level: the first level that has one.
      for (const auto& level : array_at(entry, {"levels"})) {
        if (!row.accept_length) {
          row.accept_length = number(dig(level, {"metrics", "accept_length"}));
        }
      }
    }
    if (b.kind == "command") {
      continue;
    }
    Counts counts = benchmark_counts(entry);
    if (auto why = too_many_failed(counts.requests, counts.failed, max_failed_pct)) {
      if (row.status == "ok") {
        row.status = "failed";
        row.reason = fmt::format("bench {}: {}: not measured", b.name, *why);
        row.failed_phase = "bench " + b.name;
      }
    } else if (counts.failed > 0) {
      row.flags.push_back(fmt::format("benchmark \"{}\": {} of {} requests failed ({:.1f}%)", b.name, counts.failed,
                                      counts.requests, 100.0 * counts.error_rate()));
    }
  }
  return row;
}

// The baseline against its repeat, metric by metric.
std::vector<NoiseRow> noise_rows(const Report& r) {
  std::vector<NoiseRow> out;
  auto add = [&](const std::string& benchmark, const std::string& level, const char* metric,
                 std::optional<double> first, std::optional<double> again) {
    NoiseRow row{benchmark, level, metric, first, again, std::nullopt};
    if (first && again && *first != 0) {
      row.difference_pct = (*again - *first) / *first * 100.0;
    }
    out.push_back(std::move(row));
  };
  auto mean = [](const std::optional<Spread>& s) { return s ? std::optional(s->mean) : std::nullopt; };
  for (const auto& t : r.single_stream) {
    const SingleStreamRow* first = nullptr;
    const SingleStreamRow* again = nullptr;
    for (const auto& row : t.rows) {
      first = row.variant == r.baseline ? &row : first;
      again = row.variant == r.repeat ? &row : again;
    }
    if (first == nullptr || again == nullptr) {
      continue;
    }
    add(t.benchmark, "", "output_tok_s", mean(first->tok_s), mean(again->tok_s));
    add(t.benchmark, "", "ttft_ms", first->ttft_ms, again->ttft_ms);
    add(t.benchmark, "", "tpot_ms", first->tpot_ms, again->tpot_ms);
  }
  for (const auto& t : r.levels) {
    const LevelsRow* first = nullptr;
    const LevelsRow* again = nullptr;
    for (const auto& row : t.rows) {
      first = row.variant == r.baseline ? &row : first;
      again = row.variant == r.repeat ? &row : again;
    }
    if (first == nullptr || again == nullptr) {
      continue;
    }
    for (std::size_t i = 0; i < t.levels.size(); ++i) {
      const auto& a = first->levels[i];
      const auto& b = again->levels[i];
      add(t.benchmark, t.label(i), "output_tok_s", mean(a.tok_s), mean(b.tok_s));
      add(t.benchmark, t.label(i), "ttft_p50_ms", a.ttft_p50_ms, b.ttft_p50_ms);
      add(t.benchmark, t.label(i), "ttft_p99_ms", a.ttft_p99_ms, b.ttft_p99_ms);
      add(t.benchmark, t.label(i), "tpot_p50_ms", a.tpot_p50_ms, b.tpot_p50_ms);
      add(t.benchmark, t.label(i), "tpot_p99_ms", a.tpot_p99_ms, b.tpot_p99_ms);
    }
  }
  return out;
}

// Seconds since the epoch of "2026-11-20T22:00:00.000Z"; nullopt when it is not one.
std::optional<double> utc_seconds(const std::string& stamp) {
  std::tm tm{};
  double seconds = 0;
  if (std::sscanf(stamp.c_str(), "%4d-%2d-%2dT%2d:%2d:%lfZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &seconds) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + seconds;
}

// How far apart the two measurements of the baseline were, and the largest tok/s drift.
std::string noise_note(const RunData& data, const Report& r) {
  std::string when;
  auto first = data.results.find(r.baseline);
  auto again = data.results.find(r.repeat);
  if (first != data.results.end() && again != data.results.end()) {
    auto t1 = utc_seconds(text(dig(first->second, {"started"})));
    auto t2 = utc_seconds(text(dig(again->second, {"started"})));
    if (t1 && t2) {
      when = fmt::format(", {} later", util::format_duration(std::chrono::milliseconds(
                                           static_cast<std::int64_t>(std::abs(*t2 - *t1) * 1000))));
    }
  }
  const NoiseRow* widest = nullptr;
  for (const auto& row : r.noise) {
    if (row.metric == "output_tok_s" && row.difference_pct &&
        (widest == nullptr || std::abs(*row.difference_pct) > std::abs(*widest->difference_pct))) {
      widest = &row;
    }
  }
  std::string drift = widest == nullptr ? "no tok/s figure on both sides"
                                        : fmt::format("output tok/s moved {:+.1f}% ({}{}{})", *widest->difference_pct,
                                                      widest->benchmark, widest->level.empty() ? "" : " ",
                                                      widest->level);
  return fmt::format("noise: \"{}\" measured the baseline \"{}\" again{}; {} at most; a difference within the A/A "
                     "one is inconclusive",
                     r.repeat, r.baseline, when, drift);
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
  case Verdict::one_sample:
    return "one sample";
  case Verdict::not_measured:
    return "not measured";
  case Verdict::baseline:
    return "baseline";
  case Verdict::repeat:
    return "A/A";
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

Judgement judge(const std::optional<Spread>& a, const std::optional<Spread>& b, std::optional<double> noise) {
  Judgement out;
  if (!a || !b) {
    out.why = !a ? "not measured" : "the baseline did not measure it";
    return out;
  }
  out.ratio = compare_spreads(*a, *b);
  if (!out.ratio) {
    out.why = "the baseline measured nothing";
    return out;
  }
  const Ratio& r = *out.ratio;
  if (!r.low || !r.high) {
    out.verdict = Verdict::one_sample;
    out.why = fmt::format("one sample {}: no interval, no verdict", a->n < 2 && b->n < 2 ? "a side" : a->n < 2 ? "here" : "in the baseline");
    return out;
  }
  out.verdict = *r.low > 1.0 ? Verdict::faster : *r.high < 1.0 ? Verdict::slower : Verdict::inconclusive;
  if (out.verdict == Verdict::inconclusive) {
    out.why = "the 95% interval holds 1.00";
  } else if (noise && std::abs(r.value - 1.0) <= *noise) {
    out.verdict = Verdict::inconclusive;
    out.why = fmt::format("within the A/A noise (±{:.1f}%)", *noise * 100.0);
  }
  return out;
}

const VariantRow* Report::find_variant(const std::string& name) const {
  for (const auto& v : variants) {
    if (v.name == name) {
      return &v;
    }
  }
  return nullptr;
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

  report.max_failed_pct = number(dig(data.experiment, {"max_failed_pct"})).value_or(k_default_max_failed_pct);
  // The A/A repeat: a variant that measured this baseline again.
  for (const auto& v : array_at(data.experiment, {"variants"})) {
    std::string name = text(dig(v, {"name"}));
    if (!baseline.empty() && text(dig(v, {"repeat_of"})) == baseline && report.repeat.empty() &&
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
      if (row.name == text(dig(v, {"name"}))) {
        row.repeat_of = text(dig(v, {"repeat_of"}));
      }
    }
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
      report.single_stream.push_back(
          single_stream_table(data, info, variants, baseline, report.repeat, report.max_failed_pct));
    } else if (info.kind == "concurrency" || info.kind == "rate") {
      report.levels.push_back(levels_table(data, info, variants, baseline, report.repeat, report.max_failed_pct));
    } else if (info.kind == "command") {
      report.commands.push_back(command_table(data, info, variants));
    }
  }
  if (!report.repeat.empty()) {
    report.noise = noise_rows(report);
    report.notes.push_back(noise_note(data, report));
  } else if (dig(data.experiment, {"noise"}) == true) {
    report.notes.push_back("the noise was to be measured, but the baseline's repeat is not in this run: "
                           "verdicts do not account for it");
  }
  report.expectations = expectation_rows(data, report);
  return report;
}

} // namespace specctl::report
