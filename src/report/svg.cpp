#include <specctl/report/svg.hpp>

#include "cells.hpp"
#include "svg_parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace specctl::report::svg {

using namespace parts;

std::string escape(std::string_view text) {
  return detail::xml_escape(text);
}

std::string fixed(double value, int decimals) {
  std::string out = fmt::format("{:.{}f}", value, decimals);
  if (out.starts_with('-') && out.find_first_not_of("-0.") == std::string::npos) {
    out.erase(0, 1);
  }
  return out;
}

Scale::Scale(ScaleKind kind, double domain_low, double domain_high, double pixel_low, double pixel_high)
    : m_kind(kind), m_low(domain_low), m_high(domain_high), m_pixel_low(pixel_low), m_pixel_high(pixel_high) {
  if (m_kind == ScaleKind::log) {
    m_low = std::log10(m_low);
    m_high = std::log10(m_high);
  }
}

double Scale::operator()(double value) const {
  const double v = m_kind == ScaleKind::log ? std::log10(value) : value;
  if (m_high == m_low) {
    return (m_pixel_low + m_pixel_high) / 2;
  }
  return m_pixel_low + (v - m_low) / (m_high - m_low) * (m_pixel_high - m_pixel_low);
}

std::vector<double> nice_ticks(double low, double high, int target) {
  if (high < low) {
    std::swap(low, high);
  }
  double span = high - low;
  if (span <= 0) {
    span = low != 0 ? std::abs(low) : 1;
    high = low + span;
  }
  const double raw = span / std::max(1, target);
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double residual = raw / magnitude;
  double step = 10 * magnitude;
  if (residual <= 1) {
    step = magnitude;
  } else if (residual <= 2) {
    step = 2 * magnitude;
  } else if (residual <= 5) {
    step = 5 * magnitude;
  }
  const double first = std::floor(low / step + 1e-9) * step;
  const double last = std::max(std::ceil(high / step - 1e-9) * step, first + step);
  std::vector<double> ticks;
  // Bounded by construction (about `target` steps); the cap guards against rounding surprises.
  for (int i = 0; i <= 1000; ++i) {
    const double tick = first + i * step;
    if (tick > last + step * 1e-6) {
      break;
    }
    ticks.push_back(std::abs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  return ticks;
}

std::vector<double> log_ticks(double low, double high) {
  std::vector<double> ticks;
  if (!(low > 0) || !(high >= low) || !std::isfinite(high)) {
    return ticks;
  }
  const int first = static_cast<int>(std::floor(std::log10(low)));
  const int last = static_cast<int>(std::ceil(std::log10(high)));
  const bool dense = last - first < 3;
  for (int exponent = first; exponent <= last; ++exponent) {
    const double decade = std::pow(10.0, exponent);
    for (double factor : {1.0, 2.0, 5.0}) {
      if (factor != 1 && !dense) {
        continue;
      }
      const double tick = decade * factor;
      if (tick >= low * (1 - 1e-9) && tick <= high * (1 + 1e-9)) {
        ticks.push_back(tick);
      }
    }
  }
  return ticks;
}

bool has_data(const LineChart& chart) {
  for (const auto& series : chart.series) {
    for (const auto& point : series.points) {
      if (finite(point.y) && std::isfinite(point.x)) {
        return true;
      }
    }
  }
  return false;
}

bool has_data(const BarChart& chart) {
  return std::any_of(chart.bars.begin(), chart.bars.end(), [](const Bar& bar) { return finite(bar.value); });
}

bool has_data(const Histogram& chart) {
  return chart.width > 0 && std::isfinite(chart.lo) && std::isfinite(chart.width) &&
         std::any_of(chart.counts.begin(), chart.counts.end(), [](int count) { return count > 0; });
}

std::string render(const LineChart& chart) {
  const bool log_x = chart.x_scale == ScaleKind::log;
  // The x domain: every tick and every point that can be drawn on this scale.
  double x_low = std::numeric_limits<double>::infinity();
  double x_high = -x_low;
  double y_max = 0;
  auto usable_x = [&](double x) { return std::isfinite(x) && (!log_x || x > 0); };
  for (const auto& tick : chart.x_ticks) {
    if (usable_x(tick.value)) {
      x_low = std::min(x_low, tick.value);
      x_high = std::max(x_high, tick.value);
    }
  }
  for (const auto& series : chart.series) {
    for (const auto& point : series.points) {
      if (usable_x(point.x) && finite(point.y)) {
        x_low = std::min(x_low, point.x);
        x_high = std::max(x_high, point.x);
        y_max = std::max(y_max, *point.y);
      }
    }
  }
  if (!std::isfinite(x_low)) {
    x_low = log_x ? 1 : 0;
    x_high = log_x ? 10 : 1;
  }

  std::vector<LegendEntry> entries;
  for (const auto& series : chart.series) {
    const bool drawn = std::any_of(series.points.begin(), series.points.end(),
                                   [&](const Point& point) { return usable_x(point.x) && finite(point.y); });
    if (series.in_legend) {
      entries.push_back({drawn ? series.name : series.name + " (no data)", series.style, Dash::solid, true});
    }
  }
  if (chart.legend_dashes) {
    entries.push_back({"p50", std::nullopt, Dash::solid, false});
    entries.push_back({"p99", std::nullopt, Dash::dashed, false});
  }
  const double legend_top = plot_bottom() + k_axis_room + 10;
  const double height = legend_top + legend_height(entries) + 4;

  std::string out = title_and_open(chart.title, height);
  const YAxis axis = y_axis(y_max, chart.y_label);
  out += axis.svg;
  const Scale x(chart.x_scale, x_low, x_high, k_margin_left + k_x_inset, plot_right() - k_x_inset);
  const Scale y(ScaleKind::linear, 0, axis.top, plot_bottom(), k_margin_top);

  // Tick labels left to right, skipping one that would overlap the last one written.
  double last_label_end = -std::numeric_limits<double>::infinity();
  for (const auto& tick : chart.x_ticks) {
    if (!usable_x(tick.value)) {
      continue;
    }
    const double px = x(tick.value);
    out += fmt::format("<line class=\"tickmark\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", num(px),
                       num(plot_bottom()), num(plot_bottom() + 5));
    const double half = static_cast<double>(tick.label.size()) * k_char_width / 2;
    if (px - half < last_label_end + 4) {
      continue;
    }
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(px),
                       num(plot_bottom() + 19), escape(tick.label));
    last_label_end = px + half;
  }
  out += x_axis_label(chart.x_label);

  for (const auto& series : chart.series) {
    const std::string dashed = series.dash == Dash::dashed ? " dashed" : "";
    out += fmt::format("<g class=\"series s{}\">\n", series.style % k_palette_size);
    // Runs of consecutive drawable points; a missing value ends a run, so the line breaks there.
    std::vector<std::string> run;
    auto flush = [&] {
      if (run.size() >= 2) {
        out += "<polyline class=\"mark line" + dashed + "\" points=\"";
        for (std::size_t i = 0; i < run.size(); ++i) {
          out += (i == 0 ? "" : " ") + run[i];
        }
        out += "\"/>\n";
      }
      run.clear();
    };
    for (const auto& point : series.points) {
      if (!usable_x(point.x) || !finite(point.y)) {
        flush();
        continue;
      }
      run.push_back(num(x(point.x)) + "," + num(y(*point.y)));
    }
    flush();
    for (const auto& point : series.points) {
      if (usable_x(point.x) && finite(point.y)) {
        const std::string tooltip = fmt::format("{}: {} {}", series.name, fixed(*point.y, 1), chart.unit);
        out += marker(series.style, x(point.x), y(*point.y), tooltip);
      }
    }
    out += "</g>\n";
  }
  out += legend(entries, legend_top).first;
  out += "</svg>\n";
  return out;
}

std::string render(const BarChart& chart) {
  double y_max = 0;
  for (const auto& bar : chart.bars) {
    if (finite(bar.value)) {
      const double error = finite(bar.error) ? std::abs(*bar.error) : 0;
      y_max = std::max(y_max, *bar.value + error);
    }
  }
  const double height = plot_bottom() + k_axis_room;
  std::string out = title_and_open(chart.title, height);
  const YAxis axis = y_axis(y_max, chart.y_label);
  out += axis.svg;
  const Scale y(ScaleKind::linear, 0, axis.top, plot_bottom(), k_margin_top);

  const double plot_width = plot_right() - k_margin_left;
  const double slot = plot_width / static_cast<double>(std::max<std::size_t>(1, chart.bars.size()));
  const double bar_width = std::min(64.0, slot * 0.6);
  for (std::size_t i = 0; i < chart.bars.size(); ++i) {
    const auto& bar = chart.bars[i];
    const double center = k_margin_left + slot * (static_cast<double>(i) + 0.5);
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}<title>{}</title></text>\n",
                       num(center), num(plot_bottom() + 19), escape(fit(bar.label, slot - 6)), escape(bar.label));
    if (!finite(bar.value)) {
      out += fmt::format("<rect class=\"empty\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                         num(center - bar_width / 2), num(plot_bottom() - 44), num(bar_width), num(44));
      out += fmt::format("<text class=\"note\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(center),
                         num(plot_bottom() - 18), escape(fit(bar.missing_note, slot - 6)));
      continue;
    }
    const double value = *bar.value;
    const double error = finite(bar.error) ? std::abs(*bar.error) : 0;
    std::string tooltip = bar.label + ": " + fixed(value, chart.decimals);
    if (error > 0) {
      tooltip += " \u00b1 " + fixed(error, chart.decimals);
    }
    tooltip += " " + chart.unit;
    const double top = y(std::max(0.0, value));
    out += fmt::format("<g class=\"series s{}\">\n", bar.style % k_palette_size);
    out +=
        fmt::format("<rect class=\"mark bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>\n",
                    num(center - bar_width / 2), num(top), num(bar_width), num(plot_bottom() - top), escape(tooltip));
    double label_y = top - 6;
    if (error > 0) {
      const double high = y(value + error);
      const double low = y(std::max(0.0, value - error));
      const double cap = std::min(8.0, bar_width / 4);
      out += fmt::format("<path class=\"mark err\" d=\"M{0},{1} V{2} M{3},{1} H{4} M{3},{2} H{4}\"/>\n", num(center),
                         num(high), num(low), num(center - cap), num(center + cap));
      label_y = high - 6;
    }
    out += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n</g>\n", num(center),
                       num(label_y), fixed(value, chart.decimals));
  }
  out += "</svg>\n";
  return out;
}

