#include "../report/sample_report.hpp"

#include <specctl/report/report.hpp>
#include <specctl/report/svg.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace svg = specctl::report::svg;
using specctl::report::to_html;

namespace {

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

void check_ticks(const std::vector<double>& actual, const std::vector<double>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    CHECK(actual[i] == doctest::Approx(expected[i]));
  }
}

// The text of the figure of one kind, from its opening tag to its end.
std::string figure_of(const std::string& html, const std::string& kind) {
  const auto start = html.find("<figure class=\"plot\" data-plot=\"" + kind + "\">");
  if (start == std::string::npos) {
    return "";
  }
  return html.substr(start, html.find("</figure>", start) - start);
}

} // namespace

TEST_CASE("report html: scales and ticks") {
  SUBCASE("a log scale spaces decades evenly") {
    const svg::Scale x(svg::ScaleKind::log, 1, 100, 0, 200);
    CHECK(x(1) == doctest::Approx(0));
    CHECK(x(10) == doctest::Approx(100));
    CHECK(x(100) == doctest::Approx(200));
    // Concurrency 1, 10, 70: 70 sits at log10(70) / log10(70) of the way.
    const svg::Scale levels(svg::ScaleKind::log, 1, 70, 100, 700);
    CHECK(levels(10) == doctest::Approx(100 + 600 / std::log10(70.0)));
    CHECK(levels(70) == doctest::Approx(700));
  }
  SUBCASE("a linear scale maps onto a flipped pixel range") {
    const svg::Scale y(svg::ScaleKind::linear, 0, 100, 250, 50);
    CHECK(y(0) == doctest::Approx(250));
    CHECK(y(50) == doctest::Approx(150));
    CHECK(y(100) == doctest::Approx(50));
  }
  SUBCASE("a one-point domain maps to the middle") {
    const svg::Scale x(svg::ScaleKind::log, 8, 8, 0, 100);
    CHECK(x(8) == doctest::Approx(50));
  }
  SUBCASE("nice ticks cover the range in steps of 1, 2 or 5") {
    check_ticks(svg::nice_ticks(0, 97), {0, 20, 40, 60, 80, 100});
    check_ticks(svg::nice_ticks(0, 1234), {0, 500, 1000, 1500});
    check_ticks(svg::nice_ticks(0, 0.37), {0, 0.1, 0.2, 0.3, 0.4});
    check_ticks(svg::nice_ticks(0, 100), {0, 20, 40, 60, 80, 100});
    check_ticks(svg::nice_ticks(0, 0), {0, 0.2, 0.4, 0.6, 0.8, 1});
  }
  SUBCASE("log ticks: 1-2-5 within two decades, decades beyond") {
    check_ticks(svg::log_ticks(1, 70), {1, 2, 5, 10, 20, 50});
    check_ticks(svg::log_ticks(1, 256), {1, 10, 100});
    CHECK(svg::log_ticks(0, 10).empty());
  }
  SUBCASE("fixed never writes a negative zero") {
    CHECK(svg::fixed(-0.04, 1) == "0.0");
    CHECK(svg::fixed(-1.25, 1) == "-1.2");
    CHECK(svg::fixed(3.14159, 2) == "3.14");
  }
}

TEST_CASE("report html: escapes text from the experiment file") {
  CHECK(svg::escape("<script>&\"'") == "&lt;script&gt;&amp;&quot;&apos;");
  auto report = specctl::test::sample_report();
  const std::string hostile = "<script>&\"'";
  report.experiment = hostile;
  report.variants[1].name = hostile;
  report.single_stream[0].rows[1].variant = hostile;
  report.levels[0].rows[1].variant = hostile;
  report.notes.push_back(hostile);
  const std::string html = to_html(report);
  CHECK(html.find(hostile) == std::string::npos);
  CHECK(lowercase(html).find("<script") == std::string::npos);
  CHECK(count(html, "&lt;script&gt;&amp;&quot;&apos;") >= 5);
}

