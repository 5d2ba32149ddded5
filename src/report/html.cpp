// report.html: one self-contained page (no script, no network, no fonts to
// fetch) with the report's tables and inline SVG plots. Figures come from the
// Report as built; this file only lays them out, with the same number formats
// as the Markdown report (cells.hpp).

#include "cells.hpp"
#include "html_parts.hpp"
#include "html_style.hpp"
#include "tuning.hpp"

#include <specctl/report/report.hpp>
#include <specctl/report/svg.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace specctl::report {

namespace {

using svg::escape;

using detail::general;
using detail::num;
using detail::present;
using detail::short_number;
using detail::td;
using detail::th;

class Page {
public:
  explicit Page(const Report& report) : m_report(report) {
    for (const auto& variant : report.variants) {
      style_of(variant.name);
    }
  }

  std::string render() {
    m_out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    m_out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    m_out += "<meta name=\"color-scheme\" content=\"light dark\">\n";
    m_out += "<title>specctl report: " + escape(m_report.experiment) + "</title>\n";
    m_out += std::string("<style>\n") + detail::k_html_style + "</style>\n</head>\n<body>\n<main>\n";
    header();
    tuning();
    variants();
    notes();
    for (const auto& table : m_report.single_stream) {
      single_stream(table);
    }
    for (const auto& table : m_report.levels) {
      levels(table);
    }
    for (const auto& table : m_report.commands) {
      commands(table);
    }
    if (m_report.has_telemetry()) {
      m_out += detail::telemetry_html(m_report, [this](const std::string& name) { return style_of(name); });
    }
    categories();
    lengths();
    noise();
    expectations();
    load_times();
    glossary();
    m_out += "</main>\n</body>\n</html>\n";
    return std::move(m_out);
  }

private:
  // A variant keeps its color and marker in every plot: its place in the variants table.
  int style_of(const std::string& variant) {
    auto [it, inserted] = m_styles.try_emplace(variant, static_cast<int>(m_styles.size()));
    return it->second;
  }

  const VariantRow* variant_row(const std::string& name) const {
    auto it = std::find_if(m_report.variants.begin(), m_report.variants.end(),
                           [&](const VariantRow& row) { return row.name == name; });
    return it == m_report.variants.end() ? nullptr : &*it;
  }

  // Why a variant has no figure, for an empty bar slot: its status when not ok.
  std::string missing_note(const std::string& name) const {
    const VariantRow* row = variant_row(name);
    return row && row->status != VariantStatus::ok ? std::string(status_name(row->status)) : "no data";
  }

  // The variant's name, marked when it did not finish, so no table hides a failure.
  std::string variant_html(const std::string& name) const {
    std::string html = escape(name);
    if (name == m_report.baseline) {
      html += " <span class=\"muted\">(baseline)</span>";
    }
    if (const VariantRow* row = variant_row(name); row && row->status != VariantStatus::ok) {
      html += " <span class=\"bad\">" + escape(status_name(row->status)) + "</span>";
    }
    return html;
  }

  std::string variant_cell(const std::string& name, int rows = 1) const {
    const std::string html = variant_html(name);
    return rows > 1 ? "<td rowspan=\"" + std::to_string(rows) + "\">" + html + "</td>" : td(html);
  }

  void heading(const std::string& title, const std::string& spec) {
    m_out += "<h2>" + escape(title) + "</h2>\n";
    if (!spec.empty()) {
      m_out += "<p class=\"spec\"><code>" + escape(spec) + "</code></p>\n";
    }
  }

  void figure(const std::string& kind, const std::string& svg_text, const std::string& caption) {
    m_out += detail::figure_html(kind, svg_text, caption);
  }

  void tuning() {
    if (!m_report.tuning) {
      return;
    }
    const auto& t = *m_report.tuning;
    m_out += "<h2>Tuning</h2>\n<p>" +
             escape(fmt::format("{} of {} configurations measured; {}.", t.trials, t.grid, t.stopped)) +
             "</p>\n<p><strong>Recommendation:</strong> " + escape(t.recommendation) + "</p>\n";
    if (!t.crossover.empty()) {
      m_out += "<p><strong>Crossover:</strong> " + escape(t.crossover) + "</p>\n";
    }
    if (!t.curves.empty()) {
      figure("pareto", detail::tuning_svg(t),
             "Each trial over the load points; dashed, the Pareto front: no other point is ahead on both axes.");
    }
  }

