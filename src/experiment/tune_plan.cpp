// `specctl plan` of a tuning file: the space and the number of model loads the
// search needs, from the search itself replayed against made-up measurements.

#include <specctl/experiment/plan.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <random>

namespace specctl::experiment {

namespace {

// Random landscapes averaged for the expected number of trials.
constexpr int k_landscapes = 50;

// How many configurations the search asks for when `figure` gives every measurement.
int trials_asked(const tune::Space& space, const tune::Options& options,
                 const std::function<tune::Figure(const tune::Config&, std::size_t)>& figure) {
  tune::Measured measured;
  for (int guard = 0; guard <= options.max_loads; ++guard) {
    auto step = tune::next_step(space, measured, options);
    if (!step.launch) {
      break;
    }
    std::vector<tune::Figure> figures;
    for (std::size_t p = 0; p < options.points; ++p) {
      figures.push_back(figure(*step.launch, p));
    }
    measured[*step.launch] = std::move(figures);
  }
  return static_cast<int>(measured.size());
}

std::string whole_seconds(util::Duration d) {
  return util::format_duration(std::chrono::round<std::chrono::seconds>(d));
}

// The time from the trials measured before, or that there are none and the bound stands.
std::string history_line(const TunePlan& tp, const TuneSpec& spec, const std::string& dir) {
  if (tp.measured == 0) {
    return fmt::format("from history: none (no earlier run in {} recorded a trial's duration); the bound above "
                       "stands\n",
                       dir);
  }
  // Capped at the time budget plus one trial: say so rather than print a product that does not add up.
  auto cap = [&](util::Duration d, util::Duration uncapped) {
    return d < uncapped && spec.max_time ? fmt::format("{} (the time budget and one trial)", whole_seconds(d))
                                         : whole_seconds(d);
  };
  return fmt::format("from history ({} configuration{} measured before in {}: {} on average, {} the longest): about "
                     "{} for {:.1f} trials, at most {} for {}\n",
                     tp.measured, tp.measured == 1 ? "" : "s", dir, whole_seconds(tp.measured_mean),
                     whole_seconds(tp.measured_longest),
                     cap(tp.expected_time, std::chrono::round<util::Duration>(tp.measured_mean * tp.expected)),
                     tp.expected, cap(tp.worst_time, tp.measured_longest * tp.worst), tp.worst);
}

} // namespace

TunePlan make_tune_plan(const Plan& plan) {
  const auto& experiment = *plan.experiment;
  TunePlan out;
  if (!experiment.tune) {
    return out;
  }
  const auto& spec = *experiment.tune;
  const auto space = spec.space();
  const auto* load = experiment.find_benchmark(spec.load);
  std::size_t points =
      load == nullptr ? 1 : std::max<std::size_t>(1, std::max(load->levels.size(), load->rates.size()));
  const tune::Options options{points, spec.noise_pct / 100.0, spec.max_loads};
  out.grid = space.grid().size();
  out.worst = static_cast<int>(std::min<std::size_t>(out.grid, static_cast<std::size_t>(spec.max_loads)));
  // No move pays: the start is ahead of every other configuration by far.
  const auto start = space.start();
  out.fewest = trials_asked(space, options, [&](const tune::Config& c, std::size_t) {
    return tune::Figure{c == start ? 2.0 : 1.0, 0, true};
  });
  std::mt19937 random(19);
  std::uniform_real_distribution<double> draw(1.0, 2.0);
  double sum = 0;
  for (int k = 0; k < k_landscapes; ++k) {
    std::map<std::pair<tune::Config, std::size_t>, double> landscape;
    sum += trials_asked(space, options, [&](const tune::Config& c, std::size_t p) {
      auto [it, added] = landscape.try_emplace({c, p}, 0.0);
      if (added) {
        it->second = draw(random);
      }
      return tune::Figure{it->second, 0, true};
    });
  }
  out.expected = sum / k_landscapes;
  for (const auto& planned : plan.variants) {
    out.per_trial = std::max(out.per_trial, planned.estimate.total());
  }
  out.bound = out.per_trial * out.worst;
  if (spec.max_time) {
    out.bound = std::min(out.bound, *spec.max_time + out.per_trial);
  }
  if (plan.history && !plan.history->durations.empty()) {
    const auto& history = *plan.history;
    out.measured = static_cast<int>(history.durations.size());
    out.measured_mean = history.mean();
    out.measured_longest = history.longest();
    out.expected_time = std::chrono::round<util::Duration>(out.measured_mean * out.expected);
    out.worst_time = out.measured_longest * out.worst;
    // The search stops once the trials' durations reach the time budget: one trial may pass it.
    if (spec.max_time) {
      out.expected_time = std::min(out.expected_time, *spec.max_time + out.measured_mean);
      out.worst_time = std::min(out.worst_time, *spec.max_time + out.measured_longest);
    }
  }
  return out;
}

nlohmann::ordered_json tune_plan_to_json(const TunePlan& tp) {
  auto seconds = [](util::Duration d) { return std::chrono::duration<double>(d).count(); };
  nlohmann::ordered_json out = {{"grid", tp.grid},
                                {"fewest", tp.fewest},
                                {"expected", tp.expected},
                                {"worst", tp.worst},
                                {"per_trial_s", seconds(tp.per_trial)},
                                {"bound_s", seconds(tp.bound)}};
  out["history"] = tp.measured == 0 ? nlohmann::ordered_json()
                                    : nlohmann::ordered_json{{"measured", tp.measured},
                                                             {"mean_s", seconds(tp.measured_mean)},
                                                             {"longest_s", seconds(tp.measured_longest)},
                                                             {"expected_s", seconds(tp.expected_time)},
                                                             {"worst_s", seconds(tp.worst_time)}};
  return out;
}

std::string format_tune_plan(const Plan& plan) {
  const auto& experiment = *plan.experiment;
  const auto& spec = *experiment.tune;
  auto tp = make_tune_plan(plan);
  std::string out = fmt::format("tuning {} ({})\n", experiment.name, experiment.file);
  out += "space:\n";
  for (const auto& d : spec.dimensions) {
    std::string values = d.ordered ? fmt::format("{}..{} (searched as unimodal)", d.values.front(), d.values.back())
                                   : util::join(d.values, ", ");
    std::string where = d.where_knob.empty()
                            ? ""
                            : fmt::format(", only where {} is {}", d.where_knob, util::join(d.where_values, " or "));
    out +=
        fmt::format("  {}: {}; starts at {}{}\n", d.knob, values, d.start.empty() ? d.values.front() : d.start, where);
  }
  const auto* load = experiment.find_benchmark(spec.load);
  out += fmt::format("load: benchmark \"{}\": {}\n", spec.load, load != nullptr ? load->describe() : "");
  std::vector<std::string> slo;
  for (const auto& [metric, bound] : spec.slo) {
    slo.push_back(fmt::format("{} ≤ {:g}", metric, bound));
  }
  out += fmt::format("slo: {}\n", slo.empty() ? "none" : util::join(slo, ", "));
  out += fmt::format("objective: {} per load point; differences under {:g}% or inside the intervals are ties\n",
                     objective_name(spec.objective), spec.noise_pct);
  if (!plan.variants.empty()) {
    out += fmt::format("start: {} (the baseline)\n  command: {}\n", plan.variants.front().variant->name,
                       plan.variants.front().launch.shell_line());
  }
  out += fmt::format("trials (model loads): {} configurations in the grid; the search launches {} when no move "
                     "pays, {:.1f} on average over random landscapes, at most {} (budget {})\n",
                     tp.grid, tp.fewest, tp.expected, tp.worst, spec.max_loads);
  out += fmt::format("estimate: at most {} per trial, {} for the tuning{}\n", util::format_duration(tp.per_trial),
                     util::format_duration(tp.bound),
                     spec.max_time ? fmt::format(" (time budget {})", util::format_duration(*spec.max_time)) : "");
  if (plan.history) {
    out += history_line(tp, spec, plan.history->dir);
  }
  return out;
}

} // namespace specctl::experiment
