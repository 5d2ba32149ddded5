// report: GPU telemetry (issue #20). tests/data/report/telemetry holds three
// variants: baseline (one GPU) and eagle3 (two) sampled at every level, eagle3's
// GPUs throttled by their power cap in its second repeat of c8 (and below the 5%
// that flags it in the first), and nosmi on a host without nvidia-smi.
#include "../support/files.hpp"
#include "../support/golden.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/report/compare.hpp>
#include <specctl/report/report.hpp>
#include <specctl/util/diagnostics.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

namespace fs = std::filesystem;
namespace report = specctl::report;
using report::Verdict;
using specctl::test::check_golden;
using specctl::test::read_file;

namespace {

const fs::path k_telemetry_data = fs::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "report";

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

report::Report telemetry_report() {
  return report::build_report(report::read_run(k_telemetry_data / "telemetry"));
}

template <typename Row> const Row& row_of(const std::vector<Row>& rows, std::string_view variant) {
  for (const auto& row : rows) {
    if (row.variant == variant) {
      return row;
    }
  }
  throw std::runtime_error("no row " + std::string(variant));
}

// The lines of `text` that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    auto end = text.find('\n', at);
    std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.find(needle) != std::string::npos) {
      out.push_back(line);
    }
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

const char* const k_throttle_flag = "parallel c8, repeat 2: throttled: sw_power_cap 12% of the level — its figures "
                                    "may measure the cooling, not the configuration";

} // namespace

TEST_CASE("report telemetry: tok/J per level over repeats, against the baseline's by the rule of tok/s") {
  auto r = telemetry_report();
  CHECK(r.has_telemetry());
  REQUIRE(r.levels.size() == 1);
  const auto& eagle = row_of(r.levels[0].rows, "eagle3");
  // c1: 0.50 and 0.52 against 0.40 and 0.42: 1.24x, the interval above 1.
  const auto& c1 = eagle.levels[0].energy;
  CHECK(c1.sampled);
  REQUIRE(c1.tok_per_j);
  CHECK(c1.tok_per_j->n == 2);
  CHECK(c1.tok_per_j->mean == doctest::Approx(0.51));
  REQUIRE(c1.ratio);
  CHECK(c1.ratio->value == doctest::Approx(0.51 / 0.41));
  CHECK(*c1.ratio->low > 1.0);
  CHECK(c1.verdict == Verdict::faster);
  CHECK(*c1.power_w == doctest::Approx((300.0 + 294.2) / 2));
  // c8: 1.40 and 1.38 against 1.50 and 1.52: fewer tokens per joule, the interval below 1.
  const auto& c8 = eagle.levels[1].energy;
  CHECK(c8.ratio->value == doctest::Approx(1.39 / 1.51));
  CHECK(*c8.ratio->high < 1.0);
  CHECK(c8.verdict == Verdict::slower);
  CHECK(row_of(r.levels[0].rows, "baseline").levels[0].energy.verdict == Verdict::baseline);
  // nosmi was not sampled: no figure, no ratio, no verdict.
  const auto& nosmi = row_of(r.levels[0].rows, "nosmi").levels[0].energy;
  CHECK_FALSE(nosmi.sampled);
  CHECK_FALSE(nosmi.tok_per_j);
  CHECK_FALSE(nosmi.ratio);
  CHECK(nosmi.verdict == Verdict::not_measured);

  // Single stream: one window a variant, so a ratio and no verdict.
  const auto& single = row_of(r.single_stream.at(0).rows, "eagle3").energy;
  CHECK(single.ratio->value == doctest::Approx(0.6 / 0.45));
  CHECK(single.verdict == Verdict::one_sample);

  const std::string md = report::to_markdown(r);
  CHECK(md.find("| eagle3   | 0.51 ± 0.01 | 1.39 ± 0.01 (throttled) |") != std::string::npos);
  CHECK(md.find("| nosmi    |           - |                       - |") != std::string::npos);
  CHECK(md.find("tok/J vs baseline [95% CI], verdict:") != std::string::npos);
  CHECK(md.find("\n| eagle3  | 1.24× [1.07, 1.42] better | 0.92× [0.88, 0.96] worse |\n") != std::string::npos);
  CHECK(md.find("\n| nosmi   |                         - |                        - |\n") != std::string::npos);
  // The single-stream table has tok/J beside tok/s.
  CHECK(md.find("| tok/J | tok/J vs baseline | GPU W |") != std::string::npos);
  CHECK(md.find("\n| eagle3   | 150.0 |     3.0 |    3 |    0/3 |   1.50× | [1.43, 1.57] | faster   |          - |    "
                "40.0 |    6.67 |  0.60 |  1.33× one sample |   250 |\n") != std::string::npos);
  CHECK(md.find("| baseline |   c1 |   c8 |") == std::string::npos);
  CHECK(md.find("GPU power W (mean, all GPUs):\n\n| variant  |   c1 |   c8 |\n| -------- | ---: | ---: |\n"
                "| baseline |  246 |  398 |\n| eagle3   |  297 |  502 |\n| nosmi    |    - |    - |\n") !=
        std::string::npos);

  const std::string csv = report::to_csv(r);
  auto tok_per_j = lines_with(csv, "concurrency,eagle3,ok,parallel,c1,tok_per_j,");
  REQUIRE(tok_per_j.size() == 1);
  CHECK(tok_per_j[0].starts_with("concurrency,eagle3,ok,parallel,c1,tok_per_j,0.51,0.0141421,2,,,1.2439,"));
  CHECK(tok_per_j[0].ends_with(",better,,,,,,"));
  CHECK(lines_with(csv, ",tok_per_j,").size() == 3 + 2 * 2);

  auto doc = nlohmann::json::parse(report::to_json(r));
  const auto& level = doc["levels"][0]["rows"][1]["levels"][0];
  CHECK(level["label"] == "c1");
  CHECK(level["energy"]["tok_per_j"]["mean"] == doctest::Approx(0.51));
  CHECK(level["energy"]["ratio"]["value"] == doctest::Approx(0.51 / 0.41));
  CHECK(level["energy"]["verdict"] == "better");
  CHECK(doc["single_stream"][0]["rows"][1]["energy"]["verdict"] == "one sample");
  CHECK(doc["glossary"].contains("tok/J"));

  const std::string terminal = report::to_terminal(r);
  CHECK(terminal.find("| parallel c1 tok/J |") != std::string::npos);
  CHECK(terminal.find("| single tok/J |") != std::string::npos);

  const std::string html = report::to_html(r);
  CHECK(html.find("<h3>Output tok/J</h3>") != std::string::npos);
  CHECK(html.find("<th class=\"num\">Output tok/J</th>") != std::string::npos);
  // The ratio coloured by its verdict, as the speedups are.
  CHECK(html.find("<td class=\"num good\" title=\"better\">1.24× [") != std::string::npos);
  CHECK(html.find("<td class=\"num bad\" title=\"worse\">0.92× [") != std::string::npos);
}

