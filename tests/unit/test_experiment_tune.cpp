// A tuning file read (src/experiment/tune_block.cpp) and its answer made from trials
// (src/run/tune_answer.cpp): the space as variants, the recommendation in words.

#include <doctest/doctest.h>

#include <specctl/experiment/experiment.hpp>
#include <specctl/experiment/plan.hpp>
#include <specctl/run/tuning.hpp>

#include <cstdlib>

using namespace specctl;

namespace {

experiment::Experiment load_example() {
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  unsetenv("SPECCTL_TEMPLATE_PATH");
  util::Diagnostics diag;
  auto e = experiment::load_experiment("examples/tune.yaml", diag);
  for (const auto& d : diag.sorted()) {
    MESSAGE(d.str());
  }
  REQUIRE_FALSE(diag.has_errors());
  REQUIRE(e.tune);
  return e;
}

// A trial with three samples per load point, each within 0.5% of `figures`.
run::Trial trial(const experiment::Experiment& e, const tune::Config& config, const std::vector<double>& figures) {
  run::Trial t;
  t.config = e.tune->space().normalize(config);
  t.variant = e.tune->trial_of(t.config);
  REQUIRE_FALSE(t.variant.empty());
  t.status = "ok";
  for (double f : figures) {
    t.points.push_back(run::TrialPoint{{f * 0.995, f, f * 1.005}, {}});
  }
  return t;
}

} // namespace

TEST_CASE("a tuning file's space is its variants: conditional knobs only where they apply, the start first") {
  auto e = load_example();
  // none, and eagle3 with each of 10 steps (one draft model, one topk).
  REQUIRE(e.variants.size() == 11);
  CHECK(e.variants.front().name == "spec-none");
  CHECK(e.report.baseline == "spec-none");
  CHECK(e.variants.front().server.knobs.count("spec_steps") == 0);
  CHECK(e.variants.front().server.knobs.count("draft_model") == 0);
  const auto* two = e.find_variant("spec-eagle3-steps2");
  REQUIRE(two != nullptr);
  CHECK(two->server.knobs.at("spec_steps").value == 2);
  CHECK(two->server.knobs.at("draft_model").value == "/models/Kimi-K2.5-EAGLE3");
  CHECK(e.tune->trial_of({{"speculative", "none"}}) == "spec-none");
  CHECK(e.tune->load == "load");
  CHECK(e.find_benchmark("load")->levels == std::vector<int>{1, 5, 10, 30, 70});
  CHECK(e.tune->speculation == "speculative");
  CHECK(e.tune->max_loads == 10);
  // The search's plan: 2 launches when nothing pays, at most the budget.
  auto tp = experiment::make_tune_plan(experiment::make_plan(e, {}));
  CHECK(tp.grid == 11);
  CHECK(tp.fewest == 2);
  CHECK(tp.worst == 10);
  CHECK(tp.expected > tp.fewest);
  CHECK(tp.expected <= tp.worst);
}

TEST_CASE("the tuning's answer names the winners per load, the crossover and the margin with its interval") {
  auto e = load_example();
  // specsim's model of the seeds' node at c1, c5, c10, c30, c70 (tests/unit/test_tune_search.cpp).
  std::vector<run::Trial> trials = {
      trial(e, {{"speculative", "none"}}, {92.8, 320.4, 462.1, 655.2, 744.1}),
      trial(e, {{"speculative", "eagle3"}, {"spec_steps", "3"}}, {92.7, 214.5, 256.6, 295.3, 308.6}),
      trial(e, {{"speculative", "eagle3"}, {"spec_steps", "2"}}, {96.7, 233.5, 283.7, 331.0, 347.6}),
  };
  auto answer = run::make_answer(e, trials, "no move improves any load point");
  REQUIRE(answer.points.size() == 5);
  REQUIRE(answer.points[0].best);
  CHECK(answer.points[0].best->variant == "spec-eagle3-steps2");
  CHECK_FALSE(answer.points[0].tie);
  CHECK(answer.points[0].ratio.value() == doctest::Approx(96.7 / 92.8));
  CHECK(answer.points[4].best->variant == "spec-none");
  CHECK(answer.crossover == "speculation stops paying above c1 (no speculation is best from c5 on)");
  CHECK(answer.recommendation.starts_with("c ≤ 1: eagle3, draft_model /models/Kimi-K2.5-EAGLE3, spec_topk 1, "
                                          "spec_steps 2 (+4% ["));
  CHECK(answer.recommendation.find("; c ≥ 5: no speculation (2.14x [") != std::string::npos);
  auto yaml = run::tuned_yaml(e, answer);
  CHECK(yaml.find("name: tune-tuned") != std::string::npos);
  CHECK(yaml.find("name: spec-eagle3-steps2") != std::string::npos);
  CHECK(yaml.find("name: spec-eagle3-steps3") == std::string::npos);
}
