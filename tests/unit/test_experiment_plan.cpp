#include <doctest/doctest.h>

#include "../support/golden.hpp"

#include <specctl/experiment/plan.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace specctl::experiment;
using specctl::test::check_golden;

namespace {

Experiment load_ok(const std::string& path) {
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  setenv("SPECCTL_SSH_CONFIG", "/nonexistent", 1);
  specctl::util::Diagnostics diag;
  auto e = load_experiment(path, diag);
  REQUIRE_FALSE(diag.has_errors());
  return e;
}

} // namespace

TEST_CASE("plan output matches the golden files") {
  // A fixed bindir keeps the specsim path the same on every machine.
  const specctl::server::RenderOptions options{"/opt/specctl/bin"};
  for (const auto& [experiment, golden] : std::vector<std::pair<std::string, std::string>>{
           {"experiments/kimi-k25-eagle3.yaml", "tests/data/plan/kimi-k25-eagle3.txt"},
           {"experiments/eagle3-steps.yaml", "tests/data/plan/eagle3-steps.txt"},
           {"examples/quickstart.yaml", "tests/data/plan/quickstart.txt"},
           {"examples/slurm.yaml", "tests/data/plan/slurm.txt"},
           {"examples/slots.yaml", "tests/data/plan/slots.txt"},
           {"examples/sharegpt.yaml", "tests/data/plan/sharegpt.txt"},
           {"tests/data/good/layers.yaml", "tests/data/plan/layers.txt"}}) {
    auto e = load_ok(experiment);
    auto plan = make_plan(e, options);
    check_golden(format_plan(plan), golden);
  }
  auto e = load_ok("experiments/kimi-k25-eagle3.yaml");
  check_golden(plan_to_json(make_plan(e, options)).dump(2) + "\n", "tests/data/plan/kimi-k25-eagle3.json");
}

TEST_CASE("plan estimate adds every bound") {
  auto e = load_ok("experiments/kimi-k25-eagle3.yaml");
  auto plan = make_plan(e, {});
  REQUIRE(plan.variants.size() == 2);
  const auto& est = plan.variants[0].estimate;
  CHECK(est.load == std::chrono::minutes(30));
  CHECK(est.cleanup == std::chrono::seconds(30) + std::chrono::minutes(5));
  CHECK(est.benchmarks == e.benchmarks[0].timeout + e.benchmarks[1].timeout);
  CHECK(plan.total() == est.total() + plan.variants[1].estimate.total());
}

TEST_CASE("plan: the time from history beside the bound, from the durations earlier runs recorded") {
  using std::chrono::minutes;
  auto e = load_ok("examples/quickstart.yaml");
  auto plan = make_plan(e, {"/opt/specctl/bin"});
  REQUIRE(plan.variants.size() == 4);
  const auto bound_only = format_plan(plan);
  auto tail = [&](const std::string& text) { return text.substr(bound_only.size()); };

  SUBCASE("none recorded") {
    plan.history = History{"results/quickstart", {}};
    CHECK(tail(format_plan(plan)) ==
          "from history: none (no earlier run in results/quickstart recorded these variants' durations)\n");
    auto j = plan_to_json(plan)["history"];
    CHECK(j["measured"] == 0);
    CHECK(j["estimate_s"].is_null());
  }
  SUBCASE("some recorded: the others at their mean") {
    plan.history = History{"results/quickstart", {{"baseline", minutes(10)}, {"eagle3", minutes(14)}}};
    CHECK(tail(format_plan(plan)) == "from history: about 48m for 4 variants one after another (2 of them as their "
                                     "newest run in results/quickstart took, the others at their mean)\n");
    auto j = plan_to_json(plan)["history"];
    CHECK(j["dir"] == "results/quickstart");
    CHECK(j["measured"] == 2);
    CHECK(j["estimate_s"] == 48 * 60.0);
  }
  SUBCASE("all recorded") {
    plan.history = History{"r", {}};
    for (const auto& planned : plan.variants) {
      plan.history->durations[planned.variant->name] = minutes(5);
    }
    CHECK(tail(format_plan(plan)) == "from history: about 20m for 4 variants one after another (each as its newest "
                                     "run in r took)\n");
  }
  // Without a history (the result folder's experiment.json), the plan says nothing of it.
  plan.history.reset();
  CHECK(plan_to_json(plan).contains("history") == false);
}