  void no_data(const std::string& what) { m_out += "<p class=\"nodata\">No data to plot " + escape(what) + ".</p>\n"; }

  void header() {
    m_out += "<header>\n<h1>" + escape(m_report.experiment) + "</h1>\n";
    if (!m_report.description.empty()) {
      m_out += "<p>" + escape(m_report.description) + "</p>\n";
    }
    m_out += "<dl class=\"meta\">\n";
    auto item = [&](const std::string& name, const std::string& html) {
      m_out += "<dt>" + escape(name) + "</dt><dd>" + html + "</dd>\n";
    };
    item("Started", escape(m_report.started.empty() ? "-" : m_report.started));
    item("specctl", escape(m_report.specctl_version.empty() ? "-" : m_report.specctl_version));
    item("Baseline", m_report.baseline.empty() ? "<span class=\"muted\">none</span>" : escape(m_report.baseline));
    const std::string result_class = m_report.passed() ? "result-passed" : "result-failed";
    item("Result", "<span class=\"" + result_class + "\">" + escape(detail::verdict_line(m_report)) + "</span>");
    m_out += "</dl>\n</header>\n";
  }

  void variants() {
    m_out += "<h2>Variants</h2>\n<table class=\"variants\">\n<thead><tr>";
    m_out += th("Variant") + th("Status") + th("Host") + th("Attempt", "num") + th("Load (s)", "num") +
             th("Duration (s)", "num") + th("Accept length", "num") + th("Reason") + "</tr></thead>\n<tbody>\n";
    for (const auto& row : m_report.variants) {
      const bool ok = row.status == VariantStatus::ok;
      m_out += ok ? "<tr>" : "<tr class=\"failed\">";
      m_out += td(escape(row.name)) + td(escape(std::string(status_name(row.status))), ok ? "" : "bad") +
               td(escape(row.host)) + td(row.attempt > 0 ? std::to_string(row.attempt) : "-", "num") +
               td(num(row.load_s, 1), "num") + td(num(row.duration_s, 0), "num") + td(num(row.accept_length, 2), "num");
      std::string reason;
      if (!row.failed_phase.empty()) {
        reason += "<strong>" + escape(row.failed_phase) + ":</strong> ";
      }
      reason += escape(row.reason);
      if (!row.log_tail.empty()) {
        reason += "<details><summary>server log tail</summary><pre>" + escape(row.log_tail) + "</pre></details>";
      }
      for (const auto& flag : row.flags) {
        reason += "<div class=\"flag\">flag: " + escape(flag) + "</div>";
      }
      m_out += td(reason, "reason") + "</tr>\n";
    }
    m_out += "</tbody>\n</table>\n";
  }

  void notes() {
    if (m_report.notes.empty()) {
      return;
    }
    m_out += "<h2>Notes</h2>\n<ul class=\"notes\">\n";
    for (const auto& note : m_report.notes) {
      m_out += "<li>" + escape(note) + "</li>\n";
    }
    m_out += "</ul>\n";
  }

