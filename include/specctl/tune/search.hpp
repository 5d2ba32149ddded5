#pragma once

// The search of `specctl tune` (issue #19): which server configuration to launch
// next, given the space and what has been measured. A launch costs a model load
// (10-15 minutes on the seeds' node) and measures every load point at once, so the
// search counts launches, not measurements.
//
// It is a replay: next_step() runs the strategy from the start on every call,
// looking each configuration up among the measured ones, and stops at the first it
// lacks. So a resumed tuning, or one handed trials measured earlier, goes on exactly
// where the measurements leave it and never launches a configuration twice.
//
// The strategy: start from every knob's start value; then, for each knob in turn and
// each configuration that is best at some load point, try the knob's other values: a
// list value by value, an ordered integer range by a golden-section search on the
// index (the objective of one load point is taken to be unimodal in it), for each load
// point that configuration is best at. A move is kept where it is better beyond the
// noise; passes repeat until one keeps nothing, or the budget of launches is spent.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace specctl::tune {

// One knob of the space and the values it takes.
struct Dimension {
  std::string knob;
  std::vector<std::string> values;
  // The values are an ordered integer range: searched as unimodal, not value by value.
  bool ordered = false;
  // The value the search starts from; empty: the first.
  std::string start;
  // The knob applies only where `where_knob` has one of `where_values` (empty: always),
  // so that configurations without meaning (steps without speculation) never launch.
  std::string where_knob;
  std::vector<std::string> where_values;
};

// A knob's value for each knob that applies.
using Config = std::map<std::string, std::string>;

// "spec_steps=2 speculative=eagle3", knobs in alphabetical order.
std::string describe(const Config& config);

class Space {
public:
  explicit Space(std::vector<Dimension> dimensions);

  const std::vector<Dimension>& dimensions() const { return m_dimensions; }
  bool applies(const Dimension& dimension, const Config& config) const;
  // Each knob that applies gets a value (its start where the config has none), and a
  // knob that does not apply is removed, in the order of the dimensions.
  Config normalize(Config config) const;
  Config start() const;
  // Every distinct configuration: what a grid sweep would launch.
  std::vector<Config> grid() const;

private:
  std::vector<Dimension> m_dimensions;
};

// One load point of one trial: the objective's mean over its samples, the half-width
// of its 95% interval (0 from one sample), and whether the latency SLO held.
struct Figure {
  double mean = 0;
  double half_width = 0;
  bool meets_slo = true;
};

enum class Order { better, worse, tie };

// Whether `a` is better than `b` at one load point: meeting the SLO beats missing it;
// otherwise better or worse when the means differ by more than both intervals'
// half-widths together and by more than `noise` (relative to b, 0.02 for 2%); else a tie.
Order compare(const Figure& a, const Figure& b, double noise);

// A trial's figures, one per load point, by configuration.
using Measured = std::map<Config, std::vector<Figure>>;

struct Options {
  std::size_t points = 1;
  double noise = 0.0;
  // The most configurations the search asks for, measured ones included.
  int max_loads = 12;
};

// What the search says after the trials measured so far.
struct Step {
  // The configuration to launch next; nullopt when the search is over.
  std::optional<Config> launch;
  // Per load point, the best configuration found so far.
  std::vector<Config> best;
  // The configurations the search has asked for, in order (the measured ones, then `launch`).
  std::vector<Config> asked;
  // Why it is over: "no move improves any load point", "the budget of 12 launches is spent".
  std::string why;
};

// Throws specctl::Error (bad_input) when a measured trial has not one figure per point.
Step next_step(const Space& space, const Measured& measured, const Options& options);

// Per load point of the finished search: the best configuration meeting the SLO, the
// runner-up among all measured, and whether they are apart beyond the noise. Among
// configurations within the noise of each other, the one the search kept first (the
// smaller value of an ordered knob, the start value of a list) stays best: a near tie
// is never decided by which sample came out higher.
struct PointAnswer {
  std::optional<Config> best;
  std::optional<Config> runner_up;
  // The runner-up is within the noise of the best: the answer is inconclusive between them.
  bool tie = false;
};
std::vector<PointAnswer> answer(const Space& space, const Measured& measured, const Options& options);

} // namespace specctl::tune