std::string render(const Histogram& chart) {
  int most = 0;
  for (int count : chart.counts) {
    most = std::max(most, count);
  }
  const double height = plot_bottom() + k_axis_room;
  std::string out = title_and_open(chart.title, height);
  // At least 5 on the y axis, so a handful of requests gets whole-number ticks.
  const YAxis axis = y_axis(std::max(most, 5), chart.y_label);
  out += axis.svg;
  const Scale y(ScaleKind::linear, 0, axis.top, plot_bottom(), k_margin_top);

  const double width = chart.width > 0 && std::isfinite(chart.width) ? chart.width : 1;
  const double high = chart.lo + width * static_cast<double>(std::max<std::size_t>(1, chart.counts.size()));
  const auto x_axis = linear_x_axis(chart.lo, high, chart.x_label);
  const Scale x(ScaleKind::linear, x_axis.ticks.front(), x_axis.ticks.back(), k_margin_left, plot_right());
  out += x_axis.svg;

  // Bin bounds are usually whole tokens; a fractional width keeps its decimal.
  auto bound = [](double value) { return fixed(value, value == std::floor(value) ? 0 : 1); };
  out += fmt::format("<g class=\"series s{}\">\n", chart.style % k_palette_size);
  for (std::size_t k = 0; k < chart.counts.size(); ++k) {
    if (chart.counts[k] <= 0) {
      continue;
    }
    const double from = chart.lo + width * static_cast<double>(k);
    const double left = x(from);
    const double right = x(from + width);
    // A hairline between neighbours where bins are wide enough to spare it.
    const double gap = right - left > 4 ? 1 : 0;
    const double top = y(chart.counts[k]);
    // "1 request", "3 requests".
    std::string counted = chart.counted;
    if (chart.counts[k] == 1 && counted.ends_with('s')) {
      counted.pop_back();
    }
    const std::string tooltip =
        fmt::format("[{}, {}) {}: {} {}", bound(from), bound(from + width), chart.unit, chart.counts[k], counted);
    out +=
        fmt::format("<rect class=\"mark bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>\n",
                    num(left + gap / 2), num(top), num(std::max(0.5, right - left - gap)), num(plot_bottom() - top),
                    escape(tooltip));
  }
  out += "</g>\n</svg>\n";
  return out;
}

} // namespace specctl::report::svg
