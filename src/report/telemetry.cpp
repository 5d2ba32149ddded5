// The GPU telemetry of a report, read from the variants' result.json: each
// level's tokens per joule (judged against the baseline's by the one rule of
// judge()), its power and energy, the levels whose GPUs throttled, and each
// variant's peak memory while loading and what could not be sampled.

#include "build_parts.hpp"
#include "cells.hpp"
#include "json_fields.hpp"
#include "workload.hpp"

#include <specctl/bench/stats.hpp>
#include <specctl/report/results.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>

namespace specctl::report::detail {

namespace {

using json = nlohmann::json;

// The runner flags a reason held for more than this share of a level (run/telemetry.hpp).
constexpr double k_throttle_share = 0.05;

// The figure in the level's telemetry, else the copy the runner put beside its metrics.
std::optional<double> either(const json& telemetry, const json& metrics, std::initializer_list<std::string_view> keys,
                             std::string_view metric) {
  if (auto v = json_number(dig(telemetry, keys))) {
    return v;
  }
  return json_number(dig(metrics, {metric}));
}

// The throttle reasons of one measurement held for more than 5% of it, with their shares.
std::vector<std::pair<std::string, double>> throttle_reasons(const json& telemetry) {
  std::vector<std::pair<std::string, double>> out;
  const auto& shares = dig(telemetry, {"throttle"});
  if (const auto& flagged = dig(telemetry, {"throttled"}); flagged.is_array()) {
    for (const auto& reason : flagged) {
      if (reason.is_string()) {
        out.emplace_back(reason.get<std::string>(), json_number(dig(shares, {reason.get<std::string>()})).value_or(0));
      }
    }
  } else if (shares.is_object()) {
    for (const auto& [reason, share] : shares.items()) {
      if (auto v = json_number(share); v && *v > k_throttle_share) {
        out.emplace_back(reason, *v);
      }
    }
  }
  return out;
}

// The measurements of one level (its repeats), or of a single-stream benchmark.
class EnergySamples {
public:
  explicit EnergySamples(std::set<std::string>& sources) : m_sources(sources) {}

  void add(const json& holder, int position) {
    const auto& t = dig(holder, {"telemetry"});
    const auto& m = dig(holder, {"metrics"});
    auto tok_per_j = either(t, m, {"tok_per_j"}, "tok_per_j");
    auto power = either(t, m, {"power_w", "mean"}, "power_w");
    if (!t.is_object() && !tok_per_j && !power) {
      return;
    }
    m_figures.sampled = true;
    if (tok_per_j) {
      m_tok_per_j.push_back(*tok_per_j);
    }
    if (power) {
      m_power.push_back(*power);
    }
    if (auto energy = json_number(dig(t, {"energy_j"}))) {
      m_energy.push_back(*energy);
    }
    if (const auto& source = dig(t, {"energy_source"}); source.is_string()) {
      m_sources.insert(source.get<std::string>());
    }
    if (auto reasons = throttle_reasons(t); !reasons.empty()) {
      int repeat = static_cast<int>(json_number(dig(holder, {"repeat"})).value_or(position));
      m_figures.throttled.push_back({repeat, std::move(reasons)});
    }
  }

