// report/compare: two runs of one experiment, variant by variant, by the report's
// verdict rule (judge): a regression only outside the intervals and the A/A noise.
#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/report/compare.hpp>
#include <specctl/report/report.hpp>
#include <specctl/util/error.hpp>

#include <algorithm>
#include <doctest/doctest.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>

namespace fs = std::filesystem;
namespace report = specctl::report;
using report::Verdict;
using specctl::test::read_file;

namespace {

const fs::path k_compare_data = fs::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "report";

// A copy of a fixture run as `after`, with `variant`'s output tok/s at each level times factor(concurrency).
fs::path scaled_copy(const specctl::test::TempDir& dir, const std::string& fixture, const std::string& variant,
                     const std::function<double(int)>& factor) {
  fs::copy(k_compare_data / fixture, dir / "after", fs::copy_options::recursive);
  auto path = dir / "after" / "variants" / variant / "result.json";
  auto doc = nlohmann::json::parse(read_file(path));
  for (auto& level : doc["benchmarks"]["parallel"]["levels"]) {
    level["metrics"]["output_tok_s"] = level["metrics"]["output_tok_s"].get<double>() * factor(level["concurrency"]);
  }
  std::ofstream(path) << doc.dump();
  return dir / "after";
}

const report::VariantChange& change_of(const report::Comparison& c, std::string_view variant) {
  for (const auto& v : c.variants) {
    if (v.variant == variant) {
      return v;
    }
  }
  throw std::runtime_error("no variant " + std::string(variant));
}

} // namespace

TEST_CASE("report: compare two runs, before and after") {
  specctl::test::TempDir dir;
  fs::copy(k_compare_data / "sweep", dir / "after", fs::copy_options::recursive);
  // After: eagle3's runs slower (147 → 120 ± 3), baseline unchanged, eagle3-steps4 failing now.
  auto path = dir / "after" / "variants" / "eagle3" / "result.json";
  auto doc = nlohmann::json::parse(read_file(path));
  doc["benchmarks"]["single-stream"]["result"]["runs"] = nlohmann::json::array(
      {{{"ok", true}, {"tok_s", 117}}, {{"ok", true}, {"tok_s", 120}}, {{"ok", true}, {"tok_s", 123}}});
  doc["benchmarks"]["parallel"]["levels"][2]["metrics"]["output_tok_s"] = 1530;
  std::ofstream(path) << doc.dump();
  auto steps4 = dir / "after" / "variants" / "eagle3-steps4" / "result.json";
  doc = nlohmann::json::parse(read_file(steps4));
  doc["status"] = "failed";
  doc["reason"] = "load: timed out";
  std::ofstream(steps4) << doc.dump();

  auto c = report::compare_runs(report::read_run(k_compare_data / "sweep"), report::read_run(dir / "after"));
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
  // c64 1500 → 1530: one measurement a side gives a ratio and no verdict.
  CHECK(eagle.levels[2].change->value == doctest::Approx(1.02));
  CHECK(eagle.levels[2].verdict == Verdict::one_sample);
  CHECK(c.variants[2].after_status == report::VariantStatus::failed);

  auto md = report::compare_markdown(c);
  CHECK(md.find("**REGRESSED: ") != std::string::npos);
  CHECK(md.find("| eagle3-steps4   | ok      | failed  | was ok, now failed") != std::string::npos);
  auto junit = report::compare_junit(c);
  CHECK(junit.find("tests=\"5\" failures=\"2\"") != std::string::npos);

  auto same =
      report::compare_runs(report::read_run(k_compare_data / "sweep"), report::read_run(k_compare_data / "sweep"));
  CHECK_FALSE(same.regressed());

  // A different experiment is refused by name.
  auto run = nlohmann::json::parse(read_file(dir / "after" / "run.json"));
  run["experiment"] = "other";
  std::ofstream(dir / "after" / "run.json") << run.dump();
  CHECK_THROWS_WITH_AS(
      report::compare_runs(report::read_run(k_compare_data / "sweep"), report::read_run(dir / "after")),
      doctest::Contains("holds \"other\": compare runs of the same experiment"), specctl::Error);
}

TEST_CASE("report: compare declares a regression only outside the intervals and the A/A noise") {
  specctl::test::TempDir dir;
  // After: eagle3 at c8 2% slower (within the 3.3% A/A noise), at c64 10% slower.
  auto after = scaled_copy(dir, "honest", "eagle3", [](int c) { return c == 8 ? 0.98 : c == 64 ? 0.9 : 1.0; });
  auto c = report::compare_runs(report::read_run(k_compare_data / "honest"), report::read_run(after));
  const report::VariantChange* eagle = &change_of(c, "eagle3");
  REQUIRE(eagle->levels.size() == 3);
  CHECK(eagle->levels[0].verdict == Verdict::inconclusive);
  CHECK(eagle->levels[1].change->value == doctest::Approx(0.98));
  CHECK(*eagle->levels[1].change->high < 1.0);
  CHECK(eagle->levels[1].verdict == Verdict::inconclusive);
  CHECK(eagle->levels[1].why == "within the A/A noise (±3.3%)");
  CHECK(eagle->levels[2].verdict == Verdict::slower);
  CHECK(c.regressed());
  // broken's single stream is refused on both sides: no verdict.
  for (const auto& v : c.variants) {
    if (v.variant == "broken") {
      CHECK(v.single_stream[0].verdict == Verdict::not_measured);
    }
  }
}

TEST_CASE("report: compare's CSV and JSON say what its model says, and a variant on one side only is named") {
  specctl::test::TempDir dir;
  // After: eagle3 10% faster at every level; eagle3-steps4 has no result (the run stopped before it).
  auto after = scaled_copy(dir, "sweep", "eagle3", [](int) { return 1.1; });
  fs::remove(after / "variants" / "eagle3-steps4" / "result.json");
  auto c = report::compare_runs(report::read_run(k_compare_data / "sweep"), report::read_run(after));
  const auto& eagle = change_of(c, "eagle3");
  REQUIRE_FALSE(eagle.levels.empty());
  for (const auto& level : eagle.levels) {
    CHECK(level.change->value == doctest::Approx(1.1));
    // One measurement a side: a ratio, never a verdict.
    CHECK(level.verdict == Verdict::one_sample);
  }
  const auto& gone = change_of(c, "eagle3-steps4");
  CHECK(gone.before_status == report::VariantStatus::ok);
  CHECK(gone.after_status == report::VariantStatus::not_run);
  // A variant that was ok and did not run after is a regression.
  CHECK(c.regressed());

  auto json = nlohmann::json::parse(report::compare_json(c));
  REQUIRE(json["variants"].is_array());
  CHECK(json["variants"].size() == c.variants.size());
  auto csv = report::compare_csv(c);
  CHECK(csv.find("eagle3-steps4") != std::string::npos);
  // A header line and at least one line per level of eagle3.
  CHECK(std::count(csv.begin(), csv.end(), '\n') > static_cast<long>(eagle.levels.size()));
  CHECK_THROWS_AS(report::render(c, "pdf"), specctl::Error);
}
