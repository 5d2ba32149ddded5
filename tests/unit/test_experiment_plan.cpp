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
