#pragma once

#include <specctl/experiment/experiment.hpp>
#include <specctl/server/render.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace specctl::experiment {

// Upper bounds for one variant, if every wait runs to its timeout.
struct VariantEstimate {
  util::Duration cleanup{0};
  util::Duration load{0};
  util::Duration benchmarks{0};
  util::Duration teardown{0};

  util::Duration total() const { return cleanup + load + benchmarks + teardown; }
};

struct PlannedVariant {
  const Variant* variant = nullptr;
  server::LaunchCommand launch;
  VariantEstimate estimate;
};

// The variants one host would run, in order, if every variant took its upper bound.
struct HostSchedule {
  std::string host;
  // Indices into Plan::variants.
  std::vector<std::size_t> variants;
  util::Duration busy{0};
};

// What earlier runs of an experiment took: the newest duration that each variant which
// ended ok recorded in a result folder of `dir` (report::read_history reads them).
struct History {
  std::string dir;
  std::map<std::string, util::Duration> durations;

  // The time of `variants` one after another: their recorded durations, and the mean of
  // those for the ones without; nullopt when none of them has one.
  std::optional<util::Duration> estimate(const std::vector<std::string>& variants) const;
  util::Duration mean() const;
  util::Duration longest() const;
};

// What `specctl run` would do, in run order, without touching any host.
struct Plan {
  const Experiment* experiment = nullptr;
  std::vector<PlannedVariant> variants;
  // Per machine, as the runner's queue would hand variants out: each to the
  // first of its hosts (its own, or its pool's members) to become free.
  std::vector<HostSchedule> schedule;
  // Set by the caller when earlier runs are known (make_plan reads no result folder):
  // the plan then adds the time from history to the bound from timeouts.
  std::optional<History> history;

  // The sum of the variants' bounds: one host, one variant after another.
  util::Duration total() const;
  // The longest host's schedule: the sweep's bound with its hosts working at once.
  util::Duration makespan() const;
};

Plan make_plan(const Experiment& experiment, const server::RenderOptions& options);

// The list schedule of some of a plan's variants (indices into `variants`), as
// the runner's queue hands them out: each to the first of its hosts to be free.
std::vector<HostSchedule> make_schedule(const Experiment& experiment, const std::vector<PlannedVariant>& variants,
                                        const std::vector<std::size_t>& which);

// The plan for people: every variant's exact command, environment, cleanup, readiness and benchmarks.
std::string format_plan(const Plan& plan);
// Its "history" (only when the plan has one) is what format_plan says from it.
nlohmann::ordered_json plan_to_json(const Plan& plan);

// What `specctl tune` would do with a tuning file: the space, and how many trials
// (model loads) the search takes: the fewest (no move pays: one pass over the knobs),
// the mean over random landscapes (each configuration's figures drawn at random,
// seeded), and the worst case (the budget, or the whole grid when smaller).
struct TunePlan {
  std::size_t grid = 0;
  int fewest = 0;
  double expected = 0;
  int worst = 0;
  // The slowest trial's bound, and the tuning's: the worst case of trials one after another.
  util::Duration per_trial{0};
  util::Duration bound{0};
  // From the configurations earlier runs measured (Plan::history), when any did: the
  // expected trials times their mean duration, and the most trials times the longest,
  // each capped like the bound at the time budget plus one trial.
  int measured = 0;
  util::Duration measured_mean{0};
  util::Duration measured_longest{0};
  util::Duration expected_time{0};
  util::Duration worst_time{0};
};
TunePlan make_tune_plan(const Plan& plan);
std::string format_tune_plan(const Plan& plan);
nlohmann::ordered_json tune_plan_to_json(const TunePlan& tune_plan);

// "local", "ssh", "pool", "slurm": the names plans and results use.
std::string host_kind_name(HostKind kind);

// "kill processes named sglang::*, python* ..." : the cleanup a variant will do, in one sentence.
std::string describe_cleanup(const Variant& variant, const HostSpec& host);

} // namespace specctl::experiment
