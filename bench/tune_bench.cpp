// Measures the search of `specctl tune` (src/tune/search.cpp) against specsim's
// performance model: for a few tuning spaces, how many launches it takes and how far
// its answer falls short of the best configuration of the whole grid, at each load
// point. Each configuration is "launched" by reading the default profile's output
// tok/s, exactly or as the mean of a few noisy samples. Prints a Markdown table; see
// bench/README.md.

#include <specctl/report/stats.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/tune/search.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace specctl;
using tune::Config;
using tune::Figure;

namespace {

const std::vector<int> k_levels = {1, 5, 10, 30, 70, 250};
// Each noisy figure is the mean of this many samples, each the model's value times
// 1 + N(0, k_sample_sd): a stand-in for a launch's run-to-run spread.
constexpr int k_samples = 3;
constexpr double k_sample_sd = 0.02;
// Noisy searches per space, each with its own seed: the table gives their spread.
constexpr int k_noisy_runs = 20;

std::string knob_or(const Config& config, const std::string& knob, const std::string& fallback) {
  auto it = config.find(knob);
  return it == config.end() ? fallback : it->second;
}

// The deployment's CUDA graphs: up to the profile's default batch, as a launch without
// --cuda-graph-max-bs gets them (make_variant, the seeds' numbers), or none at all, as a
// default sim::Variant has them (cuda_graph_max_bs 0).
struct Deployment {
  std::string name;
  int cuda_graph_max_bs = 0;
};

// Output tok/s at `level` streams; a knob the space lacks keeps the seeds' deployment
// (tp 8, fused all-reduce, no speculation, topk 1). The verify pass takes the whole
// draft tree, steps x topk + 1 tokens (steps + 1 at topk 1, SGLang's rule).
double model_tok_s(const Deployment& deployment, const Config& config, int level) {
  sim::Variant variant;
  variant.cuda_graph_max_bs = deployment.cuda_graph_max_bs;
  variant.tp = std::stoi(knob_or(config, "tp", "8"));
  variant.fusion = knob_or(config, "fusion", "true") == "true";
  if (knob_or(config, "speculative", "none") == "eagle3") {
    const int steps = std::stoi(config.at("spec_steps"));
    const int topk = std::stoi(knob_or(config, "spec_topk", "1"));
    variant.spec = sim::SpecConfig{sim::SpecAlgorithm::eagle3, steps, topk, steps * topk + 1};
  }
  const sim::PerfModel model(sim::profiles()[0], variant);
  const double per_pass = model.speculative() ? model.mean_accept_length() : 1.0;
  return level * per_pass / model.step_ms(level) * 1000.0;
}

std::vector<tune::Dimension> speculation() {
  std::vector<std::string> steps;
  for (int s = 1; s <= 10; ++s) {
    steps.push_back(std::to_string(s));
  }
  return {{"speculative", {"none", "eagle3"}, false, "none", "", {}},
          {"spec_steps", steps, true, "3", "speculative", {"eagle3"}}};
}

struct NamedSpace {
  std::string name;
  tune::Space space;
};

std::vector<NamedSpace> spaces() {
  auto with_topk = speculation();
  with_topk.push_back({"spec_topk", {"1", "2", "4"}, false, "1", "speculative", {"eagle3"}});
  auto with_comm = speculation();
  with_comm.push_back({"fusion", {"true", "false"}, false, "true", "", {}});
  with_comm.push_back({"tp", {"8", "4"}, false, "8", "", {}});
  return {{"speculative x spec_steps", tune::Space(speculation())},
          {"+ spec_topk 1/2/4", tune::Space(with_topk)},
          {"+ fusion x tp 8/4", tune::Space(with_comm)}};
}

using Measure = std::function<std::vector<Figure>(const Config&)>;

std::vector<Figure> exact(const Deployment& deployment, const Config& config) {
  std::vector<Figure> figures;
  for (int level : k_levels) {
    figures.push_back(Figure{model_tok_s(deployment, config, level), 0.0, true});
  }
  return figures;
}

// The mean of k_samples noisy samples and the half-width of its 95% t interval.
std::vector<Figure> sampled(const Deployment& deployment, const Config& config, std::mt19937& rng) {
  std::normal_distribution<double> factor(1.0, k_sample_sd);
  const double t = report::student_t_quantile(0.975, k_samples - 1);
  std::vector<Figure> figures;
  for (int level : k_levels) {
    const double truth = model_tok_s(deployment, config, level);
    std::vector<double> samples;
    for (int i = 0; i < k_samples; ++i) {
      samples.push_back(truth * factor(rng));
    }
    const report::Spread spread = report::spread_of(samples);
    figures.push_back(Figure{spread.mean, t * spread.stdev / std::sqrt(static_cast<double>(spread.n)), true});
  }
  return figures;
}

struct Run {
  int loads = 0;
  bool budget_spent = false;
  std::vector<double> regret; // per load point, relative to the grid's best
  int ties = 0;               // load points the answer calls inconclusive
};

// Runs the search to its end, then scores tune::answer against the grid's best.
Run run_search(const Deployment& deployment, const tune::Space& space, const tune::Options& options,
               const Measure& measure, const std::vector<double>& grid_best) {
  tune::Measured measured;
  tune::Step step;
  // The budget ends the search; the guard only makes the loop's end evident.
  for (int guard = 0; guard <= options.max_loads; ++guard) {
    step = tune::next_step(space, measured, options);
    if (!step.launch) {
      break;
    }
    measured[*step.launch] = measure(*step.launch);
  }
  Run run;
  run.loads = static_cast<int>(measured.size());
  run.budget_spent = step.why.starts_with("the budget");
  const auto answers = tune::answer(space, measured, options);
  for (std::size_t p = 0; p < k_levels.size(); ++p) {
    const double picked = answers[p].best ? model_tok_s(deployment, *answers[p].best, k_levels[p]) : 0.0;
    run.regret.push_back((grid_best[p] - picked) / grid_best[p]);
    run.ties += answers[p].tie ? 1 : 0;
  }
  return run;
}

std::string percent(double x) {
  return fmt::format("{:.2f}%", 100.0 * x);
}

// One row of the table: the runs' loads, how many ended on the budget, and the regret
// over every run and load point.
void print_row(const Deployment& deployment, const NamedSpace& named, std::size_t grid, const std::string& measuring,
               const std::vector<Run>& runs) {
  int lo = runs.front().loads;
  int hi = lo;
  double loads = 0;
  double worst = 0;
  double sum = 0;
  int budget = 0;
  int ties = 0;
  for (const auto& run : runs) {
    lo = std::min(lo, run.loads);
    hi = std::max(hi, run.loads);
    loads += run.loads;
    budget += run.budget_spent ? 1 : 0;
    ties += run.ties;
    for (double r : run.regret) {
      worst = std::max(worst, r);
      sum += r;
    }
  }
  const double n = static_cast<double>(runs.size());
  const std::string used = lo == hi ? std::to_string(lo) : fmt::format("{:.1f} ({}-{})", loads / n, lo, hi);
  fmt::print("| {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {:.1f} |\n", deployment.name, named.name, grid,
             measuring, runs.size(), used, budget, runs.size(), percent(worst),
             percent(sum / (n * static_cast<double>(k_levels.size()))), ties / n);
}

} // namespace

