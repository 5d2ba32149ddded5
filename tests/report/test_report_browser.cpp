// report.html in a real browser: Debian's Chromium renders the page headless;
// a test-only script appended to a copy of the page measures each plot as
// laid out (size, drawn marks, the page's background) and writes the figures
// into the DOM, which --dump-dom hands back. Screenshots of the page as
// written go to the build tree for people to look at.

#include "../support/skip.hpp"
#include "../support/temp_dir.hpp"
#include "chromium.hpp"
#include "sample_report.hpp"

#include <specctl/report/report.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

using nlohmann::json;
using specctl::test::TempDir;

namespace {

constexpr int k_window_width = 1200;
// A page taller than this is cut in the screenshot; the sample is about 6000 px.
constexpr int k_max_screenshot_height = 20000;
// A PNG smaller than this is a blank page, not a rendered report.
constexpr std::uintmax_t k_min_png_bytes = 20 * 1024;
// Plots narrower or lower than this did not lay out.
constexpr double k_min_plot_px = 100;
// Each sample plot draws at least this many marks (bars, lines, markers, error bars).
constexpr int k_min_marks = 3;

// Appended to a copy of the page only: the product page has no script.
constexpr const char* k_measure_script = R"(<script>
(function () {
  const painted = (el) => {
    const style = getComputedStyle(el);
    const none = (v) => v === 'none' || v === 'rgba(0, 0, 0, 0)' || v === 'transparent';
    return !none(style.fill) || !none(style.stroke);
  };
  const out = {
    dark: matchMedia('(prefers-color-scheme: dark)').matches,
    background: getComputedStyle(document.body).backgroundColor,
    height: Math.ceil(document.documentElement.scrollHeight),
    scripts: document.scripts.length,
    plots: []
  };
  for (const figure of document.querySelectorAll('figure.plot')) {
    const svg = figure.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
    let marks = 0;
    if (svg) {
      for (const mark of svg.querySelectorAll('.series:not(.legend) :is(polyline, path, rect, circle)')) {
        const b = mark.getBoundingClientRect();
        if ((b.width > 0 || b.height > 0) && painted(mark)) {
          marks++;
        }
      }
    }
    out.plots.push({ kind: figure.dataset.plot, width: box.width, height: box.height, marks: marks,
                     caption: figure.querySelector('figcaption') !== null });
  }
  const pre = document.createElement('pre');
  pre.id = 'measure';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
)";

// Says why and is false when there is no browser (ctest reports the case skipped).
bool have_chromium() {
  if (specctl::test::pretend_missing("chromium") || !std::filesystem::exists(specctl::test::k_chromium)) {
    specctl::test::skip("no chromium (" + specctl::test::k_chromium.string() +
                        " is not installed; scripts/setup.sh --tests installs chromium)");
    return false;
  }
  return true;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

std::string unescape_html(std::string text) {
  const std::pair<std::string, std::string> entities[] = {{"&quot;", "\""}, {"&lt;", "<"},   {"&gt;", ">"},
                                                          {"&#39;", "'"},   {"&nbsp;", " "}, {"&amp;", "&"}};
  for (const auto& [entity, character] : entities) {
    for (auto at = text.find(entity); at != std::string::npos; at = text.find(entity, at + character.size())) {
      text.replace(at, entity.size(), character);
    }
  }
  return text;
}

enum class Scheme { light, dark };

// Forces the color scheme both ways, so the light run does not follow a desktop setting.
std::vector<std::string> scheme_args(Scheme scheme) {
  if (scheme == Scheme::dark) {
    return {"--force-dark-mode", "--blink-settings=preferredColorScheme=0"};
  }
  return {"--blink-settings=preferredColorScheme=1"};
}

struct Browser {
  TempDir dir{"specctl-report-browser"};
  std::string html = specctl::report::to_html(specctl::test::sample_report());
  // What the artifacts' names start with: "report" (report.html, report-light.png).
  std::string artifact = "report";

  specctl::test::ChromiumRun run(std::vector<std::string> extra, const std::string& name) {
    auto args = specctl::test::chromium_base_args(dir / ("profile-" + name));
    args.insert(args.end(), extra.begin(), extra.end());
    auto run = specctl::test::run_chromium(args, dir / (name + ".log"));
    MESSAGE("chromium " << name << ": " << run.elapsed.count() << " ms, exit " << run.exit_code);
    if (run.timed_out || run.exit_code != 0) {
      MESSAGE("chromium output:\n" << run.output.substr(run.output.size() > 4000 ? run.output.size() - 4000 : 0));
    }
    REQUIRE_FALSE(run.timed_out);
    REQUIRE(run.exit_code == 0);
    return run;
  }

  // Renders the page with the measuring script and returns what it wrote.
  json measure(Scheme scheme) {
    std::string page = html;
    const auto body_end = page.rfind("</body>");
    REQUIRE(body_end != std::string::npos);
    page.insert(body_end, k_measure_script);
    write_file(dir / "measure.html", page);
    auto args = scheme_args(scheme);
    args.push_back("--window-size=" + std::to_string(k_window_width) + ",900");
    args.push_back("--dump-dom");
    args.push_back("file://" + (dir / "measure.html").string());
    const auto run = this->run(args, scheme == Scheme::dark ? "measure-dark" : "measure-light");
    const std::string open = "<pre id=\"measure\">";
    const auto start = run.output.find(open);
    REQUIRE_MESSAGE(start != std::string::npos, "no measurement in the dumped DOM:\n" << run.output.substr(0, 2000));
    const auto end = run.output.find("</pre>", start);
    REQUIRE(end != std::string::npos);
    return json::parse(unescape_html(run.output.substr(start + open.size(), end - start - open.size())));
  }

  // A screenshot of the page as written, as tall as the page.
  std::filesystem::path screenshot(Scheme scheme, int page_height) {
    const std::filesystem::path artifacts = SPECCTL_REPORT_ARTIFACTS_DIR;
    std::filesystem::create_directories(artifacts);
    write_file(dir / "report.html", html);
    // A copy to open beside the screenshots; renamed into place, as the light and dark tests may run at once.
    const auto partial = artifacts / (artifact + ".html." + (scheme == Scheme::dark ? "dark" : "light"));
    write_file(partial, html);
    std::filesystem::rename(partial, artifacts / (artifact + ".html"));
    const auto png = artifacts / (artifact + (scheme == Scheme::dark ? "-dark.png" : "-light.png"));
    std::filesystem::remove(png);
    const int height = std::clamp(page_height, 600, k_max_screenshot_height);
    auto args = scheme_args(scheme);
    args.push_back("--window-size=" + std::to_string(k_window_width) + "," + std::to_string(height));
    args.push_back("--screenshot=" + png.string());
    args.push_back("file://" + (dir / "report.html").string());
    run(args, scheme == Scheme::dark ? "screenshot-dark" : "screenshot-light");
    return png;
  }
};

// Relative luminance of a CSS "rgb(r, g, b)" color, 0 (black) to 1 (white).
double luminance(const std::string& css) {
  int r = -1;
  int g = -1;
  int b = -1;
  REQUIRE_MESSAGE(std::sscanf(css.c_str(), "rgb(%d, %d, %d)", &r, &g, &b) == 3, "not an rgb() color: " << css);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255.0;
}

// One bar chart per single-stream table, a throughput and a TTFT plot per levels table, one load-time chart.
const std::map<std::string, int> k_sample_plots = {
    {"single-stream", 1}, {"throughput", 3}, {"ttft", 3}, {"load-time", 1}};

void check_plots(const json& measured, const std::map<std::string, int>& expected = k_sample_plots) {
  CHECK(measured.at("scripts").get<int>() == 1);
  std::map<std::string, int> kinds;
  for (const auto& plot : measured.at("plots")) {
    const auto kind = plot.at("kind").get<std::string>();
    ++kinds[kind];
    INFO("plot " << kind << ": " << plot.dump());
    CHECK(plot.at("width").get<double>() > k_min_plot_px);
    CHECK(plot.at("height").get<double>() > k_min_plot_px);
    CHECK(plot.at("marks").get<int>() >= k_min_marks);
    CHECK(plot.at("caption").get<bool>());
  }
  CHECK(kinds == expected);
}

void check_png(const std::filesystem::path& png) {
  REQUIRE(std::filesystem::exists(png));
  std::ifstream in(png, std::ios::binary);
  std::string signature(8, '\0');
  in.read(signature.data(), 8);
  CHECK(signature == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(std::filesystem::file_size(png) > k_min_png_bytes);
  MESSAGE("screenshot: " << png.string() << " (" << std::filesystem::file_size(png) << " bytes)");
}

} // namespace

TEST_CASE("light scheme: plots drawn, screenshot saved") {
  if (!have_chromium()) {
    return;
  }
  Browser browser;
  const json measured = browser.measure(Scheme::light);
  MESSAGE("measured: " << measured.dump());
  CHECK_FALSE(measured.at("dark").get<bool>());
  CHECK(luminance(measured.at("background").get<std::string>()) > 0.9);
  check_plots(measured);
  check_png(browser.screenshot(Scheme::light, measured.at("height").get<int>()));
}

TEST_CASE("dark scheme: dark background, plots drawn, screenshot saved") {
  if (!have_chromium()) {
    return;
  }
  Browser browser;
  const json measured = browser.measure(Scheme::dark);
  MESSAGE("measured: " << measured.dump());
  CHECK(measured.at("dark").get<bool>());
  CHECK(luminance(measured.at("background").get<std::string>()) < 0.2);
  check_plots(measured);
  check_png(browser.screenshot(Scheme::dark, measured.at("height").get<int>()));
}

// tests/data/report/telemetry: a power-over-time plot for each of its two sampled
// variants, laid out and drawn in both schemes beside the other plots.
TEST_CASE("GPU telemetry: power plots drawn in light and dark, screenshots saved") {
  if (!have_chromium()) {
    return;
  }
  const auto fixture = std::filesystem::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "report" / "telemetry";
  const std::map<std::string, int> plots = {
      {"single-stream", 1}, {"throughput", 1}, {"ttft", 1}, {"load-time", 1}, {"power", 2}};
  for (Scheme scheme : {Scheme::light, Scheme::dark}) {
    Browser browser;
    browser.html = specctl::report::to_html(specctl::report::build_report(specctl::report::read_run(fixture)));
    browser.artifact = "report-telemetry";
    const json measured = browser.measure(scheme);
    MESSAGE("measured: " << measured.dump());
    CHECK(measured.at("dark").get<bool>() == (scheme == Scheme::dark));
    check_plots(measured, plots);
    check_png(browser.screenshot(scheme, measured.at("height").get<int>()));
  }
}
