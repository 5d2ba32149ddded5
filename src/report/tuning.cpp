#include "tuning.hpp"

#include <specctl/report/svg.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::report::detail {

namespace {

using json = nlohmann::json;

std::optional<double> mean_of(const std::vector<double>& values) {
  if (values.empty()) {
    return std::nullopt;
  }
  double sum = 0;
  for (double v : values) {
    sum += v;
  }
  return sum / static_cast<double>(values.size());
}

std::string label_of(const json& level) {
  if (const auto& c = dig(level, {"concurrency"}); c.is_number()) {
    return fmt::format("c{}", c.get<int>());
  }
  if (const auto& r = dig(level, {"rate"}); r.is_number()) {
    return fmt::format("r{:g}", r.get<double>());
  }
  return "";
}

// A trial's load points in its result's order, each the mean over its repeats.
std::vector<ParetoPoint> curve_of(const std::string& variant, const json& levels) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> samples;
  for (const auto& level : levels) {
    const auto label = label_of(level);
    const auto& total = dig(level, {"metrics", "output_tok_s"});
    const auto& tpot = dig(level, {"metrics", "tpot_p50_ms"});
    if (label.empty() || !total.is_number() || !tpot.is_number() || !(tpot.get<double>() > 0)) {
      continue;
    }
    if (!samples.contains(label)) {
      order.push_back(label);
    }
    samples[label].first.push_back(total.get<double>());
    samples[label].second.push_back(bench::per_user_tok_s(tpot.get<double>()));
  }
  std::vector<ParetoPoint> out;
  for (const auto& label : order) {
    const auto& [total, per_user] = samples[label];
    out.push_back(ParetoPoint{variant, label, *mean_of(total), *mean_of(per_user)});
  }
  return out;
}

} // namespace

std::optional<TuningSection> tuning_section(const RunData& data) {
  if (!data.tune.is_object()) {
    return std::nullopt;
  }
  TuningSection out;
  out.recommendation = data.tune.value("recommendation", "");
  out.crossover = data.tune.value("crossover", "");
  out.stopped = data.tune.value("stopped", "");
  out.load = data.tune.value("load", "");
  out.trials = data.tune.value("trials", 0);
  out.grid = data.tune.value("grid", 0);
  for (const auto& [variant, result] : data.results) {
    if (status_of(result) != VariantStatus::ok) {
      continue;
    }
    auto curve = curve_of(variant, dig(result, {"benchmarks", out.load, "levels"}));
    if (!curve.empty()) {
      out.curves.emplace_back(variant, std::move(curve));
    }
  }
  // The front: points no other point beats on both axes, by total tok/s.
  std::vector<ParetoPoint> all;
  for (const auto& [variant, curve] : out.curves) {
    all.insert(all.end(), curve.begin(), curve.end());
  }
  for (const auto& p : all) {
    const bool beaten = std::any_of(all.begin(), all.end(), [&](const ParetoPoint& q) {
      return q.total_tok_s >= p.total_tok_s && q.per_user_tok_s >= p.per_user_tok_s &&
             (q.total_tok_s > p.total_tok_s || q.per_user_tok_s > p.per_user_tok_s);
    });
    if (!beaten) {
      out.front.push_back(p);
    }
  }
  std::sort(out.front.begin(), out.front.end(),
            [](const ParetoPoint& a, const ParetoPoint& b) { return a.total_tok_s < b.total_tok_s; });
  return out;
}

std::string tuning_markdown(const TuningSection& tuning) {
  std::string out = "## Tuning\n\n";
  out += fmt::format("{} of {} configurations measured; {}.\n\n", tuning.trials, tuning.grid, tuning.stopped);
  out += fmt::format("**Recommendation:** {}\n\n", tuning.recommendation);
  if (!tuning.crossover.empty()) {
    out += fmt::format("**Crossover:** {}\n\n", tuning.crossover);
  }
  if (!tuning.front.empty()) {
    out += "Pareto front (no other trial's load point is ahead on both):\n\n";
    out += "| trial | load | total tok/s | per-user tok/s |\n| --- | --- | ---: | ---: |\n";
    for (const auto& p : tuning.front) {
      out += fmt::format("| {} | {} | {:.1f} | {:.1f} |\n", p.variant, p.point, p.total_tok_s, p.per_user_tok_s);
    }
  }
  return out;
}

std::string tuning_svg(const TuningSection& tuning) {
  svg::LineChart chart{.title = "Per-user tok/s against total tok/s, " + tuning.load,
                       .x_label = "total output tok/s",
                       .y_label = "per-user tok/s (1000 / median TPOT)",
                       .unit = "tok/s",
                       .x_scale = svg::ScaleKind::linear,
                       .x_ticks = {},
                       .series = {},
                       .legend_dashes = false};
  double high = 0;
  int style = 0;
  for (const auto& [variant, curve] : tuning.curves) {
    svg::Series series{.name = variant, .points = {}, .style = style++, .dash = svg::Dash::solid, .in_legend = true};
    for (const auto& p : curve) {
      series.points.push_back({p.total_tok_s, p.per_user_tok_s});
      high = std::max(high, p.total_tok_s);
    }
    chart.series.push_back(std::move(series));
  }
  svg::Series front{.name = "Pareto front", .points = {}, .style = style, .dash = svg::Dash::dashed, .in_legend = true};
  for (const auto& p : tuning.front) {
    front.points.push_back({p.total_tok_s, p.per_user_tok_s});
  }
  chart.series.push_back(std::move(front));
  for (double t : svg::nice_ticks(0, high)) {
    chart.x_ticks.push_back({t, fmt::format("{:g}", t)});
  }
  return svg::render(chart);
}

} // namespace specctl::report::detail
