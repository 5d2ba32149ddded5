// `specctl tune`'s figures and answer: each trial's load points read from its
// result.json, the best configuration per point, the crossover where speculation
// stops paying, and the recommendation in words (tuned.yaml: tuned_yaml.cpp).

#include <specctl/report/results.hpp>
#include <specctl/report/slo.hpp>
#include <specctl/report/stats.hpp>
#include <specctl/run/tuning.hpp>
#include <specctl/util/error.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::run {

namespace {

using json = nlohmann::json;
using experiment::BenchmarkKind;

const experiment::BenchmarkSpec& load_of(const experiment::Experiment& experiment) {
  const auto* load = experiment.tune ? experiment.find_benchmark(experiment.tune->load) : nullptr;
  if (load == nullptr) {
    throw Error(fmt::format("{}: not a tuning file (no tune: block with a load)", experiment.file),
                ErrorKind::bad_input);
  }
  return *load;
}

std::optional<double> number_at(const json& j, std::initializer_list<std::string_view> keys) {
  const auto& v = report::dig(j, keys);
  return v.is_number() && std::isfinite(v.get<double>()) ? std::optional(v.get<double>()) : std::nullopt;
}

bool same_point(const json& level, const experiment::BenchmarkSpec& load, std::size_t i) {
  if (load.kind == BenchmarkKind::rate) {
    auto rate = number_at(level, {"rate"});
    return rate && std::abs(*rate - load.rates[i]) < 1e-9;
  }
  auto c = number_at(level, {"concurrency"});
  return c && static_cast<int>(*c) == load.levels[i];
}

bool speculates(const experiment::Experiment& experiment, const tune::Config& config) {
  if (!experiment.tune || !experiment.tune->speculation) {
    return false;
  }
  auto it = config.find(*experiment.tune->speculation);
  return it != config.end() && it->second != "none";
}

// "eagle3, 2 steps": the configuration as the recommendation names it.
std::string config_words(const experiment::Experiment& experiment, const tune::Config& config) {
  std::vector<std::string> parts;
  for (const auto& d : experiment.tune->dimensions) {
    auto it = config.find(d.knob);
    if (it == config.end()) {
      continue;
    }
    if (experiment.tune->speculation && d.knob == *experiment.tune->speculation) {
      parts.push_back(it->second == "none" ? "no speculation" : it->second);
    } else {
      parts.push_back(fmt::format("{} {}", d.knob, it->second));
    }
  }
  return parts.empty() ? "the start configuration" : util::join(parts, ", ");
}

std::string signed_pct(double ratio) {
  return fmt::format("{:+.0f}%", (ratio - 1) * 100);
}

// "c ≤ 5", "c 10-30", "c ≥ 70", "every load".
std::string range_words(const std::vector<std::string>& labels, std::size_t first, std::size_t last) {
  auto value = [&](std::size_t i) { return labels[i].substr(1); };
  const std::string unit = labels[first].substr(0, 1) == "r" ? "rate" : "c";
  const std::string suffix = unit == "rate" ? "/s" : "";
  if (first == 0 && last + 1 == labels.size()) {
    return "every load";
  }
  if (first == 0) {
    return fmt::format("{} ≤ {}{}", unit, value(last), suffix);
  }
  if (last + 1 == labels.size()) {
    return fmt::format("{} ≥ {}{}", unit, value(first), suffix);
  }
  return first == last ? fmt::format("{} {}{}", unit, value(first), suffix)
                       : fmt::format("{} {}-{}{}", unit, value(first), value(last), suffix);
}

// The bounds a load point is judged on. Goodput has counted each request against the
// per-request bounds already, so a level is held only to those with no per-request
// meaning (itl_*) and to its failures: a level whose p99 TTFT is over still has goodput.
report::Slo judged_bounds(const experiment::TuneSpec& spec) {
  if (spec.objective != experiment::TuneObjective::goodput) {
    return spec.slo;
  }
  report::Slo out;
  std::copy_if(spec.slo.begin(), spec.slo.end(), std::back_inserter(out),
               [](const auto& bound) { return bound.first.starts_with("itl_"); });
  return out;
}

// The max rate point from the benchmark's slo_search (variant_levels.cpp writes it).
void read_max_rate(const json& search, TrialPoint& point) {
  if (!search.is_object()) {
    point.slo_missed.push_back("not measured");
    return;
  }
  if (auto max_rate = number_at(search, {"max_rate"})) {
    point.samples.push_back(*max_rate);
    point.missed_at = number_at(search, {"missed_at"}).value_or(*max_rate);
    return;
  }
  point.slo_missed.push_back(search.value("why", std::string("no rate met the SLO")));
}

// "highest rate within the SLO: eagle3 at 8.15 req/s (it missed at 11.1; 1.34x no speculation)".
std::string max_rate_words(const experiment::Experiment& experiment, const PointVerdict& v) {
  if (!v.best) {
    return "highest rate within the SLO: none, no configuration met it at the lowest rate";
  }
  const auto& point = v.best->points.back();
  const double rate = point.samples.front();
  std::vector<std::string> notes;
  notes.push_back(point.missed_at && *point.missed_at > rate ? fmt::format("it missed at {:g}", *point.missed_at)
                                                             : "no rate measured missed it");
  if (v.ratio) {
    notes.push_back(fmt::format("{:.2f}x the best rate {}", *v.ratio,
                                speculates(experiment, v.best->config) ? "without speculation" : "with speculation"));
  }
  if (v.tie) {
    notes.push_back("inconclusive: the runner-up is within the bisection's resolution");
  }
  return fmt::format("highest rate within the SLO: {} at {:g} req/s ({})", config_words(experiment, v.best->config),
                     rate, util::join(notes, "; "));
}

} // namespace

