#include "../support/temp_dir.hpp"

#include <specctl/report/compare.hpp>
#include <specctl/report/report.hpp>
#include <specctl/util/error.hpp>

#include <cstdlib>
#include <doctest/doctest.h>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
namespace report = specctl::report;
using report::Verdict;

namespace {

const fs::path k_data = fs::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "report";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Compares with tests/data/report/golden/NAME; SPECCTL_UPDATE_GOLDEN=1 rewrites it instead
// (then read the diff before committing it).
void check_golden(const std::string& name, const std::string& actual) {
  fs::path path = k_data / "golden" / name;
  if (const char* update = std::getenv("SPECCTL_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << actual;
  }
  INFO("golden file: ", path.string());
  CHECK(actual == read_file(path));
}

const report::SingleStreamRow& single_row(const report::Report& r, const std::string& variant) {
  for (const auto& row : r.single_stream.at(0).rows) {
    if (row.variant == variant) {
      return row;
    }
  }
  throw std::runtime_error("no row " + variant);
}

} // namespace

TEST_CASE("report: figures of the fixture sweep, checked against hand-computed values") {
  auto r = report::build_report(report::read_run(k_data / "sweep"));
  CHECK(r.experiment == "sweep");
  CHECK(r.baseline == "baseline");
  REQUIRE(r.variants.size() == 5);
  CHECK(r.variants[3].status == "failed");
  CHECK(r.variants[3].reason.find("CUDA out of memory") != std::string::npos);
  CHECK(r.variants[3].log_tail.find("Load weight end") != std::string::npos);
  CHECK(r.variants[4].status == "not run");
  CHECK_FALSE(r.passed());

  // eagle3 150 ± 3 against 100 ± 2, three runs each: 1.5, [1.432, 1.568] (see test_report_stats).
  const auto& eagle = single_row(r, "eagle3");
  REQUIRE(eagle.speedup);
  CHECK(eagle.speedup->value == doctest::Approx(1.5));
  CHECK(*eagle.speedup->low == doctest::Approx(1.4319918).epsilon(1e-6));
  CHECK(*eagle.speedup->high == doctest::Approx(1.5680082).epsilon(1e-6));
  CHECK(eagle.verdict == Verdict::faster);
  CHECK(eagle.tok_s->n == 3);
  CHECK(eagle.tok_s->stdev == doctest::Approx(3.0));
  // 99 ± 4 against 100 ± 2: the interval holds 1.0.
  CHECK(single_row(r, "eagle3-steps4").verdict == Verdict::inconclusive);
  CHECK(single_row(r, "baseline").verdict == Verdict::baseline);
  CHECK(single_row(r, "eagle3-nofusion").verdict == Verdict::not_measured);
  CHECK_FALSE(single_row(r, "eagle3-nofusion").tok_s);

  REQUIRE(r.levels.size() == 1);
  const auto& levels = r.levels[0];
  CHECK(levels.levels == std::vector<double>{1, 8, 64});
  // eagle3: 1.5x at c1, 7/6 at c8, 0.75 at c64; the crossing lies where
  // log-linear interpolation puts speedup 1: 8 * 8^(0.1667/0.4167) = 8^1.4 = 18.379.
  const auto& crossing = levels.rows[1].crossover;
  CHECK(crossing.kind == report::Crossover::Kind::crosses);
  CHECK(*crossing.last_faster == 8);
  CHECK(*crossing.first_not_faster == 64);
  CHECK(*crossing.estimate == doctest::Approx(18.3792).epsilon(1e-4));
  CHECK(*levels.rows[1].levels[2].speedup == doctest::Approx(0.75));
  CHECK(levels.rows[2].crossover.kind == report::Crossover::Kind::never_faster);
  CHECK(levels.rows[0].crossover.kind == report::Crossover::Kind::none);
  CHECK_FALSE(levels.rows[3].levels[0].tok_s);

  REQUIRE(r.expectations.size() == 3);
  CHECK(r.expectations[0].reproduced);
  CHECK(*r.expectations[0].delta_pct == doctest::Approx(0.0));
  CHECK_FALSE(r.expectations[1].reproduced);
  CHECK(*r.expectations[1].delta_pct == doctest::Approx(-16.6667).epsilon(1e-4));
  CHECK(r.expectations[1].level == "c64");
  CHECK_FALSE(r.expectations[2].measured);
  CHECK_FALSE(r.expectations[2].reproduced);

  REQUIRE(r.commands.size() == 1);
  CHECK(r.commands[0].metrics == std::vector<std::string>{"gsm8k_accuracy"});
  CHECK(*r.commands[0].rows[1].second[0] == doctest::Approx(0.915));
}

TEST_CASE("report: golden Markdown, CSV and JUnit of the fixture sweep") {
  auto r = report::build_report(report::read_run(k_data / "sweep"));
  check_golden("sweep.md", report::to_markdown(r));
  check_golden("sweep.csv", report::to_csv(r));
  check_golden("sweep.junit.xml", report::to_junit(r));
}

TEST_CASE("report: another baseline, and baselines that cannot be used") {
  auto data = report::read_run(k_data / "sweep");
  auto r = report::build_report(data, {.baseline = "eagle3"});
  CHECK(r.baseline == "eagle3");
  CHECK(single_row(r, "baseline").speedup->value == doctest::Approx(100.0 / 150.0));
  CHECK(single_row(r, "baseline").verdict == Verdict::slower);

  CHECK_THROWS_WITH_AS(report::build_report(data, {.baseline = "eagle"}),
                       "--baseline \"eagle\": not a variant of this run (did you mean \"eagle3\"?)", specctl::Error);

  // A failed baseline: no speedups, and a note saying why.
  auto failed = report::build_report(data, {.baseline = "eagle3-nofusion"});
  CHECK_FALSE(single_row(failed, "eagle3").speedup);
  CHECK(single_row(failed, "eagle3").verdict == Verdict::not_measured);
  REQUIRE_FALSE(failed.notes.empty());
  CHECK(failed.notes[0].find("did not finish (failed)") != std::string::npos);
}

TEST_CASE("report: a folder that is not a run is named in one line") {
  specctl::test::TempDir dir;
  CHECK_THROWS_WITH_AS(report::read_run(dir.path()),
                       doctest::Contains("run.json: cannot read run.json"), specctl::Error);
  std::ofstream(dir / "run.json") << "{\"format\": \"specctl-run\", \"variants\": [";
  CHECK_THROWS_WITH_AS(report::read_run(dir.path()), doctest::Contains("run.json: not valid JSON"), specctl::Error);
  std::ofstream(dir / "run.json") << R"({"format": "specctl-run", "variants": []})";
  CHECK_THROWS_WITH_AS(report::read_run(dir.path()), doctest::Contains("experiment.json: cannot read"), specctl::Error);
}

TEST_CASE("report: compare two runs, before and after") {
  specctl::test::TempDir dir;
  fs::copy(k_data / "sweep", dir / "after", fs::copy_options::recursive);
  // After: eagle3's runs slower (147 → 120 ± 3), baseline unchanged, eagle3-steps4 failing now.
  auto path = dir / "after" / "variants" / "eagle3" / "result.json";
  auto doc = nlohmann::json::parse(read_file(path));
  doc["benchmarks"]["single-stream"]["result"]["runs"] =
      nlohmann::json::array({{{"ok", true}, {"tok_s", 117}}, {{"ok", true}, {"tok_s", 120}}, {{"ok", true}, {"tok_s", 123}}});
  doc["benchmarks"]["parallel"]["levels"][2]["metrics"]["output_tok_s"] = 1530;
  std::ofstream(path) << doc.dump();
  auto steps4 = dir / "after" / "variants" / "eagle3-steps4" / "result.json";
  doc = nlohmann::json::parse(read_file(steps4));
  doc["status"] = "failed";
  doc["reason"] = "load: timed out";
  std::ofstream(steps4) << doc.dump();

  auto c = report::compare_runs(report::read_run(k_data / "sweep"), report::read_run(dir / "after"));
  REQUIRE(c.variants.size() == 5);
  CHECK(c.regressed());
  const auto& base = c.variants[0];
  CHECK_FALSE(base.single_stream.empty());
  CHECK(base.single_stream[0].verdict == Verdict::inconclusive);
  CHECK(base.single_stream[0].change->value == doctest::Approx(1.0));
  const auto& eagle = c.variants[1];
  // 120 ± 3 after 150 ± 3: 0.8, well outside noise.
  CHECK(eagle.single_stream[0].change->value == doctest::Approx(0.8));
  CHECK(eagle.single_stream[0].verdict == Verdict::slower);
  // c64 1500 → 1530: +2%, within the 5% a single measurement is allowed.
  CHECK(eagle.levels[2].change == doctest::Approx(1.02));
  CHECK(eagle.levels[2].verdict == Verdict::inconclusive);
  CHECK(c.variants[2].after_status == "failed");

  auto md = report::compare_markdown(c);
  CHECK(md.find("**REGRESSED: ") != std::string::npos);
  CHECK(md.find("| eagle3-steps4   | ok      | failed  | was ok, now failed") != std::string::npos);
  auto junit = report::compare_junit(c);
  CHECK(junit.find("tests=\"5\" failures=\"2\"") != std::string::npos);

  auto same = report::compare_runs(report::read_run(k_data / "sweep"), report::read_run(k_data / "sweep"));
  CHECK_FALSE(same.regressed());

  // A different experiment is refused by name.
  auto run = nlohmann::json::parse(read_file(dir / "after" / "run.json"));
  run["experiment"] = "other";
  std::ofstream(dir / "after" / "run.json") << run.dump();
  CHECK_THROWS_WITH_AS(report::compare_runs(report::read_run(k_data / "sweep"), report::read_run(dir / "after")),
                       doctest::Contains("holds \"other\": compare runs of the same experiment"), specctl::Error);
}