TEST_CASE("report telemetry: a level throttled for more than 5% of its time is flagged, and no other") {
  auto r = telemetry_report();
  // Exactly eagle3's second repeat of c8: its first (4% of the time) is below the flag.
  int throttled = 0;
  for (const auto& row : r.levels.at(0).rows) {
    for (std::size_t i = 0; i < row.levels.size(); ++i) {
      for (const auto& t : row.levels[i].energy.throttled) {
        ++throttled;
        CHECK(row.variant == "eagle3");
        CHECK(r.levels[0].label(i) == "c8");
        CHECK(t.repeat == 2);
        REQUIRE(t.reasons.size() == 1);
        CHECK(t.reasons[0].first == "sw_power_cap");
        CHECK(t.reasons[0].second == doctest::Approx(0.12));
      }
    }
  }
  CHECK(throttled == 1);
  for (const auto& table : r.single_stream) {
    for (const auto& row : table.rows) {
      CHECK(row.energy.throttled.empty());
    }
  }
  const auto* eagle = r.find_variant("eagle3");
  REQUIRE(eagle != nullptr);
  CHECK(eagle->flags == std::vector<std::string>{k_throttle_flag});
  CHECK(eagle->telemetry->throttled == std::vector<std::string>{k_throttle_flag});
  CHECK(r.find_variant("baseline")->flags.empty());
  // A flag says what doubts the figures; the variant still passes.
  CHECK(eagle->status == specctl::report::VariantStatus::ok);

  // Every format, beside the level's figures and among the variant's flags.
  const std::string md = report::to_markdown(r);
  CHECK(count(md, " (throttled) |") == 1);
  CHECK(md.find(std::string("- **eagle3** at c8, repeat 2: throttled: sw_power_cap 12% of the level")) !=
        std::string::npos);
  CHECK(md.find(std::string("## Flags\n\n- **eagle3**: ") + k_throttle_flag) != std::string::npos);
  const std::string terminal = report::to_terminal(r);
  CHECK(count(terminal, " (throttled) |") == 1);
  CHECK(terminal.find(std::string("- eagle3: ") + k_throttle_flag) != std::string::npos);
  const std::string csv = report::to_csv(r);
  auto rows = lines_with(csv, "throttle[");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].starts_with("concurrency,eagle3,ok,parallel,c8,throttle[sw_power_cap],0.12,"));
  CHECK(rows[0].find("repeat 2: throttled: sw_power_cap 12% of the level") != std::string::npos);
  auto doc = nlohmann::json::parse(report::to_json(r));
  CHECK(doc["levels"][0]["rows"][1]["levels"][1]["energy"]["throttled"][0]["repeat"] == 2);
  CHECK(doc["levels"][0]["rows"][1]["levels"][1]["energy"]["throttled"][0]["reasons"]["sw_power_cap"] == 0.12);
  CHECK(doc["levels"][0]["rows"][1]["levels"][0]["energy"]["throttled"].empty());
  CHECK(doc["variants"][1]["flags"][0] == k_throttle_flag);
  const std::string html = report::to_html(r);
  CHECK(count(html, ">(throttled)</span>") == 1);
  CHECK(html.find("<div class=\"flag\">flag: parallel c8, repeat 2: throttled: sw_power_cap 12%") != std::string::npos);
  // JUnit has no warnings: the variant passes, and says it in its system-err.
  const std::string junit = report::to_junit(r);
  CHECK(junit.find("<testcase classname=\"telemetry.variants\" name=\"eagle3\" time=\"300.000\">\n"
                   "      <system-err>warning: parallel c8, repeat 2: throttled: sw_power_cap 12% of the level") !=
        std::string::npos);
  CHECK(junit.find("<testcase classname=\"telemetry.variants\" name=\"baseline\" time=\"300.000\"/>") !=
        std::string::npos);
}