tune::Figure TrialPoint::figure() const {
  if (samples.empty()) {
    return tune::Figure{0, 0, false};
  }
  if (missed_at) {
    // The interval is the bracket itself, [met, missed]: two brackets apart are a difference.
    const double gap = std::max(0.0, *missed_at - samples.front());
    return tune::Figure{samples.front() + gap / 2, gap / 2, slo_missed.empty()};
  }
  auto spread = report::spread_of(samples);
  double half =
      spread.n >= 2 ? report::student_t_quantile(0.975, spread.n - 1) * spread.stdev / std::sqrt(spread.n) : 0;
  return tune::Figure{spread.mean, half, slo_missed.empty()};
}

std::vector<std::string> load_points(const experiment::Experiment& experiment) {
  const auto& load = load_of(experiment);
  std::vector<std::string> out;
  if (load.kind == BenchmarkKind::rate) {
    for (double r : load.rates) {
      out.push_back(fmt::format("r{:g}", r));
    }
    if (load.bisect > 0) {
      out.emplace_back(k_max_rate_point);
    }
  } else {
    for (int c : load.levels) {
      out.push_back(fmt::format("c{}", c));
    }
  }
  return out;
}

tune::Options search_options(const experiment::Experiment& experiment) {
  return tune::Options{load_points(experiment).size(), experiment.tune->noise_pct / 100.0, experiment.tune->max_loads};
}

