#pragma once

#include <specctl/experiment/experiment.hpp>
#include <specctl/server/render.hpp>

#include <nlohmann/json.hpp>
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

// What `specctl run` would do, in run order, without touching any host.
struct Plan {
  const Experiment* experiment = nullptr;
  std::vector<PlannedVariant> variants;
  // Per machine, as the runner's queue would hand variants out: each to the
  // first of its hosts (its own, or its pool's members) to become free.
  std::vector<HostSchedule> schedule;

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
};
TunePlan make_tune_plan(const Plan& plan);
std::string format_tune_plan(const Plan& plan);

// "local", "ssh", "pool", "slurm": the names plans and results use.
std::string host_kind_name(HostKind kind);

// "kill processes named sglang::*, python* ..." : the cleanup a variant will do, in one sentence.
std::string describe_cleanup(const Variant& variant, const HostSpec& host);

} // namespace specctl::experiment
