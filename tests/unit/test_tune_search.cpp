// The search of `specctl tune` (src/tune/search.cpp), driven to its end against
// specsim's performance model (the default profile, fitted to the seeds' node): each
// configuration it asks for is "launched" by reading the model's throughput at every
// load point.

#include <specctl/report/stats.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/tune/search.hpp>
#include <specctl/util/error.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace specctl;
using tune::Config;
using tune::Figure;

namespace {

const std::vector<int> k_levels = {1, 5, 10, 30, 70, 250};

const int k_seeds_graph_bs = sim::profiles()[0].default_cuda_graph_max_bs;

// Output tok/s of the seeds' deployment (tp 8, fused all-reduce, CUDA graphs up to
// the profile's default batch, as specsim sets them) at `level` streams; with
// graph_bs 0, of the same deployment run eagerly.
double model_tok_s(const Config& config, int level, int graph_bs = k_seeds_graph_bs) {
  sim::Variant variant;
  variant.tp = 8;
  variant.fusion = true;
  variant.cuda_graph_max_bs = graph_bs;
  // The static memory fraction sizes the KV cache; the model's step time ignores it.
  if (auto it = config.find("mem_fraction_static"); it != config.end()) {
    variant.mem_fraction_static = std::stod(it->second);
  }
  if (config.at("speculative") == "eagle3") {
    const int steps = std::stoi(config.at("spec_steps"));
    variant.spec = sim::SpecConfig{sim::SpecAlgorithm::eagle3, steps, 1, steps + 1};
  }
  const sim::PerfModel model(sim::profiles()[0], variant);
  const double per_pass = model.speculative() ? model.mean_accept_length() : 1.0;
  return level * per_pass / model.step_ms(level) * 1000.0;
}

tune::Space speculation_space() {
  std::vector<std::string> steps;
  for (int s = 1; s <= 10; ++s) {
    steps.push_back(std::to_string(s));
  }
  return tune::Space({{"speculative", {"none", "eagle3"}, false, "none", "", {}},
                      {"spec_steps", steps, true, "3", "speculative", {"eagle3"}}});
}

struct Outcome {
  tune::Measured measured;
  tune::Step last;
  int launches = 0;
};

// Runs the search to its end, measuring what it asks with `measure`.
Outcome tune_to_end(const tune::Space& space, const tune::Options& options,
                    const std::function<std::vector<Figure>(const Config&)>& measure, tune::Measured measured = {}) {
  Outcome out;
  out.measured = std::move(measured);
  for (int guard = 0; guard < 100; ++guard) {
    out.last = tune::next_step(space, out.measured, options);
    if (!out.last.launch) {
      break;
    }
    REQUIRE(out.measured.count(*out.last.launch) == 0);
    out.measured[*out.last.launch] = measure(*out.last.launch);
    ++out.launches;
  }
  return out;
}

std::vector<Figure> from_model(const Config& config) {
  std::vector<Figure> figures;
  for (int level : k_levels) {
    figures.push_back(Figure{model_tok_s(config, level), 0.0, true});
  }
  return figures;
}

// Each figure the mean of 3 samples of the model's value with a relative sd of 2%,
// and the half-width of its 95% t interval: a launch measured with run-to-run noise.
std::vector<Figure> sampled_from_model(const Config& config, const std::vector<int>& levels, std::mt19937& rng,
                                       int graph_bs) {
  constexpr int k_samples = 3;
  std::normal_distribution<double> factor(1.0, 0.02);
  const double t = report::student_t_quantile(0.975, k_samples - 1);
  std::vector<Figure> figures;
  for (int level : levels) {
    std::vector<double> samples;
    for (int i = 0; i < k_samples; ++i) {
      samples.push_back(model_tok_s(config, level, graph_bs) * factor(rng));
    }
    const auto spread = report::spread_of(samples);
    figures.push_back(Figure{spread.mean, t * spread.stdev / std::sqrt(static_cast<double>(spread.n)), true});
  }
  return figures;
}

} // namespace

TEST_CASE("tune space: conditional knobs are set only where they apply") {
  const auto space = speculation_space();
  CHECK(space.grid().size() == 11);
  CHECK(space.start() == Config{{"speculative", "none"}});
  CHECK(space.normalize({{"speculative", "eagle3"}}) == Config{{"spec_steps", "3"}, {"speculative", "eagle3"}});
  CHECK(space.normalize({{"speculative", "none"}, {"spec_steps", "7"}}) == Config{{"speculative", "none"}});
  CHECK_THROWS_AS(tune::Space({{"x", {}, false, "", "", {}}}), Error);
  CHECK_THROWS_AS(tune::Space({{"x", {"a"}, false, "b", "", {}}}), Error);
}

