#include "../support/files.hpp"
#include "../support/golden.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/report/compare.hpp>
#include <specctl/report/report.hpp>
#include <specctl/util/error.hpp>

#include <cstdlib>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

namespace fs = std::filesystem;
namespace report = specctl::report;
using report::Verdict;
using specctl::test::check_golden;
using specctl::test::read_file;

namespace {

const fs::path k_data = fs::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "report";
// The expected outputs; SPECCTL_UPDATE_GOLDEN=1 rewrites them (then read the diff before committing it).
const fs::path k_golden = k_data / "golden";

const report::SingleStreamRow& single_row(const report::Report& r, std::string_view variant) {
  for (const auto& row : r.single_stream.at(0).rows) {
    if (row.variant == variant) {
      return row;
    }
  }
  throw std::runtime_error("no row " + std::string(variant));
}

} // namespace

TEST_CASE("report: figures of the fixture sweep, checked against hand-computed values") {
  auto r = report::build_report(report::read_run(k_data / "sweep"));
  CHECK(r.experiment == "sweep");
  CHECK(r.baseline == "baseline");
  REQUIRE(r.variants.size() == 5);
  CHECK(r.variants[3].status == report::VariantStatus::failed);
  CHECK(r.variants[3].reason.find("CUDA out of memory") != std::string::npos);
  CHECK(r.variants[3].log_tail.find("Load weight end") != std::string::npos);
  CHECK(r.variants[4].status == report::VariantStatus::not_run);
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
  // Each level measured once: the ratio, and no verdict and no crossover from one sample.
  CHECK(levels.rows[1].levels[2].speedup->value == doctest::Approx(0.75));
  CHECK_FALSE(levels.rows[1].levels[2].speedup->low);
  CHECK(levels.rows[1].levels[2].verdict == Verdict::one_sample);
  CHECK(levels.rows[1].crossover.runs.size() == 1);
  CHECK_FALSE(levels.rows[1].crossover.estimate);
  CHECK(levels.rows[0].levels[0].verdict == Verdict::baseline);
  CHECK(levels.rows[0].crossover.runs.empty());
  CHECK_FALSE(levels.rows[3].levels[0].tok_s);
  CHECK(levels.rows[3].levels[0].verdict == Verdict::not_measured);
  // Results from before counts were recorded: no failure shown, none invented.
  CHECK(levels.rows[1].levels[0].counts.requests == 0);
  CHECK(r.variants[1].flags.empty());

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
  check_golden(report::to_markdown(r), k_golden / "sweep.md");
  check_golden(report::to_csv(r), k_golden / "sweep.csv");
  check_golden(report::to_junit(r), k_golden / "sweep.junit.xml");
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
  CHECK_THROWS_WITH_AS(report::read_run(dir.path()), doctest::Contains("run.json: cannot read run.json"),
                       specctl::Error);
  std::ofstream(dir / "run.json") << "{\"format\": \"specctl-run\", \"variants\": [";
  CHECK_THROWS_WITH_AS(report::read_run(dir.path()), doctest::Contains("run.json: not valid JSON"), specctl::Error);
  std::ofstream(dir / "run.json") << R"({"format": "specctl-run", "variants": []})";
  CHECK_THROWS_WITH_AS(report::read_run(dir.path()), doctest::Contains("experiment.json: cannot read"), specctl::Error);
}

namespace {

const report::LevelsRow& levels_row(const report::Report& r, std::string_view variant) {
  for (const auto& row : r.levels.at(0).rows) {
    if (row.variant == variant) {
      return row;
    }
  }
  throw std::runtime_error("no row " + std::string(variant));
}

const report::VariantRow& variant(const report::Report& r, std::string_view name) {
  const auto* v = r.find_variant(std::string(name));
  REQUIRE(v != nullptr);
  return *v;
}

} // namespace