std::optional<Trial> read_trial(const json& result, const experiment::Experiment& experiment,
                                const tune::Config& config) {
  const auto& load = load_of(experiment);
  const auto& spec = *experiment.tune;
  Trial trial;
  trial.config = config;
  trial.variant = spec.trial_of(config);
  if (!result.contains("status")) {
    return std::nullopt;
  }
  trial.status = report::status_of(result);
  trial.duration_s = number_at(result, {"duration_s"}).value_or(0);
  const std::size_t points = load.kind == BenchmarkKind::rate ? load.rates.size() : load.levels.size();
  trial.points.resize(load_points(experiment).size());
  if (trial.status == report::VariantStatus::failed) {
    for (auto& p : trial.points) {
      p.slo_missed.push_back("the trial failed: " + result.value("reason", std::string("no reason recorded")));
    }
    return trial;
  }
  if (trial.status != report::VariantStatus::ok) {
    return std::nullopt;
  }
  const auto& levels = report::dig(result, {"benchmarks", load.name, "levels"});
  for (std::size_t i = 0; i < points; ++i) {
    auto& point = trial.points[i];
    std::vector<const json*> measured;
    if (levels.is_array()) {
      for (const auto& level : levels) {
        if (level.is_object() && same_point(level, load, i)) {
          measured.push_back(&level);
        }
      }
    }
    std::vector<const json*> metrics;
    for (const auto* level : measured) {
      const auto& m = report::dig(*level, {"metrics"});
      std::optional<double> sample = number_at(m, {experiment::objective_metric(spec.objective)});
      if (sample && spec.objective == experiment::TuneObjective::per_user_tok_s) {
        sample = bench::per_user_tok_s(*sample);
      }
      if (sample && std::isfinite(*sample)) {
        point.samples.push_back(*sample);
      }
      metrics.push_back(&m);
    }
    if (point.samples.empty()) {
      point.slo_missed.push_back("not measured");
      continue;
    }
    // The benchmark's own judgement of a level, over the repeats: one owner for what meets an SLO.
    point.slo_missed = report::slo_missed(metrics, judged_bounds(spec), experiment.report.max_failed_pct);
  }
  if (trial.points.size() > points) {
    read_max_rate(report::dig(result, {"benchmarks", load.name, "slo_search"}), trial.points.back());
  }
  return trial;
}

tune::Measured measured_of(const std::vector<Trial>& trials) {
  tune::Measured measured;
  for (const auto& t : trials) {
    std::vector<tune::Figure> figures;
    for (const auto& p : t.points) {
      figures.push_back(p.figure());
    }
    measured[t.config] = std::move(figures);
  }
  return measured;
}