  void single_stream(const SingleStreamTable& table) {
    heading("Single stream: " + table.benchmark, table.spec);
    m_out += "<table class=\"single-stream\">\n<thead><tr>" + th("Variant") + th("Output tok/s", "num") +
             th("Failed", "num") + th("Speedup [95% CI]", "num") + th("Verdict") + th("Accept length", "num") +
             th("TTFT (ms)", "num") + th("TPOT (ms)", "num");
    const bool energy = detail::has_energy(table);
    if (energy) {
      m_out += th("Output tok/J", "num") + th("tok/J vs baseline", "num") + th("GPU power (W)", "num");
    }
    m_out += "</tr></thead>\n<tbody>\n";
    svg::BarChart chart{.title = "Single-stream output tokens per second, " + table.benchmark,
                        .y_label = "output tok/s (mean \u00b1 stdev)",
                        .unit = "tok/s",
                        .decimals = 1,
                        .bars = {}};
    for (const auto& row : table.rows) {
      std::string tok_s = "-";
      std::optional<double> mean;
      std::optional<double> stdev;
      if (row.tok_s && std::isfinite(row.tok_s->mean)) {
        mean = row.tok_s->mean;
        stdev = present(row.tok_s->stdev);
        tok_s = num(mean, 1) + " \u00b1 " + num(stdev.value_or(0), 1) + " (" + std::to_string(row.tok_s->n) + ")";
      }
      const std::string failed =
          row.counts.requests > 0 ? fmt::format("{}/{}", row.counts.failed, row.counts.requests) : "-";
      const std::string verdict(verdict_name(row.verdict));
      m_out += "<tr>" + variant_cell(row.variant) + td(tok_s, "num") +
               td(failed, row.counts.failed > 0 ? "num bad" : "num") +
               td(escape(detail::ratio_text(row.speedup)), "num") +
               td(escape(detail::verdict_text(row.verdict, row.why)), "verdict-" + util::slug(verdict)) +
               td(num(row.accept_length, 2), "num") + td(num(row.ttft_ms, 1), "num") + td(num(row.tpot_ms, 2), "num");
      if (energy) {
        m_out += detail::tok_per_j_td(row.energy) + detail::tok_per_j_ratio_td(row.energy) +
                 td(escape(detail::power_cell(row.energy)), "num");
      }
      m_out += "</tr>\n";
      chart.bars.push_back({.label = row.variant,
                            .value = mean,
                            .error = stdev,
                            .missing_note = missing_note(row.variant),
                            .style = style_of(row.variant)});
    }
    m_out += "</tbody>\n</table>\n<p class=\"sources\">" + escape(detail::sources_text(table)) + "</p>\n";
    if (energy) {
      m_out += "<p class=\"sources\">" + escape(detail::energy_note(1)) + "</p>\n";
    }
    if (svg::has_data(chart)) {
      figure("single-stream", svg::render(chart),
             "Single stream, " + table.benchmark + ": output tok/s per variant, mean with \u00b1 one stdev over runs.");
    } else {
      no_data("for single stream " + table.benchmark);
    }
  }

  // One table of a levels benchmark's figure: variants as rows, levels as columns.
  void level_head(const LevelsTable& table, const std::string& first, const std::string& last = "",
                  const std::string& second = "") {
    m_out += "<thead><tr>" + th(first) + (second.empty() ? "" : th(second));
    for (std::size_t i = 0; i < table.levels.size(); ++i) {
      m_out += th(table.label(i), "num");
    }
    m_out += (last.empty() ? "" : th(last)) + "</tr></thead>\n<tbody>\n";
  }