TEST_CASE("tune compare: the SLO first, then beyond both intervals and the noise") {
  CHECK(tune::compare({100, 0, true}, {90, 0, true}, 0.05) == tune::Order::better);
  CHECK(tune::compare({100, 0, true}, {97, 0, true}, 0.05) == tune::Order::tie);
  CHECK(tune::compare({100, 4, true}, {94, 3, true}, 0.0) == tune::Order::tie);
  CHECK(tune::compare({90, 0, true}, {100, 0, false}, 0.05) == tune::Order::better);
  CHECK(tune::compare({80, 0, true}, {100, 0, true}, 0.05) == tune::Order::worse);
}

TEST_CASE("tune search on specsim's model: speculation at one stream, none above, in 6 launches of the grid's 11") {
  tune::Options options;
  options.points = k_levels.size();
  options.noise = 0.02;
  const auto space = speculation_space();
  const auto outcome = tune_to_end(space, options, from_model);
  CHECK(outcome.last.why == "no move improves any load point");
  CHECK(outcome.launches <= 6);
  // The model's own answer, from the whole grid: at one stream 2 steps is 4% ahead of
  // none, and EAGLE-3 at its start of 3 steps only ties none: the steps are searched
  // from a contender that ties, not only from a winner.
  const Config two = {{"spec_steps", "2"}, {"speculative", "eagle3"}};
  const Config three = {{"spec_steps", "3"}, {"speculative", "eagle3"}};
  const Config none = {{"speculative", "none"}};
  CHECK(model_tok_s(two, 1) / model_tok_s(none, 1) == doctest::Approx(1.042).epsilon(0.005));
  CHECK(model_tok_s(three, 1) / model_tok_s(none, 1) == doctest::Approx(1.0).epsilon(0.005));
  CHECK(outcome.last.best[0] == two);
  for (std::size_t p = 1; p < k_levels.size(); ++p) {
    CAPTURE(k_levels[p]);
    CHECK(outcome.last.best[p] == none);
  }
  const auto answers = tune::answer(space, outcome.measured, options);
  CHECK(answers[0].best == two);
  CHECK(answers[0].runner_up == none);
  CHECK_FALSE(answers[0].tie);
  // From 5 streams on none is ahead beyond the noise: 1.36x at c5, 2.2x at c250.
  for (std::size_t p = 1; p < k_levels.size(); ++p) {
    CAPTURE(k_levels[p]);
    CHECK(answers[p].best == none);
    CHECK_FALSE(answers[p].tie);
  }
}

TEST_CASE("tune search: a near tie stays with the start, whichever sample came out higher") {
  tune::Options options;
  options.points = 1;
  options.noise = 0.03;
  const tune::Space space({{"fusion", {"true", "false"}, false, "true", "", {}}});
  for (double other : {99.0, 101.0}) {
    CAPTURE(other);
    const auto outcome = tune_to_end(space, options, [&](const Config& c) {
      return std::vector<Figure>{{c.at("fusion") == "true" ? 100.0 : other, 1.0, true}};
    });
    CHECK(outcome.last.best[0] == Config{{"fusion", "true"}});
    const auto answers = tune::answer(space, outcome.measured, options);
    CHECK(answers[0].tie);
  }
}

TEST_CASE("tune search: a near tie is called inconclusive, never picked by a coin flip") {
  // The eager deployment. One stream, where EAGLE-3 (2 steps) is 39% ahead of none, and 250,
  // where none is 118% ahead: real differences, far beyond the noise. (At 10 streams none
  // is 23% ahead, which 3 samples do not always resolve: with seed 6 the two 95%
  // half-widths add up to 24%.) The static memory fraction is a knob the model ignores:
  // 0.85 and 0.88 are the same configuration to it.
  const std::vector<int> levels = {1, 250};
  tune::Options options;
  options.points = levels.size();
  options.noise = 0.02;
  const tune::Dimension speculative = {"speculative", {"none", "eagle3"}, false, "none", "", {}};
  const tune::Dimension steps = {"spec_steps", {"2"}, false, "", "speculative", {"eagle3"}};
  const tune::Dimension memory = {"mem_fraction_static", {"0.85", "0.88"}, false, "0.85", "", {}};
  const tune::Space twins({speculative, steps, memory});
  const tune::Space apart({speculative, steps});
  const Config eagle = {{"mem_fraction_static", "0.85"}, {"spec_steps", "2"}, {"speculative", "eagle3"}};
  const Config none = {{"mem_fraction_static", "0.85"}, {"speculative", "none"}};
  const auto twin_of = [](Config config) {
    config["mem_fraction_static"] = "0.88";
    return config;
  };
  for (int level : levels) {
    CHECK(model_tok_s(eagle, level, 0) == model_tok_s(twin_of(eagle), level, 0));
    CHECK(model_tok_s(none, level, 0) == model_tok_s(twin_of(none), level, 0));
  }
  const std::vector<Config> expected = {eagle, none};
  for (unsigned seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const auto measure = [&](const Config& c) { return sampled_from_model(c, levels, rng, 0); };
    const auto outcome = tune_to_end(twins, options, measure);
    CHECK(outcome.last.why == "no move improves any load point");
    const auto answers = tune::answer(twins, outcome.measured, options);
    for (std::size_t p = 0; p < levels.size(); ++p) {
      CAPTURE(levels[p]);
      // The start value of the ignored knob stays, whichever twin sampled higher.
      CHECK(answers[p].best == expected[p]);
      CHECK(answers[p].runner_up == twin_of(expected[p]));
      CHECK(answers[p].tie);
    }
    // Without the twins, the runner-up is the other mode, and that is no tie.
    const auto separate = tune_to_end(apart, options, measure);
    const auto apart_answers = tune::answer(apart, separate.measured, options);
    const std::vector<Config> apart_expected = {apart.normalize({{"speculative", "eagle3"}}), apart.start()};
    for (std::size_t p = 0; p < levels.size(); ++p) {
      CAPTURE(levels[p]);
      CHECK(apart_answers[p].best == apart_expected[p]);
      CHECK_FALSE(apart_answers[p].tie);
    }
  }
}