TuneAnswer make_answer(const experiment::Experiment& experiment, const std::vector<Trial>& trials,
                       const std::string& why_stopped) {
  TuneAnswer out;
  const auto labels = load_points(experiment);
  const auto options = search_options(experiment);
  const auto space = experiment.tune->space();
  const tune::Measured measured = measured_of(trials);
  std::map<tune::Config, const Trial*> by_config;
  for (const auto& t : trials) {
    by_config[t.config] = &t;
  }
  out.trials = static_cast<int>(trials.size());
  out.grid = static_cast<int>(space.grid().size());
  out.why_stopped = why_stopped;
  auto answers = tune::answer(space, measured, options);
  for (std::size_t p = 0; p < labels.size(); ++p) {
    PointVerdict v;
    v.point = labels[p];
    const auto& a = answers[p];
    if (a.best) {
      v.best = *by_config.at(*a.best);
    }
    if (a.runner_up) {
      v.runner_up = *by_config.at(*a.runner_up);
    }
    v.tie = a.tie;
    if (v.best && experiment.tune->speculation) {
      // Against the best measured configuration of the other kind at this point.
      const bool spec = speculates(experiment, v.best->config);
      const Trial* other = nullptr;
      for (const auto& t : trials) {
        if (speculates(experiment, t.config) != spec && !t.points[p].samples.empty() &&
            t.points[p].slo_missed.empty() &&
            (other == nullptr || t.points[p].figure().mean > other->points[p].figure().mean)) {
          other = &t;
        }
      }
      // A figure of 0 (no request within the SLO: goodput) has no ratio to it.
      if (other != nullptr && report::spread_of(other->points[p].samples).mean > 0) {
        auto a_spread = report::spread_of(v.best->points[p].samples);
        auto b_spread = report::spread_of(other->points[p].samples);
        v.against = other->variant;
        v.ratio = a_spread.mean / b_spread.mean;
        if (auto interval = report::ratio_interval(a_spread, b_spread)) {
          v.low = interval->low;
          v.high = interval->high;
        }
      }
    }
    out.points.push_back(std::move(v));
  }

  // The recommendation: consecutive load points with the same best, in words; the
  // highest rate within the SLO (a bisecting rate load's last point) is said apart.
  const bool max_rate = !labels.empty() && labels.back() == k_max_rate_point;
  const std::vector<std::string> ranged(labels.begin(), labels.end() - (max_rate ? 1 : 0));
  std::vector<std::string> parts;
  for (std::size_t first = 0; first < ranged.size();) {
    std::size_t last = first;
    auto key = [&](std::size_t i) { return out.points[i].best ? out.points[i].best->variant : std::string(); };
    while (last + 1 < ranged.size() && key(last + 1) == key(first)) {
      ++last;
    }
    const auto& v = out.points[first];
    std::string range = range_words(ranged, first, last);
    if (!v.best) {
      parts.push_back(fmt::format("{}: no configuration meets the SLO", range));
    } else {
      std::string why;
      // Where the gap is widest within the range: the point furthest from the crossover.
      const auto& shown = speculates(experiment, v.best->config) ? out.points[first] : out.points[last];
      if (shown.ratio) {
        const bool spec = speculates(experiment, v.best->config);
        std::string interval = shown.low ? fmt::format(" [{:.2f}, {:.2f}]", *shown.low, *shown.high) : "";
        if (spec) {
          why = fmt::format(" ({}{} over no speculation at {})", signed_pct(*shown.ratio), interval, shown.point);
        } else if (*shown.ratio >= 1) {
          why =
              fmt::format(" ({:.2f}x{} the best speculative configuration at {})", *shown.ratio, interval, shown.point);
        } else {
          // Kept by the tie rule while measured lower: say so rather than print "0.63x".
          std::string inverted =
              shown.low && *shown.low > 0 ? fmt::format(" [{:.2f}, {:.2f}]", 1 / *shown.high, 1 / *shown.low) : "";
          why = fmt::format(" (the best speculative configuration measured {:.2f}x{} it at {}, within the noise)",
                            1 / *shown.ratio, inverted, shown.point);
        }
      }
      std::vector<std::string> ties;
      for (std::size_t i = first; i <= last; ++i) {
        if (out.points[i].tie) {
          ties.push_back(labels[i]);
        }
      }
      parts.push_back(fmt::format("{}: {}{}{}", range, config_words(experiment, v.best->config), why,
                                  ties.empty() ? ""
                                               : fmt::format(" (inconclusive at {}: the runner-up is within the noise)",
                                                             util::join(ties, ", "))));
    }
    first = last + 1;
  }
  if (max_rate) {
    parts.push_back(max_rate_words(experiment, out.points.back()));
  }
  out.recommendation = util::join(parts, "; ");

  if (experiment.tune->speculation) {
    std::vector<std::size_t> spec;
    std::vector<std::size_t> plain;
    for (std::size_t p = 0; p < ranged.size(); ++p) {
      if (out.points[p].best) {
        (speculates(experiment, out.points[p].best->config) ? spec : plain).push_back(p);
      }
    }
    auto names = [&](const std::vector<std::size_t>& points) {
      std::vector<std::string> out_names;
      for (auto p : points) {
        out_names.push_back(labels[p]);
      }
      return util::join(out_names, ", ");
    };
    if (spec.empty()) {
      out.crossover = "speculation pays at no load measured";
    } else if (plain.empty()) {
      out.crossover = "speculation pays at every load measured";
    } else if (spec.back() < plain.front()) {
      out.crossover = fmt::format("speculation stops paying above {} (no speculation is best from {} on)",
                                  labels[spec.back()], labels[plain.front()]);
    } else {
      out.crossover = fmt::format("speculation pays at {}, not at {}", names(spec), names(plain));
    }
  }
  return out;
}