  void levels(const LevelsTable& table) {
    const std::string what = table.rate ? "request rate" : "concurrency";
    heading((table.rate ? "Request rate: " : "Concurrency: ") + table.benchmark, table.spec);
    m_out += "<h3>Output tok/s</h3>\n<table class=\"levels\">\n";
    level_head(table, "Variant", "Crossover");
    for (const auto& row : table.rows) {
      const bool compared = std::any_of(row.levels.begin(), row.levels.end(),
                                        [](const LevelFigures& f) { return f.speedup.has_value(); });
      m_out += "<tr>" + variant_cell(row.variant);
      for (const auto& figures : row.levels) {
        std::string cell = escape(detail::spread_text(figures.tok_s));
        if (figures.counts.failed > 0) {
          cell += "<span class=\"bad\">" + escape(detail::failed_text(figures.counts)) + "</span>";
        }
        m_out += td(cell, "num");
      }
      m_out += "<td" + std::string(compared ? " rowspan=\"2\"" : "") + ">" +
               escape(detail::crossover_text(table, row.crossover)) + "</td></tr>\n";
      if (compared) {
        m_out += "<tr class=\"speedup\"><td>speedup</td>";
        for (const auto& figures : row.levels) {
          // Colour only where there is a verdict: one sample, noise or failures leave the ratio grey.
          const std::string css = figures.verdict == Verdict::faster   ? "num good"
                                  : figures.verdict == Verdict::slower ? "num bad"
                                                                       : "num";
          const std::string verdict = detail::verdict_text(figures.verdict, figures.why);
          m_out += "<td class=\"" + css + "\" title=\"" + escape(verdict) + "\">" +
                   escape(detail::ratio_text(figures.speedup)) + "<br><small>" + escape(verdict) + "</small></td>";
        }
        m_out += "</tr>\n";
      }
    }
    m_out += "</tbody>\n</table>\n<p class=\"sources\">" + escape(detail::sources_text(table)) + "</p>\n";
    if (detail::has_energy(table)) {
      m_out +=
          detail::energy_html(table, [this](const std::string& name, int rows) { return variant_cell(name, rows); });
    }
    latency_table(table, "TTFT (ms)", &LevelFigures::ttft_p50_ms, &LevelFigures::ttft_p99_ms, 1);
    latency_table(table, "TPOT (ms)", &LevelFigures::tpot_p50_ms, &LevelFigures::tpot_p99_ms, 2);
    accept_table(table);

    svg::LineChart throughput{.title = "Output tok/s against " + what + ", " + table.benchmark,
                              .x_label = table.rate ? "request rate (req/s)" : "concurrency (log scale)",
                              .y_label = "output tok/s",
                              .unit = "tok/s",
                              .x_scale = x_scale(table),
                              .x_ticks = {},
                              .series = {},
                              .legend_dashes = false};
    if (throughput.x_scale == svg::ScaleKind::log && table.rate) {
      throughput.x_label = "request rate (req/s, log scale)";
    }
    for (double level : table.levels) {
      throughput.x_ticks.push_back({level, short_number(level)});
    }
    svg::LineChart ttft = throughput;
    ttft.title = "TTFT p50 and p99 against " + what + ", " + table.benchmark;
    ttft.y_label = "time to first token (ms)";
    ttft.unit = "ms";
    ttft.legend_dashes = true;
    for (const auto& row : table.rows) {
      const int style = style_of(row.variant);
      svg::Series tok_s{.name = row.variant, .points = {}, .style = style, .dash = svg::Dash::solid, .in_legend = true};
      svg::Series p50 = tok_s;
      p50.name = row.variant + " p50";
      svg::Series p99 = tok_s;
      p99.name = row.variant + " p99";
      p99.dash = svg::Dash::dashed;
      p99.in_legend = false;
      for (std::size_t i = 0; i < row.levels.size() && i < table.levels.size(); ++i) {
        const auto& spread = row.levels[i].tok_s;
        tok_s.points.push_back({table.levels[i], spread ? present(spread->mean) : std::nullopt});
        p50.points.push_back({table.levels[i], present(row.levels[i].ttft_p50_ms)});
        p99.points.push_back({table.levels[i], present(row.levels[i].ttft_p99_ms)});
      }
      throughput.series.push_back(std::move(tok_s));
      // The legend names the variant once; the dash legend says which line is p99.
      p50.name = row.variant;
      ttft.series.push_back(std::move(p50));
      ttft.series.push_back(std::move(p99));
    }
    if (svg::has_data(throughput)) {
      figure("throughput", svg::render(throughput),
             "Output tok/s against " + what + " per variant, " + table.benchmark + ".");
    } else {
      no_data("for output tok/s of " + table.benchmark);
    }
    if (svg::has_data(ttft)) {
      figure("ttft", svg::render(ttft), "TTFT against " + what + ", " + table.benchmark + ": p50 solid, p99 dashed.");
    } else {
      no_data("for TTFT of " + table.benchmark);
    }
  }

  // Concurrency levels double or jump by decades: a log axis spaces them evenly.
  // Rates are often evenly spaced, so they get a log axis only when they span a decade.
  static svg::ScaleKind x_scale(const LevelsTable& table) {
    if (table.levels.empty() || table.levels.front() <= 0) {
      return svg::ScaleKind::linear;
    }
    if (!table.rate) {
      return svg::ScaleKind::log;
    }
    return table.levels.back() / table.levels.front() >= 10 ? svg::ScaleKind::log : svg::ScaleKind::linear;
  }

  void latency_table(const LevelsTable& table, const std::string& title, std::optional<double> LevelFigures::*p50,
                     std::optional<double> LevelFigures::*p99, int decimals) {
    m_out += "<h3>" + escape(title) + "</h3>\n<table class=\"levels\">\n";
    // Percentiles on rows of their own keep the columns narrow with many levels.
    level_head(table, "Variant", "", "Percentile");
    for (const auto& row : table.rows) {
      m_out += "<tr>" + variant_cell(row.variant, 2) + td("p50");
      for (const auto& figures : row.levels) {
        m_out += td(num(figures.*p50, decimals), "num");
      }
      m_out += "</tr>\n<tr>" + td("p99");
      for (const auto& figures : row.levels) {
        m_out += td(num(figures.*p99, decimals), "num");
      }
      m_out += "</tr>\n";
    }
    m_out += "</tbody>\n</table>\n";
  }