  EnergyFigures figures() const {
    EnergyFigures out = m_figures;
    if (!m_tok_per_j.empty()) {
      out.tok_per_j = spread_of(m_tok_per_j);
    }
    if (!m_power.empty()) {
      out.power_w = bench::mean(m_power);
    }
    if (!m_energy.empty()) {
      out.energy_j = bench::mean(m_energy);
    }
    return out;
  }

private:
  std::set<std::string>& m_sources;
  EnergyFigures m_figures;
  std::vector<double> m_tok_per_j;
  std::vector<double> m_power;
  std::vector<double> m_energy;
};

// One variant's figures at one level (or single-stream benchmark), with what
// refuses them a verdict: the same refusal as their tok/s.
struct Cell {
  std::string variant;
  EnergyFigures* energy = nullptr;
  std::string refused;
};

// tok/J against the baseline's, as tok/s: the repeat (A/A) against the baseline
// gives the noise every other variant's difference must exceed.
void judge_cells(std::vector<Cell>& cells, const std::string& baseline, const std::string& repeat) {
  auto find = [&](const std::string& name) -> const Cell* {
    auto it = std::find_if(cells.begin(), cells.end(), [&](const Cell& c) { return c.variant == name; });
    return name.empty() || it == cells.end() ? nullptr : &*it;
  };
  const Cell* base = find(baseline);
  auto judged = [&](const Cell& cell, std::optional<double> noise) -> Judgement {
    if (!cell.refused.empty()) {
      return {std::nullopt, Verdict::not_measured, cell.refused};
    }
    if (!base->refused.empty()) {
      return {std::nullopt, Verdict::not_measured, "the baseline: " + base->refused};
    }
    return judge(cell.energy->tok_per_j, base->energy->tok_per_j, noise);
  };
  std::optional<double> noise;
  if (const Cell* again = find(repeat); base != nullptr && again != nullptr) {
    if (auto aa = judged(*again, std::nullopt); aa.ratio) {
      noise = std::abs(aa.ratio->value - 1.0);
    }
  }
  for (auto& cell : cells) {
    auto& e = *cell.energy;
    if (cell.variant == baseline) {
      e.verdict = Verdict::baseline;
      e.why = cell.refused;
      continue;
    }
    if (base == nullptr || !e.sampled) {
      continue;
    }
    auto j = judged(cell, cell.variant == repeat ? std::nullopt : noise);
    e.ratio = j.ratio;
    e.verdict = cell.variant == repeat ? Verdict::repeat : j.verdict;
    e.why = cell.variant == repeat && j.verdict != Verdict::not_measured ? "" : j.why;
  }
}

std::optional<LoadMemory> load_memory(const json& load) {
  if (!load.is_object()) {
    return std::nullopt;
  }
  LoadMemory out;
  const auto& peaks = dig(load, {"memory_peak_mib"});
  if (auto one = json_number(peaks)) {
    out.peak_mib.push_back(*one);
  } else if (peaks.is_array()) {
    for (const auto& peak : peaks) {
      out.peak_mib.push_back(json_number(peak).value_or(0));
    }
  }
  if (out.peak_mib.empty()) {
    return std::nullopt;
  }
  const auto& gpus = dig(load, {"gpus"});
  for (std::size_t i = 0; i < out.peak_mib.size(); ++i) {
    const bool named = gpus.is_array() && gpus.size() == out.peak_mib.size() && gpus[i].is_number_integer();
    out.gpus.push_back(named ? gpus[i].get<int>() : static_cast<int>(i));
  }
  out.total_mib = json_number(dig(load, {"memory_total_mib"}));
  out.samples = static_cast<int>(json_number(dig(load, {"samples"})).value_or(0));
  return out;
}

// The variant's telemetry as its result's top level says it; nullopt when it says nothing.
std::optional<VariantTelemetry> variant_telemetry(const RunData& data, const std::string& variant) {
  auto it = data.results.find(variant);
  if (it == data.results.end() || !dig(it->second, {"telemetry"}).is_object()) {
    return std::nullopt;
  }
  const auto& t = dig(it->second, {"telemetry"});
  VariantTelemetry out;
  out.load = load_memory(dig(t, {"load"}));
  if (const auto& warnings = dig(t, {"warnings"}); warnings.is_array()) {
    for (const auto& w : warnings) {
      if (w.is_string()) {
        out.warnings.push_back(w.get<std::string>());
      }
    }
  }
  return out;
}

} // namespace

void add_telemetry(const RunData& data, Report& report) {
  std::map<std::string, std::set<std::string>> sources;
  // The variant's flags for its throttled levels, in the tables' order.
  std::map<std::string, std::vector<std::string>> throttled;
  std::set<std::string> sampled;
  auto note_throttled = [&](const std::string& variant, const std::string& where, const EnergyFigures& e,
                            bool repeated) {
    if (e.sampled) {
      sampled.insert(variant);
    }
    for (const auto& t : e.throttled) {
      std::string at = repeated ? fmt::format("{}, repeat {}", where, t.repeat) : where;
      throttled[variant].push_back(at + ": " + throttle_text(t));
    }
  };
  for (auto& table : report.single_stream) {
    std::vector<Cell> cells;
    for (auto& row : table.rows) {
      EnergySamples samples(sources[row.variant]);
      if (const json* entry = benchmark_entry(data, row.variant, table.benchmark)) {
        samples.add(*entry, 1);
      }
      row.energy = samples.figures();
      cells.push_back({row.variant, &row.energy, row.refused});
      note_throttled(row.variant, table.benchmark + " (single stream)", row.energy, false);
    }
    judge_cells(cells, report.baseline, report.repeat);
  }
  for (auto& table : report.levels) {
    const char* key = table.rate ? "rate" : "concurrency";
    for (std::size_t i = 0; i < table.levels.size(); ++i) {
      std::vector<Cell> cells;
      for (auto& row : table.rows) {
        EnergySamples samples(sources[row.variant]);
        if (const json* entry = benchmark_entry(data, row.variant, table.benchmark)) {
          int position = 0;
          const auto& levels = dig(*entry, {"levels"});
          for (const auto& level : levels.is_array() ? levels : json::array()) {
            // The rates an SLO search bisected are not the table's columns (report.cpp).
            auto v = dig(level, {"search"}) == true ? std::nullopt : json_number(dig(level, {key}));
            if (v && *v == table.levels[i]) {
              samples.add(level, ++position);
            }
          }
        }
        auto& f = row.levels[i];
        f.energy = samples.figures();
        cells.push_back({row.variant, &f.energy, f.refused});
        note_throttled(row.variant, table.benchmark + " " + table.label(i), f.energy, table.repeats > 1);
      }
      judge_cells(cells, report.baseline, report.repeat);
    }
  }
  for (auto& v : report.variants) {
    v.telemetry = variant_telemetry(data, v.name);
    const auto& used = sources[v.name];
    const auto& flags = throttled[v.name];
    if (!v.telemetry && sampled.count(v.name) == 0) {
      continue;
    }
    if (!v.telemetry) {
      v.telemetry = VariantTelemetry{};
    }
    v.telemetry->energy_source = util::join(std::vector<std::string>(used.begin(), used.end()), " and ");
    v.telemetry->throttled = flags;
    v.flags.insert(v.flags.end(), flags.begin(), flags.end());
  }
}

} // namespace specctl::report::detail