TEST_CASE("report telemetry: peak memory while loading, and what could not be sampled") {
  auto r = telemetry_report();
  const auto& base = r.find_variant("baseline")->telemetry;
  REQUIRE(base);
  REQUIRE(base->load);
  CHECK(base->load->gpus == std::vector<int>{0});
  CHECK(base->energy_source == "counter");
  const auto& eagle = r.find_variant("eagle3")->telemetry;
  REQUIRE(eagle->load);
  CHECK(eagle->load->peak_mib == std::vector<double>{120000, 119800});
  CHECK(*eagle->load->total_mib == 143771);
  const auto& nosmi = r.find_variant("nosmi")->telemetry;
  REQUIRE(nosmi);
  CHECK_FALSE(nosmi->load);
  CHECK(nosmi->warnings == std::vector<std::string>{"host gpu1: nvidia-smi not found: no GPU telemetry"});
  CHECK(nosmi->energy_source.empty());

  const std::string base_line = "peak memory while loading: 70000 / 81559 MiB (86%)";
  const std::string eagle_line =
      "peak memory while loading: GPU 0 120000 / 143771 MiB (83%), GPU 1 119800 / 143771 MiB (83%)";
  const std::string md = report::to_markdown(r);
  CHECK(md.find("## GPU telemetry\n") != std::string::npos);
  CHECK(md.find("- **baseline**: " + base_line + "; energy from the GPUs' energy counter\n") != std::string::npos);
  CHECK(md.find("- **eagle3**: " + eagle_line + "; energy from the GPUs' energy counter\n") != std::string::npos);
  CHECK(md.find("- **nosmi**: nothing sampled\n  - warning: host gpu1: nvidia-smi not found: no GPU telemetry\n") !=
        std::string::npos);
  const std::string terminal = report::to_terminal(r);
  CHECK(terminal.find("- eagle3: " + eagle_line + "\n") != std::string::npos);
  CHECK(terminal.find("- nosmi: GPU telemetry: host gpu1: nvidia-smi not found: no GPU telemetry\n") !=
        std::string::npos);
  const std::string html = report::to_html(r);
  CHECK(html.find("<p class=\"telemetry-summary\">" + base_line) != std::string::npos);
  CHECK(html.find("<li class=\"bad\">warning: host gpu1: nvidia-smi not found: no GPU telemetry</li>") !=
        std::string::npos);
  const std::string csv = report::to_csv(r);
  CHECK(csv.find("\nvariant,eagle3,ok,,,load_memory_peak_mib[1],119800,,,,,,,,,,,,,,\n") != std::string::npos);
  CHECK(csv.find("\nvariant,eagle3,ok,,,memory_total_mib,143771,,,,,,,,,,,,,,\n") != std::string::npos);
  CHECK(csv.find("\nvariant,nosmi,ok,,,telemetry_warning,,,,,,,,,,,,,,,host gpu1: nvidia-smi not found: no GPU "
                 "telemetry\n") != std::string::npos);
  auto doc = nlohmann::json::parse(report::to_json(r));
  CHECK(doc["variants"][1]["telemetry"]["load"]["text"] == eagle_line);
  CHECK(doc["variants"][2]["telemetry"]["warnings"][0] == "host gpu1: nvidia-smi not found: no GPU telemetry");
  CHECK(report::to_junit(r).find("<system-err>warning: GPU telemetry: host gpu1: nvidia-smi not found") !=
        std::string::npos);
}