  void accept_table(const LevelsTable& table) {
    const bool any = std::any_of(table.rows.begin(), table.rows.end(), [](const LevelsRow& row) {
      return std::any_of(row.levels.begin(), row.levels.end(),
                         [](const LevelFigures& f) { return present(f.accept_length).has_value(); });
    });
    if (!any) {
      return;
    }
    m_out += "<h3>Accept length</h3>\n<table class=\"levels\">\n";
    level_head(table, "Variant");
    for (const auto& row : table.rows) {
      m_out += "<tr>" + variant_cell(row.variant);
      for (const auto& figures : row.levels) {
        m_out += td(num(figures.accept_length, 2), "num");
      }
      m_out += "</tr>\n";
    }
    m_out += "</tbody>\n</table>\n";
  }

  void commands(const CommandTable& table) {
    heading("Command: " + table.benchmark, table.spec);
    m_out += "<table class=\"command\">\n<thead><tr>" + th("Variant");
    for (const auto& metric : table.metrics) {
      m_out += th(metric, "num");
    }
    m_out += "</tr></thead>\n<tbody>\n";
    for (const auto& [variant, values] : table.rows) {
      m_out += "<tr>" + variant_cell(variant);
      for (std::size_t i = 0; i < table.metrics.size(); ++i) {
        m_out += td(general(i < values.size() ? values[i] : std::nullopt), "num");
      }
      m_out += "</tr>\n";
    }
    m_out += "</tbody>\n</table>\n";
  }

  // Categories as rows; per variant two columns, accept length and tok/s, so
  // each figure lines up with its kind down the table.
  void categories() {
    if (m_report.categories.empty()) {
      return;
    }
    m_out += "<h2>Per category</h2>\n<p>The workload's prompt categories one by one: accept length and tok/s per "
             "request, per variant.</p>\n";
    for (const auto& table : m_report.categories) {
      m_out += "<h3>" + escape(detail::category_title(table)) + "</h3>\n<table class=\"categories\">\n<thead><tr>";
      m_out += "<th rowspan=\"2\">Category</th>";
      for (const auto& row : table.rows) {
        m_out += "<th colspan=\"2\">" + variant_html(row.variant) + "</th>";
      }
      m_out += "</tr>\n<tr>";
      for (std::size_t i = 0; i < table.rows.size(); ++i) {
        m_out += th("Accept length", "num") + th("tok/s", "num");
      }
      m_out += "</tr></thead>\n<tbody>\n";
      for (std::size_t i = 0; i < table.categories.size(); ++i) {
        m_out += "<tr>" + td(escape(table.categories[i]));
        for (const auto& row : table.rows) {
          const auto& figures = row.categories[i];
          if (!figures) {
            m_out += td("\u2014", "num") + td("\u2014", "num");
            continue;
          }
          std::string tok_s = escape(detail::category_figure(figures->tok_s, 1));
          if (figures->counts.failed > 0) {
            tok_s += "<span class=\"bad\">" + escape(detail::failed_text(figures->counts)) + "</span>";
          }
          m_out += td(escape(detail::category_figure(figures->accept_length, 2)), "num") + td(tok_s, "num");
        }
        m_out += "</tr>\n";
      }
      m_out += "</tbody>\n</table>\n<p class=\"sources\">" + escape(detail::category_note(table)) + "</p>\n";
    }
  }

  void lengths() {
    if (m_report.lengths.empty()) {
      return;
    }
    m_out += "<h2>Request lengths</h2>\n";
    for (const auto& lengths : m_report.lengths) {
      m_out += "<h3>" + escape(lengths.benchmark) + "</h3>\n";
      length_plot(lengths, lengths.input_tokens, "input-lengths", "Prompt tokens", "prompt tokens",
                  "prompt tokens per request (as the server counted them)");
      length_plot(lengths, lengths.output_tokens, "output-lengths", "Output tokens", "output tokens",
                  "output tokens per request");
    }
  }