std::string answer_markdown(const experiment::Experiment& experiment, const TuneAnswer& answer) {
  std::string out = fmt::format("# Tuning: {}\n\n", experiment.name);
  out += fmt::format("{} of {} configurations measured; {}.\n\n", answer.trials, answer.grid, answer.why_stopped);
  out += fmt::format("**Recommendation:** {}\n\n", answer.recommendation);
  if (!answer.crossover.empty()) {
    out += fmt::format("**Crossover:** {}\n\n", answer.crossover);
  }
  const auto objective = objective_name(experiment.tune->objective);
  out += fmt::format("| load | best | {} | 95% interval | runner-up | {} | vs other kind |\n", objective, objective);
  out += "| --- | --- | ---: | --- | --- | ---: | --- |\n";
  for (std::size_t p = 0; p < answer.points.size(); ++p) {
    const auto& v = answer.points[p];
    // The max rate point shows the rate that met, not its bracket's middle.
    auto shown = [&](const std::optional<Trial>& t) {
      const auto& point = t->points[p];
      return point.missed_at ? point.samples.front() : point.figure().mean;
    };
    auto figure = [&](const std::optional<Trial>& t) { return t ? t->points[p].figure() : tune::Figure{}; };
    std::string best = v.best ? v.best->variant + (v.tie ? " (tie)" : "") : "none meets the SLO";
    std::string interval = "";
    if (v.best && v.best->points[p].missed_at) {
      // The bisection's bracket: met at the first, missed at the second.
      const auto& point = v.best->points[p];
      interval = *point.missed_at > point.samples.front()
                     ? fmt::format("[{:g}, {:g})", point.samples.front(), *point.missed_at)
                     : "no rate missed";
    } else if (v.best) {
      auto f = figure(v.best);
      interval = f.half_width > 0 ? fmt::format("[{:.1f}, {:.1f}]", f.mean - f.half_width, f.mean + f.half_width)
                                  : "one sample";
    }
    std::string versus = v.ratio ? fmt::format("{:.2f}x {}{}", *v.ratio, v.against,
                                               v.low ? fmt::format(" [{:.2f}, {:.2f}]", *v.low, *v.high) : "")
                                 : "";
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", v.point, best,
                       v.best ? fmt::format("{:.1f}", shown(v.best)) : "", interval,
                       v.runner_up ? v.runner_up->variant : "",
                       v.runner_up ? fmt::format("{:.1f}", shown(v.runner_up)) : "", versus);
  }
  out += "\nConfirm with: specctl run tuned.yaml\n";
  return out;
}

json answer_json(const experiment::Experiment& experiment, const TuneAnswer& answer) {
  json points = json::array();
  for (std::size_t p = 0; p < answer.points.size(); ++p) {
    const auto& v = answer.points[p];
    auto entry = [&](const std::optional<Trial>& t) -> json {
      if (!t) {
        return nullptr;
      }
      auto f = t->points[p].figure();
      json out = {{"variant", t->variant},
                  {"config", t->config},
                  {"mean", f.mean},
                  {"half_width", f.half_width},
                  {"samples", t->points[p].samples},
                  {"slo_missed", t->points[p].slo_missed}};
      if (t->points[p].missed_at) {
        out["missed_at"] = *t->points[p].missed_at;
      }
      return out;
    };
    points.push_back({{"point", v.point},
                      {"best", entry(v.best)},
                      {"runner_up", entry(v.runner_up)},
                      {"tie", v.tie},
                      {"ratio", v.ratio ? json(*v.ratio) : json(nullptr)},
                      {"low", v.low ? json(*v.low) : json(nullptr)},
                      {"high", v.high ? json(*v.high) : json(nullptr)},
                      {"against", v.against}});
  }
  return {{"format", "specctl-tune-answer"},
          {"version", 1},
          {"objective", objective_name(experiment.tune->objective)},
          {"load", experiment.tune->load},
          {"trials", answer.trials},
          {"grid", answer.grid},
          {"stopped", answer.why_stopped},
          {"recommendation", answer.recommendation},
          {"crossover", answer.crossover},
          {"points", points}};
}

} // namespace specctl::run
