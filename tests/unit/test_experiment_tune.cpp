// A tuning file read (src/experiment/tune_block.cpp) and its answer made from trials
// (src/run/tune_answer.cpp): the space as variants, the recommendation in words.

#include <doctest/doctest.h>

#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/experiment/plan.hpp>
#include <specctl/run/tuning.hpp>

#include <cstdlib>
#include <fmt/format.h>

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
  t.status = report::VariantStatus::ok;
  for (double f : figures) {
    t.points.push_back(run::TrialPoint{{f * 0.995, f, f * 1.005}, {}, std::nullopt});
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
  CHECK(*two->server.knobs.at("spec_steps").value == 2);
  CHECK(*two->server.knobs.at("draft_model").value == "/models/Kimi-K2.5-EAGLE3");
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

TEST_CASE("the tuning's SLO is its load's: a named benchmark without one gets it, and a written load bisects with it") {
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  unsetenv("SPECCTL_TEMPLATE_PATH");
  specctl::test::TempDir dir;
  auto load = [&](const std::string& benchmarks, const std::string& tune_lines) {
    auto file = dir.path() / "tune.yaml";
    specctl::test::write_file(file, fmt::format("name: t\nserver: {{template: sglang, model: /m}}\n{}tune:\n"
                                                "  space: {{speculative: [none, eagle3]}}\n{}",
                                                benchmarks, tune_lines));
    util::Diagnostics diag;
    auto e = experiment::load_experiment(file.string(), diag);
    for (const auto& d : diag.sorted()) {
      MESSAGE(d.str());
    }
    REQUIRE_FALSE(diag.has_errors());
    REQUIRE(e.tune);
    return e;
  };
  const std::vector<std::pair<std::string, double>> slo{{"ttft_p99_ms", 2000}, {"e2e_p99_ms", 9000}};
  SUBCASE("named, the SLO in tune") {
    auto e = load("benchmarks:\n  - {name: open, kind: rate, rates: [1, 4]}\n",
                  "  load: open\n  slo: {ttft_p99_ms: 2000, e2e_p99_ms: 9000}\n  objective: goodput\n");
    CHECK(e.tune->slo == slo);
    CHECK(e.find_benchmark("open")->slo == slo);
    CHECK(e.tune->objective == experiment::TuneObjective::goodput);
    CHECK(run::load_points(e) == std::vector<std::string>{"r1", "r4"});
  }
  SUBCASE("named, the SLO the benchmark's own") {
    auto e = load("benchmarks:\n  - {name: open, kind: rate, rates: [1, 4], bisect: 3, "
                  "slo: {ttft_p99_ms: 2000, e2e_p99_ms: 9000}}\n",
                  "  load: open\n");
    CHECK(e.tune->slo == slo);
    CHECK(run::load_points(e) == std::vector<std::string>{"r1", "r4", "max rate"});
  }
  SUBCASE("written in the tune block, bisecting against tune.slo") {
    auto e = load("", "  load: {rates: [2, 8], bisect: 3}\n  slo: {ttft_p99_ms: 2000, e2e_p99_ms: 9000}\n");
    const auto* bench = e.find_benchmark("load");
    REQUIRE(bench != nullptr);
    CHECK(bench->slo == slo);
    CHECK(bench->bisect == 3);
    CHECK(run::load_points(e) == std::vector<std::string>{"r2", "r8", "max rate"});
  }
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

TEST_CASE("plan of a tuning: the time from the trials measured before, or that there are none") {
  using std::chrono::minutes;
  auto e = load_example();
  auto plan = experiment::make_plan(e, {"/opt/specctl/bin"});
  auto last_line = [](const std::string& text) {
    auto end = text.rfind('\n', text.size() - 2);
    return text.substr(end + 1);
  };

  SUBCASE("none: the bound from timeouts stands") {
    plan.history = experiment::History{"results/tune", {}};
    auto tp = experiment::make_tune_plan(plan);
    CHECK(tp.measured == 0);
    CHECK(last_line(experiment::format_tune_plan(plan)) ==
          "from history: none (no earlier run in results/tune recorded a trial's duration); the bound above stands\n");
    CHECK(experiment::tune_plan_to_json(tp)["history"].is_null());
  }
  SUBCASE("expected trials x their mean, the most trials x the longest") {
    plan.history = experiment::History{"results/tune", {{"spec-none", minutes(4)}, {"spec-eagle3-steps3", minutes(6)}}};
    auto tp = experiment::make_tune_plan(plan);
    CHECK(tp.measured == 2);
    CHECK(tp.measured_mean == minutes(5));
    CHECK(tp.measured_longest == minutes(6));
    CHECK(tp.worst_time == minutes(60));
    CHECK(tp.expected_time == std::chrono::round<util::Duration>(minutes(5) * tp.expected));
    CHECK(last_line(experiment::format_tune_plan(plan)) ==
          fmt::format("from history (2 configurations measured before in results/tune: 5m on average, 6m the "
                      "longest): about {} for {:.1f} trials, at most 1h for 10\n",
                      util::format_duration(std::chrono::round<std::chrono::seconds>(tp.expected_time)), tp.expected));
    auto j = experiment::tune_plan_to_json(tp);
    CHECK(j["history"]["measured"] == 2);
    CHECK(j["history"]["worst_s"] == 3600.0);
  }
  SUBCASE("capped like the bound at the time budget plus one trial") {
    plan.history =
        experiment::History{"results/tune", {{"spec-none", minutes(10)}, {"spec-eagle3-steps3", minutes(12)}}};
    auto tp = experiment::make_tune_plan(plan);
    CHECK(tp.expected_time == minutes(71));
    CHECK(tp.worst_time == minutes(72));
    CHECK(last_line(experiment::format_tune_plan(plan)) ==
          fmt::format("from history (2 configurations measured before in results/tune: 11m on average, 12m the "
                      "longest): about 1h 11m (the time budget and one trial) for {:.1f} trials, at most 1h 12m (the "
                      "time budget and one trial) for 10\n",
                      tp.expected));
  }
}

TEST_CASE("tuned.yaml: the runner-up of a tie beside its winner, the file's report settings kept, and it validates") {
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  unsetenv("SPECCTL_TEMPLATE_PATH");
  test::TempDir dir;
  // The example with report settings of its own, and expectations about two configurations.
  auto tuning = dir.write("tune.yaml", test::read_file("examples/tune.yaml") + R"(
report:
  max_failed: 10%
  formats: [md, json]
  expect:
    - {variant: spec-none, benchmark: load, level: 70, metric: output_tok_s, value: 744, tolerance: 10%}
    - {variant: spec-eagle3-steps5, benchmark: load, level: 70, metric: output_tok_s, value: 300}
)");
  util::Diagnostics diag;
  auto e = experiment::load_experiment(tuning, diag);
  REQUIRE_FALSE(diag.has_errors());
  // At c1, 2 steps is within the noise of no speculation: a tie, kept by the start.
  std::vector<run::Trial> trials = {
      trial(e, {{"speculative", "none"}}, {92.8, 320.4, 462.1, 655.2, 744.1}),
      trial(e, {{"speculative", "eagle3"}, {"spec_steps", "3"}}, {90.7, 214.5, 256.6, 295.3, 308.6}),
      trial(e, {{"speculative", "eagle3"}, {"spec_steps", "2"}}, {93.3, 233.5, 283.7, 331.0, 347.6}),
  };
  auto answer = run::make_answer(e, trials, "no move improves any load point");
  REQUIRE(answer.points[0].best);
  REQUIRE(answer.points[0].runner_up);
  CHECK(answer.points[0].best->variant == "spec-none");
  CHECK(answer.points[0].tie);
  CHECK(answer.points[0].runner_up->variant == "spec-eagle3-steps2");
  CHECK_FALSE(answer.points[1].tie);

  auto yaml = run::tuned_yaml(e, answer);
  CHECK(yaml.find("  # the start configuration (the baseline); best at c1 (a tie), c5, c10, c30, c70\n"
                  "  - name: spec-none\n") != std::string::npos);
  CHECK(yaml.find("  # runner-up at c1, within the noise of spec-none: run again to settle the tie\n"
                  "  - name: spec-eagle3-steps2\n") != std::string::npos);
  // Neither a winner nor a tie's runner-up.
  CHECK(yaml.find("spec-eagle3-steps3") == std::string::npos);
  CHECK(yaml.find("# Left out of report.expect: the expectations about spec-eagle3-steps5, not in this file.\n") !=
        std::string::npos);

  auto confirm = dir.write("tuned.yaml", yaml);
  util::Diagnostics confirm_diag;
  auto tuned = experiment::load_experiment(confirm, confirm_diag);
  for (const auto& d : confirm_diag.sorted()) {
    MESSAGE(d.str());
  }
  REQUIRE_FALSE(confirm_diag.has_errors());
  REQUIRE(tuned.variants.size() == 2);
  CHECK(tuned.variants[0].name == "spec-none");
  CHECK(tuned.variants[1].name == "spec-eagle3-steps2");
  CHECK(tuned.variants[1].description == "runner-up at c1, within the noise of spec-none: run again to settle the tie");
  CHECK(*tuned.variants[1].server.knobs.at("spec_steps").value == 2);
  CHECK(tuned.report.baseline == "spec-none");
  CHECK(tuned.report.max_failed_pct == 10);
  CHECK(tuned.report.formats == std::vector<std::string>{"md", "json"});
  REQUIRE(tuned.report.expect.size() == 1);
  CHECK(tuned.report.expect[0].variant == "spec-none");
}
