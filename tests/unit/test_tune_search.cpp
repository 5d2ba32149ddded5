// The search of `specctl tune` (src/tune/search.cpp), driven to its end against
// specsim's performance model (the default profile, fitted to the seeds' node): each
// configuration it asks for is "launched" by reading the model's throughput at every
// load point.

#include <specctl/sim/perf_model.hpp>
#include <specctl/tune/search.hpp>
#include <specctl/util/error.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace specctl;
using tune::Config;
using tune::Figure;

namespace {

const std::vector<int> k_levels = {1, 5, 10, 30, 70, 250};

// Output tok/s of the seeds' deployment (tp 8, fused all-reduce) at `level` streams.
double model_tok_s(const Config& config, int level) {
  sim::Variant variant;
  variant.tp = 8;
  variant.fusion = true;
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
  // The model's own answer, from the whole grid: 2 and 3 steps within 0.3% at c1.
  CHECK(model_tok_s({{"speculative", "eagle3"}, {"spec_steps", "3"}}, 1) ==
        doctest::Approx(model_tok_s({{"speculative", "eagle3"}, {"spec_steps", "2"}}, 1)).epsilon(0.01));
  const Config two = {{"spec_steps", "2"}, {"speculative", "eagle3"}};
  const Config none = {{"speculative", "none"}};
  CHECK(outcome.last.best[0] == two);
  for (std::size_t p = 1; p < k_levels.size(); ++p) {
    CAPTURE(k_levels[p]);
    CHECK(outcome.last.best[p] == none);
  }
  const auto answers = tune::answer(space, outcome.measured, options);
  // At one stream 3 steps is within the noise of 2: said, not hidden.
  CHECK(answers[0].tie);
  CHECK(answers[0].runner_up == Config{{"spec_steps", "3"}, {"speculative", "eagle3"}});
  // At 5 streams speculation is within the noise of none; at 250 none is 2.2 times ahead.
  CHECK(answers[1].tie);
  CHECK_FALSE(answers[5].tie);
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