TEST_CASE("report: repeated levels, the A/A noise, a failed majority and a few failed requests") {
  auto r = report::build_report(report::read_run(k_data / "honest"));
  CHECK(r.repeat == "baseline-again");
  CHECK(variant(r, "baseline-again").repeat_of == "baseline");

  // broken: 18 of its 20 single-stream runs failed, so the run failed it (ResultWriter):
  // not measured, no speedup, no verdict, and the variant's failure says why.
  const auto& broken = single_row(r, "broken");
  CHECK(broken.counts.failed == 18);
  CHECK(broken.counts.requests == 20);
  CHECK(broken.tok_s->n == 2);
  CHECK_FALSE(broken.speedup);
  CHECK(broken.verdict == Verdict::not_measured);
  CHECK(broken.why == "18 of 20 requests failed (90%, more than 5%)");
  CHECK(variant(r, "broken").status == report::VariantStatus::failed);
  CHECK(variant(r, "broken").reason ==
        "bench single-stream: 18 of 20 requests failed (90%, more than 5%): not measured");
  CHECK_FALSE(r.passed());

  // flaky: 2 of 462 requests failed (0.4%): measured, the cell says so, the variant is flagged.
  const auto& flaky = levels_row(r, "flaky");
  CHECK(flaky.levels[1].counts.failed == 2);
  CHECK(flaky.levels[1].counts.requests == 48);
  CHECK(flaky.levels[1].verdict == Verdict::inconclusive);
  CHECK(variant(r, "flaky").status == report::VariantStatus::ok);
  REQUIRE(variant(r, "flaky").flags.size() == 1);
  CHECK(variant(r, "flaky").flags[0] == "benchmark \"parallel\": 2 of 462 requests failed (0.4%)");

  // eagle3, three repeats a level: c1 1.5x, clearly faster; c8 615 vs 600 (+2.5%)
  // has an interval above 1 but lies within the A/A noise there (580 vs 600:
  // 3.3%), so it is inconclusive; c64 0.75x, slower.
  const auto& eagle = levels_row(r, "eagle3");
  CHECK(eagle.levels[0].tok_s->n == 3);
  CHECK(eagle.levels[0].tok_s->mean == doctest::Approx(150));
  CHECK(eagle.levels[0].tok_s->stdev == doctest::Approx(2));
  CHECK(eagle.levels[0].verdict == Verdict::faster);
  CHECK(eagle.levels[1].speedup->value == doctest::Approx(1.025));
  CHECK(*eagle.levels[1].speedup->low > 1.0);
  CHECK(eagle.levels[1].verdict == Verdict::inconclusive);
  CHECK(eagle.levels[1].why == "within the A/A noise (±3.3%)");
  CHECK(eagle.levels[2].verdict == Verdict::slower);
  REQUIRE(eagle.crossover.runs.size() == 3);
  // Between c1 (1.5x) and c64 (0.75x), 1.0 lies at 64^(0.5/0.75) = 16.
  CHECK(*eagle.crossover.estimate == doctest::Approx(16.0).epsilon(1e-6));
  CHECK(eagle.levels[0].sources.accept_length == "server log lines");
  CHECK(eagle.levels[0].sources.tokens == "usage");
  CHECK(eagle.levels[0].accept_length == doctest::Approx(2.8));

  // The A/A row: the repeat against the baseline, and per metric in the noise table.
  const auto& again = levels_row(r, "baseline-again");
  CHECK(again.levels[1].verdict == Verdict::repeat);
  CHECK(again.crossover.runs.empty());
  bool found = false;
  for (const auto& n : r.noise) {
    if (n.benchmark == "parallel" && n.level == "c8" && n.metric == "output_tok_s") {
      found = true;
      CHECK(*n.difference_pct == doctest::Approx(-10.0 / 3.0));
    }
  }
  CHECK(found);
  // Expectations at a repeated level hold against the mean of its repeats.
  REQUIRE(r.expectations.size() == 1);
  CHECK(*r.expectations[0].measured == doctest::Approx(150));
}

TEST_CASE("report: golden Markdown, CSV, JSON, JUnit and terminal of repeated, noisy and failing results") {
  auto r = report::build_report(report::read_run(k_data / "honest"));
  check_golden(report::to_markdown(r), k_golden / "honest.md");
  check_golden(report::to_csv(r), k_golden / "honest.csv");
  check_golden(report::to_json(r), k_golden / "honest.json");
  check_golden(report::to_junit(r), k_golden / "honest.junit.xml");
  check_golden(report::to_terminal(r), k_golden / "honest.terminal.txt");
  check_golden(report::to_terminal(report::build_report(report::read_run(k_data / "sweep"))),
               k_golden / "sweep.terminal.txt");
}

