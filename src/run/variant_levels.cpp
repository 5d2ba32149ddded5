// A concurrency or rate benchmark: every level once, then every level again for
// each repeat; with an SLO, each level's goodput and whether it met the SLO; with
// `bisect:`, the search for the highest request rate that meets it, within the
// same server launch (as vLLM's `bench sweep serve_sla` does it).

#include "bench_tally.hpp"
#include "variant_run.hpp"

#include <specctl/bench/breakdown.hpp>
#include <specctl/bench/report.hpp>
#include <specctl/experiment/workload_spec.hpp>
#include <specctl/report/results.hpp>
#include <specctl/report/slo.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

namespace specctl::run::detail {

namespace {

// One level of the benchmark: a concurrency level or a request rate, listed or bisected.
struct LevelPoint {
  int level = 0;
  double rate = 0;
  bool search = false;
};

// Why a benchmark's levels stopped before their end; empty when they did not.
std::string stop_reason(const BenchTally& tally, bool timed_out) {
  return tally.died ? "the server died" : tally.interrupted ? "interrupted" : timed_out ? "out of time" : "";
}

// What a rate's measurements that ran to their end say of the SLO: met, or what missed.
std::vector<std::string> judge(const std::vector<json>& measurements, const report::Slo& slo, double max_failed_pct) {
  std::vector<const json*> metrics;
  for (const auto& m : measurements) {
    metrics.push_back(&m);
  }
  return report::slo_missed(metrics, slo, max_failed_pct);
}

} // namespace

void VariantRun::run_levels(const experiment::BenchmarkSpec& spec, ordered& entry, ServerWatch& watch,
                            BenchTally& tally) {
  const bool rate = spec.kind == experiment::BenchmarkKind::rate;
  const std::size_t count = rate ? spec.rates.size() : spec.levels.size();
  const int repeats = std::max(spec.repeats, 1);
  const double max_failed_pct = m_s.experiment.report.max_failed_pct;
  entry["repeats"] = repeats;
  entry["levels"] = ordered::array();
  auto common = common_options(spec, m_phase, &entry["workload"]);
  tally.categories = bench::categories_of(common.prompts);
  tally.honesty.workload(common.prompts);
  common.stop = watch.stop_flag();
  common.on_request_failed = [&](bench::FailureKind kind) { watch.poke(kind); };
  common.hold = watch.hold_flag();
  bool timed_out = false;
  // Prompts of exact lengths go verbatim (a prefix of their own would change their
  // length): each level and repeat after the first draws its own, seed + its place,
  // so none finds the last one's prompts in the server's prefix cache.
  const bool redraw =
      !spec.unique_prompts && spec.prompts.workload && experiment::exact_lengths(*spec.prompts.workload);
  if (redraw && (count + static_cast<std::size_t>(spec.bisect)) * static_cast<std::size_t>(repeats) > 1) {
    entry["workload"]["redrawn"] = "each level and repeat sends its own draw: the seed plus seed_offset";
  }
  // Each rate's metrics from measurements that ran to their end: what the SLO is judged on.
  std::map<double, std::vector<json>> measured;

  // Measures one level once, `place` its seed offset among all the benchmark's
  // measurements. False when the benchmark must end: interrupted, the server died,
  // or out of time; what was measured is kept.
  auto measure = [&](const LevelPoint& point, int r, std::uint64_t place, bool first) {
    if (stopped()) {
      tally.interrupted = true;
      return false;
    }
    // One level at a time, so the server's log can be read for each level's window.
    Window window;
    std::vector<bench::LevelResult> levels;
    bench::Ended ended = bench::Ended::normally;
    auto level_common = common;
    level_common.warmup = first ? spec.warmup : 0;
    level_common.prompt_tag = fmt::format("{} r{}", spec.name, r);
    const TelemetryLabel label{spec.name,
                               rate ? (std::isfinite(point.rate) ? fmt::format("r{:g}", point.rate) : "rinf")
                                    : fmt::format("c{}", point.level),
                               r};
    level_common.on_measured_start = [&] { window = open_window(label); };
    if (redraw && place > 0) {
      auto drawn = bench::make_workload(bench::with_seed_offset(*spec.prompts.workload, place));
      if (!drawn) {
        throw PhaseFailure{m_phase, drawn.error()};
      }
      calibrate(drawn->requests, level_common.request);
      level_common.prompts = std::move(drawn->requests);
    }
    const std::string repeat_text = repeats > 1 ? fmt::format(" #{}", r) : "";
    const std::string search_text = point.search ? " (SLO search)" : "";
    const auto on_window = [&](const ClientWindow& w) { window = client_window(w, label); };
    if (rate) {
      // A schedule of its own for every level and repeat, the same on every run of the experiment.
      const auto duration = std::chrono::duration_cast<std::chrono::milliseconds>(spec.duration);
      bench::RateOptions options{level_common, {point.rate}, duration, spec.max_concurrency, spec.burstiness, place};
      auto result = client().rate(spec, options, watch, on_window);
      levels = std::move(result.levels);
      ended = result.ended;
    } else {
      bench::ConcurrencyOptions options{level_common, {point.level}, spec.requests};
      auto result = client().concurrency(spec, options, watch, on_window);
      levels = std::move(result.levels);
      ended = result.ended;
    }
    entry["client"] = client().describe(spec);
    if (auto death = watch.death()) {
      tally.died.emplace(rate ? fmt::format("{} at rate {:g}{}{}", m_phase, point.rate, search_text, repeat_text)
                              : fmt::format("{} at c{}{}", m_phase, point.level, repeat_text),
                         *death);
    }
    tally.interrupted = ended == bench::Ended::interrupted && !tally.died;
    for (auto& level : levels) {
      ordered item;
      item["concurrency"] = rate ? (spec.max_concurrency ? *spec.max_concurrency : level.concurrency) : point.level;
      if (rate) {
        item["rate"] = report::finite_or_null(point.rate);
      }
      item["repeat"] = r;
      if (point.search) {
        item["search"] = true;
      }
      if (redraw) {
        item["seed_offset"] = place;
      }
      json metrics = report::level_metrics(level);
      if (!spec.slo.empty()) {
        report::add_slo_metrics(metrics, level, spec.slo, max_failed_pct);
        // A measurement cut short says nothing of the SLO (its requests failed as interrupted).
        if (rate && spec.bisect > 0 && ended == bench::Ended::normally && !tally.died) {
          measured[point.rate].push_back(metrics);
        }
      }
      item["metrics"] = std::move(metrics);
      close_window(window, item, level);
      add_categories(item, level, tally.categories, tally.accepts);
      item["result"] = bench::to_json(level);
      tally.count(level);
      const std::string what = rate ? fmt::format("rate {:g}", point.rate) : fmt::format("concurrency {}", point.level);
      requests_jsonl(level, what + search_text + repeat_text, tally.requests);
      write_vllm_level(spec,
                       (rate ? (std::isfinite(point.rate) ? fmt::format("r{:g}", point.rate) : "rinf")
                             : fmt::format("c{}", point.level)) +
                           (repeats > 1 ? fmt::format("-rep{}", r) : ""),
                       level);
      tally.honesty.add(level);
      entry["levels"].push_back(std::move(item));
    }
    if (ended == bench::Ended::timed_out) {
      warn(fmt::format("benchmark \"{}\" reached its time limit of {}; later levels did not run", spec.name,
                       util::format_duration(spec.timeout)));
      timed_out = true;
    }
    return !tally.interrupted && !tally.died && !timed_out;
  };

  // Every level once, then every level again: drift over the benchmark (a
  // warming GPU, a filling cache) spreads over all levels instead of landing on one.
  bool going = true;
  for (int r = 1; r <= repeats && going; ++r) {
    for (std::size_t i = 0; i < count && going; ++i) {
      LevelPoint point{rate ? 0 : spec.levels[i], rate ? spec.rates[i] : 0, false};
      going = measure(point, r, static_cast<std::uint64_t>(r - 1) * count + i, r == 1 && i == 0);
    }
  }
  if (spec.bisect <= 0 || !rate) {
    return;
  }

  // The SLO search: each rate judged on the mean over its repeats; the listed rates
  // first, then up to `bisect` more between the highest that met and the lowest
  // higher one that missed, each measured `repeats` times in a row.
  std::vector<report::SloPoint> judged;
  ordered steps = ordered::array();
  auto add_step = [&](double at, bool search) {
    auto it = measured.find(at);
    if (it == measured.end() || it->second.empty()) {
      return;
    }
    auto missed = judge(it->second, spec.slo, max_failed_pct);
    judged.push_back({at, missed.empty()});
    steps.push_back({{"rate", at}, {"met", missed.empty()}, {"search", search}, {"missed", missed}});
  };
  for (double listed : spec.rates) {
    if (std::none_of(judged.begin(), judged.end(), [&](const report::SloPoint& p) { return p.rate == listed; })) {
      add_step(listed, false);
    }
  }
  const bool listed_complete = going;
  int left = spec.bisect;
  auto search = report::search_slo(judged, left);
  for (int step = 0; going && search.next; ++step) {
    const LevelPoint point{0, *search.next, true};
    for (int r = 1; r <= repeats && going; ++r) {
      const auto place = static_cast<std::uint64_t>(repeats) * count +
                         static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(repeats) +
                         static_cast<std::uint64_t>(r - 1);
      going = measure(point, r, place, false);
    }
    // A rate whose repeats did not all run is not judged: its mean is of fewer.
    if (going) {
      add_step(point.rate, true);
    }
    search = report::search_slo(judged, --left);
  }
  // The measurements kept are judged as ever; the reason says why the search is short.
  std::string why = search.why;
  if (const auto reason = stop_reason(tally, timed_out); !listed_complete) {
    why = fmt::format("not every listed rate was measured ({}): {}", reason, search.why);
  } else if (!going && search.max_rate && search.missed_at) {
    why = fmt::format("the search ended early ({}): the highest rate that meets the SLO is between {:g} and {:g} req/s",
                      reason, *search.max_rate, *search.missed_at);
  } else if (!going) {
    why = fmt::format("the search ended early ({}): {}", reason, search.why);
  }
  const auto rate_or_null = [](const std::optional<double>& r) { return r ? ordered(*r) : ordered(nullptr); };
  entry["slo_search"] = {{"max_rate", rate_or_null(search.max_rate)},
                         {"missed_at", rate_or_null(search.missed_at)},
                         {"steps", std::move(steps)},
                         {"why", why}};
}

} // namespace specctl::run::detail