TEST_CASE("report html: a failed variant is shown with its reason") {
  const std::string html = to_html(specctl::test::sample_report());
  CHECK(html.find("<tr class=\"failed\"><td>eagle3-tp2</td><td class=\"bad\">failed</td><td>gpu-2</td>") !=
        std::string::npos);
  CHECK(html.find("<strong>load:</strong> server exited with code 1 before it was ready") != std::string::npos);
  CHECK(html.find("<details><summary>server log tail</summary><pre>INFO loading weights\nERROR CUDA out of memory.") !=
        std::string::npos);
  // Its slot in the bar charts stays, empty and labelled.
  const std::string bars = figure_of(html, "single-stream");
  CHECK(bars.find(">eagle3-tp2<title>") != std::string::npos);
  CHECK(bars.find("<text class=\"note\"") != std::string::npos);
  CHECK(bars.find(">failed</text>") != std::string::npos);
  CHECK(figure_of(html, "load-time").find(">failed</text>") != std::string::npos);
  // Speedups and crossovers in the model's words.
  CHECK(html.find("2.03× [1.95, 2.11]") != std::string::npos);
  CHECK(html.find("187.9 ± 6.4 (5)") != std::string::npos);
  CHECK(html.find(">faster up to c10, slower at c70 (1.00× at ≈33)</td>") != std::string::npos);
  CHECK(html.find(">faster at c1, slower at c10</td>") != std::string::npos);
  CHECK(html.find(">faster at all levels</td>") != std::string::npos);
  // Green and red only where there is a verdict.
  CHECK(html.find("<td class=\"num good\" title=\"faster\">2.01× [1.99, 2.03]<br><small>faster</small></td>") !=
        std::string::npos);
  CHECK(html.find("<td class=\"num bad\" title=\"slower\">0.85× [0.83, 0.87]") != std::string::npos);
  auto unrepeated = specctl::test::sample_report();
  auto& cell = unrepeated.levels[0].rows[1].levels[0];
  cell.speedup->low.reset();
  cell.speedup->high.reset();
  cell.verdict = specctl::report::Verdict::one_sample;
  CHECK(to_html(unrepeated).find("<td class=\"num\" title=\"one sample\">2.01×<br><small>one sample</small></td>") !=
        std::string::npos);
  CHECK(html.find("<tr class=\"missed\"><td>eagle3</td><td>parallel</td><td>c70</td>") != std::string::npos);
}

TEST_CASE("report html: missing values never reach the page as nan") {
  auto report = specctl::test::sample_report();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  report.variants[0].load_s = nan;
  report.variants[1].accept_length = nan;
  report.single_stream[0].rows[1].tok_s->stdev = nan;
  report.single_stream[0].rows[1].speedup->low = nan;
  report.single_stream[0].rows[2].tok_s->mean = nan;
  report.single_stream[0].rows[2].ttft_ms = nan;
  report.levels[0].rows[0].levels[1].tok_s->mean = nan;
  report.levels[0].rows[1].levels[2].ttft_p99_ms = nan;
  report.levels[0].rows[1].levels[0].speedup->value = nan;
  report.levels[0].rows[1].levels[0].tok_s->stdev = nan;
  report.commands[0].rows[0].second[0] = nan;
  report.expectations[0].measured = nan;
  report.expectations[0].delta_pct = nan;
  const std::string html = lowercase(to_html(report));
  CHECK(html.find("nan") == std::string::npos);
  // The baseline's throughput line breaks at its missing c10: two single points, no polyline.
  const std::string throughput = figure_of(to_html(report), "throughput");
  CHECK(count(throughput, "<polyline") == 2);
}