namespace {

// The cells of a Markdown-style table: header row first; separator rows left out.
std::vector<std::vector<std::string>> table_cells(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("|") || line.starts_with("| --") || line.starts_with("|--")) {
      continue;
    }
    std::vector<std::string> cells;
    std::size_t at = 1;
    while (at < line.size()) {
      auto bar = line.find(" |", at);
      if (bar == std::string::npos) {
        break;
      }
      std::string cell = line.substr(at, bar - at);
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
      at = bar + 2;
    }
    rows.push_back(cells);
  }
  return rows;
}

} // namespace

TEST_CASE("report: the terminal table says what report.json says, cell by cell") {
  for (const char* fixture : {"honest", "sweep"}) {
    CAPTURE(fixture);
    auto r = report::build_report(report::read_run(k_data / fixture));
    auto doc = nlohmann::json::parse(report::to_json(r));
    auto cells = table_cells(report::to_terminal(r));
    REQUIRE(cells.size() == 1 + doc["variants"].size());
    const auto& header = cells[0];
    auto column = [&](const std::string& name) {
      auto at = std::find(header.begin(), header.end(), name);
      REQUIRE(at != header.end());
      return static_cast<std::size_t>(at - header.begin());
    };
    auto fixed = [](const nlohmann::json& v, int decimals) {
      return v.is_number() ? fmt::format("{:.{}f}", v.get<double>(), decimals) : std::string("-");
    };
    int compared = 0;
    for (std::size_t i = 0; i < doc["variants"].size(); ++i) {
      const auto& v = doc["variants"][i];
      const auto& row = cells[i + 1];
      CHECK(row[0] == v["name"].get<std::string>());
      CHECK(row[1] == v["status"].get<std::string>());
      CHECK(row[column("accept len")] == fixed(v["accept_length"], 2));
      CHECK(row[column("load s")] == fixed(v["load_s"], 1));
      for (const auto& t : doc["single_stream"]) {
        const auto& s = t["rows"][i];
        // report.md's tok/s cell: the mean (its stdev and failures have columns of their own there).
        std::string expected = s["output_tok_s"].is_null() ? "-" : fixed(s["output_tok_s"]["mean"], 1);
        CHECK(row[column(t["benchmark"].get<std::string>() + " tok/s")] == expected);
        ++compared;
      }
      for (const auto& t : doc["levels"]) {
        for (const auto& cell : t["rows"][i]["levels"]) {
          const auto& tok_s = cell["output_tok_s"];
          std::string expected = tok_s.is_null() ? "-"
                                 : tok_s["n"].get<int>() < 2
                                     ? fixed(tok_s["mean"], 1)
                                     : fixed(tok_s["mean"], 1) + " ± " + fixed(tok_s["stdev"], 1);
          if (cell["requests"]["failed"].get<int>() > 0) {
            expected += fmt::format(" ({} of {} failed)", cell["requests"]["failed"].get<int>(),
                                    cell["requests"]["requests"].get<int>());
          }
          CHECK(row[column(t["benchmark"].get<std::string>() + " " + cell["label"].get<std::string>())] == expected);
          ++compared;
        }
      }
    }
    CHECK(compared > 10);
  }
}

namespace {

const report::CategoryRow& category_row(const report::CategoryTable& t, std::string_view variant) {
  for (const auto& row : t.rows) {
    if (row.variant == variant) {
      return row;
    }
  }
  throw std::runtime_error("no row " + std::string(variant));
}

// The text of one "## " section of report.md, up to the next one.
std::string md_section(const std::string& md, const std::string& heading) {
  auto start = md.find(fmt::format("## {}\n", heading));
  if (start == std::string::npos) {
    return "";
  }
  auto end = md.find("\n## ", start);
  return md.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start);
}

} // namespace