TEST_CASE("report telemetry: the power over time of each variant, from its telemetry.csv") {
  auto r = telemetry_report();
  REQUIRE(r.power.size() == 2);
  CHECK(r.power[0].variant == "baseline");
  const auto& eagle = r.power[1];
  CHECK(eagle.variant == "eagle3");
  CHECK(eagle.gpus == 2);
  CHECK(eagle.problems.empty());
  CHECK(*eagle.limit_w == doctest::Approx(1400));
  // The load, single stream, and each level and repeat: a window wherever one changes.
  REQUIRE(eagle.windows.size() == 6);
  CHECK(eagle.windows[0].benchmark.empty());
  CHECK(eagle.windows[0].level == "load");
  CHECK(eagle.windows[5].benchmark == "parallel");
  CHECK(eagle.windows[5].level == "c8");
  CHECK(eagle.windows[5].repeat == 2);
  // A point per sample, its GPUs' rows summed.
  REQUIRE(eagle.windows[0].points.size() == 3);
  CHECK(eagle.windows[0].points[0] == std::pair<double, double>{0.0, 80.0 + 81.0});
  CHECK(eagle.windows[5].points[0] == std::pair<double, double>{70.0, 350.0 + 351.0});

  const std::string html = report::to_html(r);
  CHECK(count(html, "<figure class=\"plot\" data-plot=\"power\">") == 2);
  const auto start = html.find("<svg class=\"chart\" viewBox=\"0 0 720.0",
                               html.find("data-plot=\"power\">", html.find("<h3>eagle3</h3>")));
  const std::string plot = html.substr(start, html.find("</svg>", start) - start);
  CHECK(plot.find("<title>Summed GPU power over time, eagle3</title>") != std::string::npos);
  // Every window's start is marked, and labelled where there is room.
  CHECK(count(plot, "class=\"tickmark boundary\"") == 6);
  for (const char* label :
       {"load", "single single", "parallel c1", "parallel c8", "parallel c1 #2", "parallel c8 #2"}) {
    CAPTURE(label);
    CHECK(plot.find(fmt::format("<title>{}</title></line>", label)) != std::string::npos);
  }
  for (const char* label : {">load</text>", ">single single</text>", ">parallel c1</text>", ">parallel c8</text>",
                            ">parallel c1 #2</text>", ">parallel c8 #2</text>"}) {
    CAPTURE(label);
    CHECK(count(plot, label) == 1);
  }
  CHECK(count(plot, "transform=\"rotate(-90 ") == 7);
  CHECK(count(plot, "<polyline class=\"mark line\"") == 6);
  CHECK(plot.find("<title>power limit: 1400 W</title>") != std::string::npos);
  // Made from the folder alone: the same bytes every time.
  CHECK(report::to_html(telemetry_report()) == html);
}