  void length_plot(const LengthHistograms& lengths, const std::optional<LengthHistogram>& histogram,
                   const std::string& kind, const std::string& what, const std::string& what_lower,
                   const std::string& x_label) {
    if (!histogram) {
      return;
    }
    svg::Histogram chart{.title = what + " per request, " + lengths.benchmark,
                         .x_label = x_label,
                         .y_label = "requests",
                         .unit = "tokens",
                         .counted = "requests",
                         .lo = histogram->lo,
                         .width = histogram->width,
                         .counts = histogram->counts,
                         .style = style_of(lengths.variant)};
    if (!svg::has_data(chart)) {
      no_data("for " + what_lower + " of " + lengths.benchmark);
      return;
    }
    // Which variant's requests these are, and how far they stand for the others.
    std::string caption = fmt::format("{} of all {} completed requests of {}, as {} ran them, in bins of {} token{}",
                                      what, histogram->requests, lengths.benchmark, lengths.variant,
                                      short_number(histogram->width), histogram->width == 1 ? "" : "s");
    if (!lengths.same.empty()) {
      caption += "; the same in " + util::join(lengths.same, ", ");
    }
    if (!lengths.differing.empty()) {
      caption += "; different in " + util::join(lengths.differing, ", ");
    }
    figure(kind, svg::render(chart), caption + ".");
  }

  void expectations() {
    if (m_report.expectations.empty()) {
      return;
    }
    m_out += "<h2>Expectations</h2>\n<table class=\"expectations\">\n<thead><tr>" + th("Variant") + th("Benchmark") +
             th("Level") + th("Metric") + th("Expected", "num") + th("Measured", "num") + th("Delta", "num") +
             th("Tolerance", "num") + th("Reproduced") + "</tr></thead>\n<tbody>\n";
    for (const auto& row : m_report.expectations) {
      m_out += row.reproduced ? "<tr>" : "<tr class=\"missed\">";
      m_out += td(escape(row.variant)) + td(escape(row.benchmark)) + td(escape(row.level.empty() ? "-" : row.level)) +
               td(escape(row.metric)) + td(general(row.expected), "num") + td(general(row.measured), "num") +
               td(escape(detail::percent(present(row.delta_pct))), "num") +
               td("\u00b1" + short_number(row.tolerance_pct) + "%", "num") +
               (row.reproduced ? td("yes", "good") : td("no", "bad")) + "</tr>\n";
    }
    m_out += "</tbody>\n</table>\n";
  }

  void noise() {
    if (m_report.noise.empty()) {
      return;
    }
    m_out += "<h2>Noise (A/A)</h2>\n<p>The baseline <strong>" + escape(m_report.baseline) +
             "</strong> measured again as <strong>" + escape(m_report.repeat) +
             "</strong>: a variant whose difference from the baseline is within this one's is inconclusive.</p>\n";
    m_out += "<table class=\"noise\">\n<thead><tr>" + th("Benchmark") + th("Level") + th("Metric") +
             th(m_report.baseline, "num") + th(m_report.repeat, "num") + th("Difference", "num") +
             "</tr></thead>\n<tbody>\n";
    for (const auto& row : m_report.noise) {
      m_out += "<tr>" + td(escape(row.benchmark)) + td(escape(row.level.empty() ? "-" : row.level)) +
               td(escape(row.metric)) + td(num(row.first, 2), "num") + td(num(row.again, 2), "num") +
               td(escape(detail::percent(present(row.difference_pct))), "num") + "</tr>\n";
    }
    m_out += "</tbody>\n</table>\n";
  }

  void glossary() {
    m_out += "<h2>Glossary</h2>\n<dl class=\"glossary\">\n";
    auto terms = detail::glossary();
    if (m_report.has_telemetry()) {
      terms.insert(terms.end(), detail::telemetry_glossary().begin(), detail::telemetry_glossary().end());
    }
    for (const auto& [term, definition] : terms) {
      m_out += "<dt>" + escape(term) + "</dt><dd>" + escape(definition) + "</dd>\n";
    }
    m_out += "</dl>\n";
  }

  void load_times() {
    m_out += "<h2>Load time</h2>\n";
    svg::BarChart chart{
        .title = "Server load time per variant", .y_label = "load time (s)", .unit = "s", .decimals = 1, .bars = {}};
    for (const auto& row : m_report.variants) {
      chart.bars.push_back(
          {.label = row.name,
           .value = present(row.load_s),
           .error = std::nullopt,
           .missing_note = row.status != VariantStatus::ok ? std::string(status_name(row.status)) : "no data",
           .style = style_of(row.name)});
    }
    if (svg::has_data(chart)) {
      figure("load-time", svg::render(chart), "Time from launch until the server was ready, per variant.");
    } else {
      no_data("for load times");
    }
  }

  const Report& m_report;
  std::map<std::string, int> m_styles;
  std::string m_out;
};

} // namespace

std::string to_html(const Report& report) {
  return Page(report).render();
}

} // namespace specctl::report