// tests/data/report/categories: baseline, eagle3 and old over three benchmarks.
// "single" and "parallel" (c1 and c8, two repeats) ran built-in prompts in three
// categories; only c8 has per-category figures, eagle3's second repeat there one
// more category (writing), and old none at all. "plain" has none anywhere.
TEST_CASE("report: figures per category in the workload's order, with the repeats of a level averaged") {
  auto r = report::build_report(report::read_run(k_data / "categories"));
  REQUIRE(r.categories.size() == 2);

  const auto& single = r.categories[0];
  CHECK(single.benchmark == "single");
  CHECK(single.kind == "single_stream");
  CHECK(single.level.empty());
  // category_order, not the sorted keys of by_category.
  CHECK(single.categories == std::vector<std::string>{"conversation", "code", "math"});
  REQUIRE(single.rows.size() == 3);
  const auto& eagle = category_row(single, "eagle3");
  CHECK(eagle.accept_length_source == "server log lines");
  CHECK(*eagle.categories[1]->accept_length == doctest::Approx(3.25));
  CHECK(*eagle.categories[1]->tok_s == doctest::Approx(230.0));
  CHECK(eagle.categories[1]->counts.completed == 2);
  // No accept length for math: the figure is missing, the category is not.
  CHECK_FALSE(eagle.categories[2]->accept_length);
  CHECK(*eagle.categories[2]->tok_s == doctest::Approx(150.0));
  CHECK(category_row(single, "baseline").accept_length_source.empty());
  // old has no per-category figures: a row with nothing in it, not a missing row.
  for (const auto& figures : category_row(single, "old").categories) {
    CHECK_FALSE(figures);
  }

  // c1 has no per-category figures in any variant: no table for it.
  const auto& parallel = r.categories[1];
  CHECK(parallel.benchmark == "parallel");
  CHECK(parallel.kind == "concurrency");
  CHECK(parallel.level == "c8");
  CHECK(parallel.repeats == 2);
  CHECK(parallel.categories == std::vector<std::string>{"conversation", "code", "math", "writing"});
  const auto& at_c8 = category_row(parallel, "eagle3");
  // code: tok/s 120 and 130, accept length 3.0 and 3.5, 5 + 5 completed and 0 + 1 failed.
  CHECK(*at_c8.categories[1]->tok_s == doctest::Approx(125.0));
  CHECK(*at_c8.categories[1]->accept_length == doctest::Approx(3.25));
  CHECK(at_c8.categories[1]->counts.completed == 10);
  CHECK(at_c8.categories[1]->counts.failed == 1);
  CHECK(at_c8.categories[1]->counts.requests == 11);
  // conversation: an accept length in the first repeat only, so the mean of that one.
  CHECK(*at_c8.categories[0]->accept_length == doctest::Approx(2.0));
  CHECK(*at_c8.categories[0]->tok_s == doctest::Approx(105.0));
  // writing: the second repeat only.
  CHECK(at_c8.categories[3]->counts.completed == 3);
  CHECK(*at_c8.categories[3]->tok_s == doctest::Approx(70.0));
  CHECK_FALSE(category_row(parallel, "baseline").categories[3]);
  CHECK(*category_row(parallel, "baseline").categories[0]->tok_s == doctest::Approx(61.0));

  for (const auto& t : r.categories) {
    CHECK(t.benchmark != "plain");
  }
}

TEST_CASE("report: categories without category_order keep the order of by_category's keys") {
  auto data = report::read_run(k_data / "categories");
  for (auto& [variant, result] : data.results) {
    result["benchmarks"]["single"].erase("category_order");
  }
  auto r = report::build_report(data);
  REQUIRE_FALSE(r.categories.empty());
  // nlohmann::json reads keys back sorted.
  CHECK(r.categories[0].categories == std::vector<std::string>{"code", "conversation", "math"});
}

TEST_CASE("report: the Per category section of report.md") {
  auto r = report::build_report(report::read_run(k_data / "categories"));
  const std::string md = report::to_markdown(r);
  CHECK(md_section(md, "Per category") ==
        R"(## Per category

The workload's prompt categories one by one, a column per variant; each cell is accept length · tok/s per request.

### single (single stream)

| category     |  baseline |       eagle3 |  old |
| ------------ | --------: | -----------: | ---: |
| conversation | — · 101.0 | 2.50 · 180.0 |    — |
| code         |  — · 99.5 | 3.25 · 230.0 |    — |
| math         | — · 100.4 |    — · 150.0 |    — |

tok/s per request: output tokens / end-to-end time of each completed request, averaged over the category (not the throughput above); accept length from server log lines (eagle3); —: not reported.

### parallel at c8

| category     | baseline |                        eagle3 |  old |
| ------------ | -------: | ----------------------------: | ---: |
| conversation | — · 61.0 |                  2.00 · 105.0 |    — |
| code         | — · 63.0 | 3.25 · 125.0 (1 of 11 failed) |    — |
| math         | — · 59.0 |                      — · 92.0 |    — |
| writing      |        — |                   1.80 · 70.0 |    — |

tok/s per request: output tokens / end-to-end time of each completed request, averaged over the category (not the throughput above); means over the level's 2 repeats, of those that have the figure; accept length from server log lines (eagle3); —: not reported.

)");
  // After the benchmark tables.
  CHECK(md.find("## Per category") > md.find("## plain (single stream)"));
  CHECK(md.find("### plain") == std::string::npos);
  // Results without categories get no section at all.
  CHECK(report::to_markdown(report::build_report(report::read_run(k_data / "honest"))).find("Per category") ==
        std::string::npos);
}

