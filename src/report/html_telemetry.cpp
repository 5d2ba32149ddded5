// report.html's GPU telemetry: the tok/J tables beside tok/s, and a section with
// each variant's peak memory while loading, what could not be sampled, and its
// summed power over time with the levels marked.

#include "cells.hpp"
#include "html_parts.hpp"

#include <specctl/report/svg.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace specctl::report::detail {

namespace {

using svg::escape;

// "parallel c8 #2", "single-stream single", "load"; rates as the tables write them ("2.5/s").
std::string window_label(const PowerWindow& window) {
  if (window.benchmark.empty()) {
    return window.level;
  }
  std::string level = window.level;
  if (level.size() > 1 && level.front() == 'r' && level.find_first_not_of("0123456789.", 1) == std::string::npos) {
    level = level.substr(1) + "/s";
  }
  return window.benchmark + " " + level + (window.repeat > 1 ? fmt::format(" #{}", window.repeat) : "");
}

std::string power_figure(const PowerTrace& trace, int style) {
  svg::TimeChart chart{.title = "Summed GPU power over time, " + trace.variant,
                       .x_label = "seconds since the variant's first sample",
                       .y_label = "power (W, all GPUs)",
                       .unit = "W",
                       .name = "summed power",
                       .windows = {},
                       .limit = trace.limit_w,
                       .limit_name = "power limit",
                       .style = style};
  for (const auto& window : trace.windows) {
    svg::TimeWindow drawn{window_label(window), {}};
    for (const auto& [t, watts] : window.points) {
      drawn.points.push_back({t, watts});
    }
    chart.windows.push_back(std::move(drawn));
  }
  if (!svg::has_data(chart)) {
    return "<p class=\"nodata\">No power samples to plot for " + escape(trace.variant) + ".</p>\n";
  }
  return figure_html("power", svg::render(chart),
                     fmt::format("Power of {}'s {} GPU{} summed, over time as nvidia-smi sampled it (telemetry.csv), "
                                 "and their power limits summed; a dashed mark where each window began: the load, each "
                                 "benchmark level and repeat.",
                                 trace.variant, trace.gpus, trace.gpus == 1 ? "" : "s"));
}

} // namespace

std::string tok_per_j_td(const EnergyFigures& energy) {
  std::string cell = escape(spread_text(energy.tok_per_j, 2));
  if (!energy.throttled.empty()) {
    std::string why;
    for (const auto& t : energy.throttled) {
      why += (why.empty() ? "" : "; ") + throttle_text(t);
    }
    cell += " <span class=\"bad\" title=\"" + escape(why) + "\">(throttled)</span>";
  }
  return td(cell, "num");
}

std::string tok_per_j_ratio_td(const EnergyFigures& energy) {
  if (!energy.sampled) {
    return td("-", "num");
  }
  // Colour only where there is a verdict, as the speedups.
  const std::string css = energy.verdict == Verdict::faster   ? "num good"
                          : energy.verdict == Verdict::slower ? "num bad"
                                                              : "num";
  const std::string verdict = energy_verdict_text(energy.verdict, energy.why);
  if (!energy.ratio) {
    return td(escape(verdict), css);
  }
  return "<td class=\"" + css + "\" title=\"" + escape(verdict) + "\">" + escape(ratio_text(energy.ratio)) +
         "<br><small>" + escape(verdict) + "</small></td>";
}

std::string energy_html(const LevelsTable& table, const VariantCell& variant_cell) {
  auto head = [&](const std::string& first) {
    std::string out = "<thead><tr>" + th(first);
    for (std::size_t i = 0; i < table.levels.size(); ++i) {
      out += th(table.label(i), "num");
    }
    return out + "</tr></thead>\n<tbody>\n";
  };
  std::string out = "<h3>Output tok/J</h3>\n<table class=\"levels energy\">\n" + head("Variant");
  std::string power = "<h3>GPU power (W, mean, all GPUs)</h3>\n<table class=\"levels power\">\n" + head("Variant");
  std::string throttled;
  for (const auto& row : table.rows) {
    const bool compared = std::any_of(row.levels.begin(), row.levels.end(),
                                      [](const LevelFigures& f) { return f.energy.ratio.has_value(); });
    out += "<tr>" + variant_cell(row.variant, compared ? 2 : 1);
    power += "<tr>" + variant_cell(row.variant, 1);
    for (std::size_t i = 0; i < row.levels.size(); ++i) {
      const auto& e = row.levels[i].energy;
      out += tok_per_j_td(e);
      power += td(escape(power_cell(e)), "num");
      for (const auto& t : e.throttled) {
        throttled += "<li><strong>" + escape(row.variant) + "</strong> at " +
                     escape(throttle_where(table, i, t) + ": " + throttle_text(t)) + "</li>\n";
      }
    }
    out += "</tr>\n";
    power += "</tr>\n";
    if (compared) {
      out += "<tr class=\"speedup\">";
      for (const auto& f : row.levels) {
        out += tok_per_j_ratio_td(f.energy);
      }
      out += "</tr>\n";
    }
  }
  out += "</tbody>\n</table>\n" + power + "</tbody>\n</table>\n";
  if (!throttled.empty()) {
    out += "<p class=\"bad\">Throttled levels:</p>\n<ul class=\"notes throttled\">\n" + throttled + "</ul>\n";
  }
  return out + "<p class=\"sources\">" + escape(energy_note(table.repeats)) + "</p>\n";
}

std::string telemetry_html(const Report& report, const std::function<int(const std::string&)>& style_of) {
  std::string out = "<h2>GPU telemetry</h2>\n<p>nvidia-smi sampled each variant's GPUs while it loaded and during "
                    "every level; telemetry.csv in its folder holds every sample.</p>\n";
  for (const auto& v : report.variants) {
    out += "<h3>" + escape(v.name) + "</h3>\n";
    if (!v.telemetry) {
      out += "<p class=\"nodata\">Not sampled.</p>\n";
      continue;
    }
    out += "<p class=\"telemetry-summary\">" + escape(telemetry_summary(*v.telemetry)) + "</p>\n";
    if (!v.telemetry->warnings.empty()) {
      out += "<ul class=\"notes warnings\">\n";
      for (const auto& warning : v.telemetry->warnings) {
        out += "<li class=\"bad\">warning: " + escape(warning) + "</li>\n";
      }
      out += "</ul>\n";
    }
    auto trace = std::find_if(report.power.begin(), report.power.end(),
                              [&](const PowerTrace& p) { return p.variant == v.name; });
    if (trace == report.power.end()) {
      out += "<p class=\"nodata\">No telemetry.csv: no power over time to plot.</p>\n";
      continue;
    }
    out += power_figure(*trace, style_of(v.name));
    for (const auto& problem : trace->problems) {
      out += "<p class=\"nodata\">" + escape(problem) + "</p>\n";
    }
  }
  return out;
}

} // namespace specctl::report::detail