int main() {
  const std::vector<Deployment> deployments = {{"graphs to bs 160", sim::profiles()[0].default_cuda_graph_max_bs},
                                               {"eager", 0}};
  fmt::print("Search of `specctl tune` on specsim's default profile, load points c{}; budget {} launches.\n\n",
             fmt::join(k_levels, "/c"), tune::Options{}.max_loads);
  fmt::print("| deployment | space | grid | measuring | runs | loads | ended by budget | regret max | regret mean | "
             "ties called |\n");
  fmt::print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& deployment : deployments) {
    const Measure measure_exact = [&](const Config& config) { return exact(deployment, config); };
    for (const auto& named : spaces()) {
      const auto grid = named.space.grid();
      std::vector<double> grid_best(k_levels.size(), 0.0);
      for (const auto& config : grid) {
        for (std::size_t p = 0; p < k_levels.size(); ++p) {
          grid_best[p] = std::max(grid_best[p], model_tok_s(deployment, config, k_levels[p]));
        }
      }
      tune::Options options;
      options.points = k_levels.size();
      print_row(deployment, named, grid.size(), "exact, noise 0",
                {run_search(deployment, named.space, options, measure_exact, grid_best)});
      options.noise = 0.02;
      print_row(deployment, named, grid.size(), "exact, noise 0.02",
                {run_search(deployment, named.space, options, measure_exact, grid_best)});
      std::vector<Run> runs;
      for (int seed = 1; seed <= k_noisy_runs; ++seed) {
        std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
        const Measure measure = [&](const Config& config) { return sampled(deployment, config, rng); };
        runs.push_back(run_search(deployment, named.space, options, measure, grid_best));
      }
      print_row(deployment, named, grid.size(), fmt::format("{} samples, sd 2%, noise 0.02", k_samples), runs);
    }
  }
  return 0;
}