TEST_CASE("report telemetry: a long or damaged telemetry.csv") {
  specctl::test::TempDir dir;
  fs::copy(k_telemetry_data / "telemetry", dir / "run", fs::copy_options::recursive);
  std::string csv = read_file(dir / "run" / "variants" / "baseline" / "telemetry.csv");
  csv += "parallel,c64,1,oops,0,1,,,,,,,,,\n";
  // An hour at 500 ms: averaged in runs, so the plot stays a reasonable size.
  for (int i = 0; i < 7200; ++i) {
    csv += fmt::format("parallel,c64,1,{:.3f},0,{},700,,,,,,,,\n", 100.0 + 0.5 * i, 300 + i % 7);
  }
  specctl::test::write_file(dir / "run" / "variants" / "baseline" / "telemetry.csv", csv);
  auto r = report::build_report(report::read_run(dir / "run"));
  const auto& trace = r.power.at(0);
  REQUIRE(trace.windows.size() == 7);
  CHECK(trace.windows[6].points.size() < 1300);
  CHECK(trace.windows[6].points.size() > 1000);
  CHECK(trace.problems == std::vector<std::string>{"telemetry.csv:20: no time or GPU index"});
  CHECK(report::to_html(r).find("<p class=\"nodata\">telemetry.csv:20: no time or GPU index</p>") != std::string::npos);
}

TEST_CASE("report telemetry: expectations name tok_per_j and power_w like any other metric") {
  auto r = telemetry_report();
  REQUIRE(r.expectations.size() == 2);
  // eagle3's c1 tok/J, the mean of its repeats: 0.51 against 0.5 expected, within 5%.
  CHECK(r.expectations[0].metric == "tok_per_j");
  CHECK(*r.expectations[0].measured == doctest::Approx(0.51));
  CHECK(r.expectations[0].reproduced);
  // Its c8 power: 502.5 W against 450, outside 5%.
  CHECK(r.expectations[1].metric == "power_w");
  CHECK(*r.expectations[1].measured == doctest::Approx(502.5));
  CHECK_FALSE(r.expectations[1].reproduced);
  CHECK_FALSE(r.passed());

  // An experiment file may expect them of any built-in benchmark.
  specctl::experiment::BenchmarkSpec spec;
  for (auto kind : {specctl::experiment::BenchmarkKind::single_stream, specctl::experiment::BenchmarkKind::concurrency,
                    specctl::experiment::BenchmarkKind::rate}) {
    spec.kind = kind;
    auto metrics = specctl::experiment::metrics_of(spec);
    CHECK(std::find(metrics.begin(), metrics.end(), "tok_per_j") != metrics.end());
    CHECK(std::find(metrics.begin(), metrics.end(), "power_w") != metrics.end());
  }
  specctl::test::TempDir dir;
  specctl::test::write_file(dir / "e.yaml", R"(name: t
server:
  template: sglang
  model: /m
variants:
  - name: baseline
benchmarks:
  - {name: single, kind: single_stream}
  - {name: parallel, kind: concurrency, levels: [1, 8]}
report:
  expect:
    - {variant: baseline, benchmark: single, metric: tok_per_j, value: 0.45}
    - {variant: baseline, benchmark: parallel, level: 8, metric: power_w, value: 400, tolerance: 5%}
)");
  specctl::util::Diagnostics diag;
  auto experiment = specctl::experiment::load_experiment((dir / "e.yaml").string(), diag);
  CHECK_FALSE(diag.has_errors());
  REQUIRE(experiment.report.expect.size() == 2);
  CHECK(experiment.report.expect[0].metric == "tok_per_j");
}