TEST_CASE("report: per-category figures in report.csv and report.json") {
  auto r = report::build_report(report::read_run(k_data / "categories"));
  const std::string csv = report::to_csv(r);
  CHECK(csv.find("\nconcurrency,eagle3,ok,parallel,c8,request_tok_s[code],125,,,10,1,,,,,,,,,,\n") !=
        std::string::npos);
  CHECK(csv.find("\nconcurrency,eagle3,ok,parallel,c8,accept_length[code],3.25,,,,,,,,,,,,,,\n") != std::string::npos);
  CHECK(csv.find("\nsingle_stream,baseline,ok,single,,request_tok_s[math],100.4,,,2,0,,,,,,,,,,\n") !=
        std::string::npos);
  // No accept length, no row; no figures at all (old), no rows.
  CHECK(csv.find("accept_length[math]") == std::string::npos);
  CHECK(csv.find(",old,ok,single,,request_tok_s") == std::string::npos);

  auto doc = nlohmann::json::parse(report::to_json(r));
  REQUIRE(doc["categories"].size() == 2);
  const auto& c8 = doc["categories"][1];
  CHECK(c8["level"] == "c8");
  CHECK(c8["categories"] == nlohmann::json{"conversation", "code", "math", "writing"});
  const auto& eagle = c8["rows"][1];
  CHECK(eagle["variant"] == "eagle3");
  CHECK(eagle["accept_length_source"] == "server log lines");
  CHECK(eagle["categories"]["code"]["tok_s"] == 125.0);
  CHECK(eagle["categories"]["code"]["requests"]["failed"] == 1);
  CHECK(eagle["categories"]["math"]["accept_length"].is_null());
  CHECK(c8["rows"][2]["categories"]["code"].is_null());
  // The categories in the workload's order in the text too (an ordered object).
  const std::string text = report::to_json(r);
  CHECK(text.find("\"conversation\": {") < text.find("\"code\": {"));
}

TEST_CASE("report: request length histograms are the baseline's, or else the first variant's that has them") {
  auto data = report::read_run(k_data / "categories");
  auto r = report::build_report(data);
  REQUIRE(r.lengths.size() == 2);
  const auto& single = r.lengths[0];
  CHECK(single.benchmark == "single");
  CHECK(single.variant == "baseline");
  REQUIRE(single.input_tokens);
  CHECK(single.input_tokens->lo == 0);
  CHECK(single.input_tokens->width == 64);
  CHECK(single.input_tokens->counts == std::vector<int>{1, 3, 2});
  CHECK(single.input_tokens->requests == 6);
  REQUIRE(single.output_tokens);
  CHECK(single.output_tokens->lo == 192);
  CHECK(single.same == std::vector<std::string>{"eagle3"});
  // old's prompts came out differently: said, not hidden.
  CHECK(single.differing == std::vector<std::string>{"old"});
  // The baseline has none for parallel: eagle3's.
  CHECK(r.lengths[1].benchmark == "parallel");
  CHECK(r.lengths[1].variant == "eagle3");
  CHECK(r.lengths[1].input_tokens->counts == std::vector<int>{5, 0, 7, 2});

  // A histogram that cannot be drawn (no bin width) is as missing as none.
  data.results["baseline"]["benchmarks"]["single"]["lengths"]["input_tokens"]["width"] = 0;
  data.results["baseline"]["benchmarks"]["single"]["lengths"].erase("output_tokens");
  data.results["eagle3"]["benchmarks"]["single"].erase("lengths");
  data.results["old"]["benchmarks"]["single"].erase("lengths");
  auto none = report::build_report(data);
  REQUIRE(none.lengths.size() == 1);
  CHECK(none.lengths[0].benchmark == "parallel");
}
