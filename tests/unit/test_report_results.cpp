#include "../support/temp_dir.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/report/results.hpp>
#include <specctl/util/atomic_file.hpp>

#include <doctest/doctest.h>
#include <fstream>

using nlohmann::json;
using specctl::test::TempDir;

namespace {

constexpr const char* k_experiment = R"(name: results-test
server:
  template: specsim
  model: /models/m
  port: 31999
variants:
  - name: baseline
  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/d}
  - name: broken
benchmarks:
  - {name: single, kind: single_stream, runs: 3}
  - {name: parallel, kind: concurrency, levels: [1, 10]}
report:
  expect:
    - {variant: baseline, benchmark: single, metric: output_tok_s, value: 90, tolerance: 5%}
    - {variant: eagle3, benchmark: parallel, level: 10, metric: output_tok_s, value: 100, tolerance: 5%}
    - {variant: broken, benchmark: single, metric: output_tok_s, value: 90}
)";

json variant_result(const std::string& name, double single, double c1, double c10, std::optional<double> accept) {
  json r = {{"format", specctl::report::k_result_format},
            {"version", 1},
            {"variant", name},
            {"status", "ok"},
            {"load", {{"load_s", 12.25}}}};
  r["benchmarks"]["single"]["metrics"] = {{"output_tok_s", single}, {"output_tok_s_stdev", 0.5}};
  if (accept) {
    r["benchmarks"]["single"]["metrics"]["accept_length"] = *accept;
  }
  r["benchmarks"]["parallel"]["levels"] = json::array({
      {{"concurrency", 1}, {"metrics", {{"output_tok_s", c1}}}},
      {{"concurrency", 10}, {"metrics", {{"output_tok_s", c10}}}},
  });
  return r;
}

} // namespace

TEST_CASE("results: metrics found by benchmark and level, a summary table") {
  TempDir dir;
  auto file = dir / "experiment.yaml";
  std::ofstream(file) << k_experiment;
  specctl::util::Diagnostics diag;
  auto experiment = specctl::experiment::load_experiment(file.string(), diag);
  REQUIRE_FALSE(diag.has_errors());

  specctl::report::ResultPaths paths{dir / "run"};
  for (const char* name : {"baseline", "eagle3", "broken"}) {
    REQUIRE(specctl::util::make_dirs_durable(paths.variant_dir(name)));
  }
  REQUIRE(specctl::util::write_file_atomic(paths.result("baseline"),
                                           variant_result("baseline", 92.6, 91.0, 760.0, std::nullopt).dump()));
  REQUIRE(specctl::util::write_file_atomic(paths.result("eagle3"),
                                           variant_result("eagle3", 96.1, 95.0, 104.0, 1.97).dump()));
  json broken = {{"format", specctl::report::k_result_format},
                 {"variant", "broken"},
                 {"status", "failed"},
                 {"reason", "load: the server exited with code 1"}};
  REQUIRE(specctl::util::write_file_atomic(paths.result("broken"), broken.dump()));

  auto baseline = specctl::report::read_result(paths, "baseline");
  REQUIRE(baseline);
  const auto& expect = experiment.report.expect;
  REQUIRE(expect.size() == 3);
  CHECK(specctl::report::find_metric(*baseline, expect[0]) == doctest::Approx(92.6));
  CHECK(specctl::report::find_metric(*specctl::report::read_result(paths, "eagle3"), expect[1]) ==
        doctest::Approx(104.0));
  CHECK_FALSE(specctl::report::find_metric(
      *baseline, specctl::experiment::Expectation{"baseline", "parallel", 70, {}, "output_tok_s", 1, 10, {}}));

  // A level measured three times (repeats): the expectation holds against their mean.
  auto repeated = *baseline;
  repeated["benchmarks"]["parallel"]["levels"] = json::array({
      {{"concurrency", 10}, {"repeat", 1}, {"metrics", {{"output_tok_s", 700.0}}}},
      {{"concurrency", 1}, {"repeat", 1}, {"metrics", {{"output_tok_s", 90.0}}}},
      {{"concurrency", 10}, {"repeat", 2}, {"metrics", {{"output_tok_s", 760.0}}}},
      {{"concurrency", 10}, {"repeat", 3}, {"metrics", {{"output_tok_s", nullptr}}}},
  });
  CHECK(specctl::report::find_metric(repeated, expect[1]) == doctest::Approx(730.0));
}

TEST_CASE("results: the failed share that refuses a benchmark its verdicts") {
  using specctl::report::too_many_failed;
  CHECK_FALSE(too_many_failed(20, 1, 5.0));
  CHECK_FALSE(too_many_failed(0, 0, 5.0));
  CHECK(too_many_failed(19, 1, 5.0) == "1 of 19 requests failed (5.26%, more than 5%)");
  CHECK(too_many_failed(20, 18, 5.0) == "18 of 20 requests failed (90%, more than 5%)");
  CHECK_FALSE(too_many_failed(20, 18, 95.0));
  CHECK(too_many_failed(100, 1, 0.0) == "1 of 100 requests failed (1%, more than 0%)");

  // Counts come from the metrics, else the level's result, else the runs.
  json level = {{"metrics", {{"requests", 30}, {"completed", 28}, {"failed", 2}}}};
  CHECK(specctl::report::counts_of(level).failed == 2);
  json old = {{"result", {{"requests", 10}, {"completed", 9}, {"failed", 1}}}};
  CHECK(specctl::report::counts_of(old).requests == 10);
  json runs = {{"result", {{"runs", json::array({{{"ok", true}}, {{"ok", false}}, {{"ok", true}}})}}}};
  auto counted = specctl::report::counts_of(runs);
  CHECK(counted.requests == 3);
  CHECK(counted.failed == 1);
  json bench = {{"levels", json::array({level, old})}};
  auto total = specctl::report::benchmark_counts(bench);
  CHECK(total.requests == 40);
  CHECK(total.failed == 3);
}

TEST_CASE("results: a torn or foreign result.json reads as missing") {
  TempDir dir;
  specctl::report::ResultPaths paths{dir.path()};
  REQUIRE(specctl::util::make_dirs_durable(paths.variant_dir("v")));
  std::ofstream(paths.result("v")) << R"({"format": "specctl-variant-result", "status": "o)";
  CHECK_FALSE(specctl::report::read_result(paths, "v"));
  std::ofstream(paths.result("v")) << R"({"format": "something-else", "status": "ok"})";
  CHECK_FALSE(specctl::report::read_result(paths, "v"));
  CHECK_FALSE(specctl::report::read_result(paths, "absent"));
}