TEST_CASE("report telemetry: compare reports tok/J changes by the rule of tok/s") {
  specctl::test::TempDir dir;
  fs::copy(k_telemetry_data / "telemetry", dir / "after", fs::copy_options::recursive);
  // After: eagle3's tok/J 20% lower at c8 in both repeats, its tok/s unchanged.
  auto path = dir / "after" / "variants" / "eagle3" / "result.json";
  auto doc = nlohmann::json::parse(read_file(path));
  for (auto& level : doc["benchmarks"]["parallel"]["levels"]) {
    if (level["concurrency"] == 8) {
      double lower = level["telemetry"]["tok_per_j"].get<double>() * 0.8;
      level["telemetry"]["tok_per_j"] = lower;
      level["metrics"]["tok_per_j"] = lower;
    }
  }
  specctl::test::write_file(path, doc.dump());
  auto c = report::compare_runs(report::read_run(k_telemetry_data / "telemetry"), report::read_run(dir / "after"));
  const report::VariantChange* eagle = nullptr;
  for (const auto& v : c.variants) {
    eagle = v.variant == "eagle3" ? &v : eagle;
  }
  REQUIRE(eagle != nullptr);
  REQUIRE(eagle->levels.size() == 2);
  const auto& c8 = eagle->levels[1].tok_per_j;
  CHECK(c8.sampled);
  CHECK(c8.change->value == doctest::Approx(0.8));
  CHECK(*c8.change->high < 1.0);
  CHECK(c8.verdict == Verdict::slower);
  CHECK(eagle->levels[1].verdict == Verdict::inconclusive);
  CHECK(eagle->levels[0].tok_per_j.verdict == Verdict::inconclusive);
  // Single stream: one window a side, a ratio and no verdict.
  CHECK(eagle->single_stream[0].tok_per_j.verdict == Verdict::one_sample);
  // Fewer tokens per joule is a regression, as slower is.
  CHECK(c.regressed());
  const std::string md = report::compare_markdown(c);
  CHECK(md.find("; tok/J: 0 better, 1 worse, ") != std::string::npos);
  CHECK(md.find("| eagle3   | ok     | ok    | parallel c8 tok/J 0.80× [") != std::string::npos);
  CHECK(md.find("Output tok/J, before → after (after / before [95% CI], verdict: worse or better only outside the "
                "interval and the A/A noise):") != std::string::npos);
  CHECK(md.find("1.39 → 1.11 (0.80× [") != std::string::npos);
  CHECK(md.find("Output tok/J (more is better):") != std::string::npos);
  auto csv = report::compare_csv(c);
  auto rows = lines_with(csv, "eagle3,ok,ok,parallel,c8,tok_per_j,");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].ends_with(",worse"));
  CHECK(lines_with(csv, "nosmi,ok,ok,parallel,c8,tok_per_j").empty());
  auto json = nlohmann::json::parse(report::compare_json(c));
  CHECK(json["variants"][1]["levels"][1]["tok_per_j"]["verdict"] == "worse");
  CHECK_FALSE(json["variants"][2]["levels"][1].contains("tok_per_j"));
  CHECK(report::compare_junit(c).find("parallel c8 tok/J 0.80×") != std::string::npos);

  // The same run twice: nothing changed, nothing regressed.
  auto same = report::compare_runs(report::read_run(k_telemetry_data / "telemetry"),
                                   report::read_run(k_telemetry_data / "telemetry"));
  CHECK_FALSE(same.regressed());
  // A run without telemetry compares as before: no tok/J anywhere.
  auto plain =
      report::compare_runs(report::read_run(k_telemetry_data / "sweep"), report::read_run(k_telemetry_data / "sweep"));
  CHECK(report::compare_markdown(plain).find("tok/J") == std::string::npos);
  CHECK(report::compare_csv(plain).find("tok_per_j") == std::string::npos);
  CHECK(report::compare_json(plain).find("tok_per_j") == std::string::npos);
}

TEST_CASE("report telemetry: results without telemetry render as they did") {
  for (const char* fixture : {"honest", "sweep", "categories"}) {
    CAPTURE(fixture);
    auto r = report::build_report(report::read_run(k_telemetry_data / fixture));
    CHECK_FALSE(r.has_telemetry());
    CHECK(r.power.empty());
    for (const auto& text : {report::to_markdown(r), report::to_csv(r), report::to_json(r), report::to_html(r),
                             report::to_junit(r), report::to_terminal(r)}) {
      CHECK(text.find("tok/J") == std::string::npos);
      CHECK(text.find("tok_per_j") == std::string::npos);
      CHECK(text.find("telemetry") == std::string::npos);
      CHECK(text.find("throttled") == std::string::npos);
    }
  }
}

TEST_CASE("report telemetry: golden Markdown, CSV, JSON, JUnit and terminal of the telemetry fixture") {
  auto r = telemetry_report();
  const fs::path golden = k_telemetry_data / "golden";
  check_golden(report::to_markdown(r), golden / "telemetry.md");
  check_golden(report::to_csv(r), golden / "telemetry.csv");
  check_golden(report::to_json(r), golden / "telemetry.json");
  check_golden(report::to_junit(r), golden / "telemetry.junit.xml");
  check_golden(report::to_terminal(r), golden / "telemetry.terminal.txt");
}