TEST_CASE("report html: self-contained, no script, same bytes every time") {
  const auto report = specctl::test::sample_report();
  const std::string html = to_html(report);
  CHECK(html.starts_with("<!DOCTYPE html>\n"));
  CHECK(html.ends_with("</html>\n"));
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(lowercase(html).find("<script") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  CHECK(html.find("@media (prefers-color-scheme: dark)") != std::string::npos);
  CHECK(html.find("@media print") != std::string::npos);
  CHECK(to_html(report) == html);
}

TEST_CASE("report html: every plot is a labelled figure") {
  const std::string html = to_html(specctl::test::sample_report());
  CHECK(count(html, "<figure class=\"plot\"") == 8);
  CHECK(count(html, "data-plot=\"throughput\"") == 3);
  CHECK(count(html, "data-plot=\"ttft\"") == 3);
  CHECK(count(html, "data-plot=\"single-stream\"") == 1);
  CHECK(count(html, "data-plot=\"load-time\"") == 1);
  for (const std::string kind : {"throughput", "ttft", "single-stream", "load-time"}) {
    INFO(kind);
    const std::string figure = figure_of(html, kind);
    CHECK(figure.find("<svg class=\"chart\" viewBox=\"0 0 720.0 ") != std::string::npos);
    CHECK(figure.find("role=\"img\" aria-label=\"") != std::string::npos);
    CHECK(figure.find("<title>") != std::string::npos);
    CHECK(figure.find("<figcaption>") != std::string::npos);
    CHECK(figure.find("class=\"mark ") != std::string::npos);
  }
  CHECK(figure_of(html, "throughput").find(">concurrency (log scale)</text>") != std::string::npos);
  CHECK(figure_of(html, "ttft").find("class=\"mark line dashed\"") != std::string::npos);
  CHECK(figure_of(html, "single-stream").find("class=\"mark err\"") != std::string::npos);
}

TEST_CASE("report html: a plot without data is a note, not an empty figure") {
  specctl::report::Report report;
  report.experiment = "empty";
  specctl::report::VariantRow variant;
  variant.name = "a";
  variant.status = specctl::report::VariantStatus::not_run;
  variant.reason = "never started";
  report.variants.push_back(variant);
  specctl::report::LevelsTable table;
  table.benchmark = "parallel";
  table.levels = {1, 10};
  specctl::report::LevelsRow row;
  row.variant = "a";
  row.levels.resize(2);
  table.rows.push_back(row);
  report.levels.push_back(table);
  const std::string html = to_html(report);
  CHECK(html.find("<figure") == std::string::npos);
  CHECK(html.find("<svg") == std::string::npos);
  CHECK(html.find("<p class=\"nodata\">No data to plot for output tok/s of parallel.</p>") != std::string::npos);
  CHECK(html.find("<p class=\"nodata\">No data to plot for load times.</p>") != std::string::npos);
  CHECK(html.find("never started") != std::string::npos);
}

namespace {

// Every figure of one kind, in page order.
std::vector<std::string> figures_of(const std::string& html, const std::string& kind) {
  std::vector<std::string> out;
  const std::string open = "<figure class=\"plot\" data-plot=\"" + kind + "\">";
  for (auto start = html.find(open); start != std::string::npos; start = html.find(open, start + 1)) {
    out.push_back(html.substr(start, html.find("</figure>", start) - start));
  }
  return out;
}

} // namespace

TEST_CASE("report html: a histogram draws a bar per non-empty bin") {
  svg::Histogram chart{.title = "Prompt tokens per request, chat",
                       .x_label = "prompt tokens per request",
                       .y_label = "requests",
                       .unit = "tokens",
                       .counted = "requests",
                       .lo = 32,
                       .width = 16,
                       .counts = {1, 0, 3, 2},
                       .style = 1};
  REQUIRE(svg::has_data(chart));
  const std::string drawn = svg::render(chart);
  CHECK(count(drawn, "<rect class=\"mark bar\"") == 3);
  CHECK(drawn.find("role=\"img\" aria-label=\"Prompt tokens per request, chat\"") != std::string::npos);
  CHECK(drawn.find("<title>[32, 48) tokens: 1 request</title>") != std::string::npos);
  CHECK(drawn.find("<title>[64, 80) tokens: 3 requests</title>") != std::string::npos);
  CHECK(drawn.find(">prompt tokens per request</text>") != std::string::npos);
  CHECK(drawn.find("<g class=\"series s1\">") != std::string::npos);
  chart.counts = {0, 0};
  CHECK_FALSE(svg::has_data(chart));
}

TEST_CASE("report html: per-category tables and request length histograms of the fixture") {
  const auto data =
      specctl::report::read_run(fs::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "report" / "categories");
  const std::string html = to_html(specctl::report::build_report(data));

  CHECK(count(html, "<table class=\"categories\">") == 2);
  CHECK(html.find("<h3>parallel at c8</h3>") != std::string::npos);
  CHECK(html.find("<th colspan=\"2\">eagle3</th>") != std::string::npos);
  // eagle3's code at c8: accept length and tok/s in columns of their own, the failure marked.
  CHECK(html.find("<td>code</td><td class=\"num\">—</td><td class=\"num\">63.0</td><td class=\"num\">3.25</td>"
                  "<td class=\"num\">125.0<span class=\"bad\"> (1 of 11 failed)</span></td>"
                  "<td class=\"num\">—</td><td class=\"num\">—</td></tr>") != std::string::npos);
  CHECK(html.find("accept length from server log lines (eagle3)") != std::string::npos);

  // One input and one output histogram per benchmark that has them (not plain).
  const auto inputs = figures_of(html, "input-lengths");
  const auto outputs = figures_of(html, "output-lengths");
  REQUIRE(inputs.size() == 2);
  REQUIRE(outputs.size() == 2);
  // single: baseline's counts 1, 3, 2 and 0, 4, 2; parallel: eagle3's 5, 0, 7, 2 and 2, 10, 2.
  CHECK(count(inputs[0], "<rect class=\"mark bar\"") == 3);
  CHECK(count(outputs[0], "<rect class=\"mark bar\"") == 2);
  CHECK(count(inputs[1], "<rect class=\"mark bar\"") == 3);
  CHECK(count(outputs[1], "<rect class=\"mark bar\"") == 3);
  for (const auto& figure : {inputs[0], outputs[1]}) {
    CHECK(figure.find("role=\"img\" aria-label=\"") != std::string::npos);
    CHECK(figure.find("<title>") != std::string::npos);
    CHECK(figure.find(">requests</text>") != std::string::npos);
  }
  CHECK(inputs[0].find(">prompt tokens per request (as the server counted them)</text>") != std::string::npos);
  CHECK(outputs[0].find(">output tokens per request</text>") != std::string::npos);
  // The caption says whose requests these are, and how far they stand for the others.
  CHECK(inputs[0].find("<figcaption>Prompt tokens of all 6 completed requests of single, as baseline ran them, in "
                       "bins of 64 tokens; the same in eagle3; different in old.</figcaption>") != std::string::npos);
  CHECK(outputs[1].find("as eagle3 ran them, in bins of 64 tokens.</figcaption>") != std::string::npos);
  CHECK(lowercase(html).find("<script") == std::string::npos);
}