TEST_CASE("tune search: resumed from its measurements it launches nothing twice, and stops at its budget") {
  tune::Options options;
  options.points = k_levels.size();
  options.noise = 0.02;
  const auto space = speculation_space();
  const auto whole = tune_to_end(space, options, from_model);
  // Killed after two launches: the rest are the same ones, none measured again.
  tune::Measured first_two;
  for (std::size_t i = 0; i < 2; ++i) {
    first_two[whole.last.asked[i]] = whole.measured.at(whole.last.asked[i]);
  }
  const auto resumed = tune_to_end(space, options, from_model, first_two);
  CHECK(resumed.launches == whole.launches - 2);
  CHECK(resumed.last.best == whole.last.best);
  options.max_loads = 3;
  const auto short_of = tune_to_end(space, options, from_model);
  CHECK(short_of.launches == 3);
  CHECK(short_of.last.why == "the budget of 3 launches is spent");
  CHECK_THROWS_AS(tune::next_step(space, {{space.start(), {Figure{}}}}, tune::Options{6, 0.0, 12}), Error);
}

TEST_CASE(
    "tune answer: a configuration measured better beyond the noise is the best, whichever point's search met it") {
  // An ordered knob whose objective rises to n=5 and falls after; the budget stops the
  // search after n=1, 4 and 7. n=4 is 27% ahead of n=1: the best, and no tie.
  std::vector<std::string> values;
  for (int n = 1; n <= 10; ++n) {
    values.push_back(std::to_string(n));
  }
  const tune::Space space({{"n", values, true, "1", "", {}}});
  const tune::Options options{1, 0.02, 3};
  const auto outcome = tune_to_end(space, options, [](const Config& c) {
    const int n = std::stoi(c.at("n"));
    return std::vector<Figure>{{n <= 5 ? 100.0 + 10 * n : 200.0 - 10 * n, 0, true}};
  });
  CHECK(outcome.launches == 3);
  const auto answers = tune::answer(space, outcome.measured, options);
  CHECK(answers[0].best == Config{{"n", "4"}});
  CHECK_FALSE(answers[0].tie);
}

TEST_CASE("tune search: a smaller value with a wide interval does not displace a clearly higher start") {
  // n=1 overlaps n=3 only through its own wide interval; its mean is 8.7% lower, far
  // past the 2% noise, so it does not win by being smaller. n=2 is 0.7% below n=3,
  // within the noise: the smaller value is kept there, as designed.
  std::vector<std::string> values;
  for (int n = 1; n <= 10; ++n) {
    values.push_back(std::to_string(n));
  }
  const std::map<std::string, Figure> figures = {
      {"1", {55.54, 4.90, true}}, {"2", {60.40, 2.10, true}}, {"3", {60.85, 1.02, true}}, {"4", {58.33, 1.20, true}}};
  const tune::Space space({{"n", values, true, "3", "", {}}});
  const tune::Options options{1, 0.02, 12};
  const auto outcome = tune_to_end(space, options, [&](const Config& c) {
    auto it = figures.find(c.at("n"));
    const double n = std::stod(c.at("n"));
    return std::vector<Figure>{it != figures.end() ? it->second : Figure{70.0 - 3.0 * n, 2.0, true}};
  });
  CHECK(outcome.last.best[0] == Config{{"n", "2"}});
  const auto answers = tune::answer(space, outcome.measured, options);
  CHECK(answers[0].best == Config{{"n", "2"}});
  CHECK(answers[0].tie);
}
