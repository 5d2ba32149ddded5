// A quantity over time in windows (report.html's power plot): a line per window,
// each window's start marked and labelled.

#include <specctl/report/svg.hpp>

#include "svg_parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace specctl::report::svg {

using namespace parts;

namespace {

// The height of a line of the charts' 12px text: a label written down along a
// window's mark needs this much room to the next one.
constexpr double k_label_height = 13;

bool drawable(const Point& point) {
  return std::isfinite(point.x) && finite(point.y);
}

// The window's first drawable point, where its mark goes; nullptr when it has none.
const Point* first_drawable(const TimeWindow& window) {
  auto it = std::find_if(window.points.begin(), window.points.end(), drawable);
  return it == window.points.end() ? nullptr : &*it;
}

} // namespace

bool has_data(const TimeChart& chart) {
  return std::any_of(chart.windows.begin(), chart.windows.end(),
                     [](const TimeWindow& window) { return first_drawable(window) != nullptr; });
}

std::string render(const TimeChart& chart) {
  double x_low = std::numeric_limits<double>::infinity();
  double x_high = -x_low;
  double y_max = finite(chart.limit) ? *chart.limit : 0;
  for (const auto& window : chart.windows) {
    for (const auto& point : window.points) {
      if (drawable(point)) {
        x_low = std::min(x_low, point.x);
        x_high = std::max(x_high, point.x);
        y_max = std::max(y_max, *point.y);
      }
    }
  }
  if (!std::isfinite(x_low)) {
    x_low = 0;
    x_high = 1;
  }
  std::vector<LegendEntry> entries = {{chart.name, chart.style, Dash::solid, false}};
  if (finite(chart.limit)) {
    entries.push_back({chart.limit_name, std::nullopt, Dash::dashed, false});
  }
  const double legend_top = plot_bottom() + k_axis_room + 10;
  const double height = legend_top + legend_height(entries) + 4;

  std::string out = title_and_open(chart.title, height);
  const YAxis axis = y_axis(y_max, chart.y_label);
  out += axis.svg;
  const auto x_axis = linear_x_axis(x_low, x_high, chart.x_label);
  const auto& ticks = x_axis.ticks;
  const Scale x(ScaleKind::linear, ticks.front(), ticks.back(), k_margin_left, plot_right());
  const Scale y(ScaleKind::linear, 0, axis.top, plot_bottom(), k_margin_top);
  out += x_axis.svg;

  // Where each window starts: a dashed mark across the plot, and its label written
  // down along it from the top (windows can be seconds apart), unless it would run
  // into the label before it.
  double last_label = -std::numeric_limits<double>::infinity();
  for (const auto& window : chart.windows) {
    const Point* first = first_drawable(window);
    if (first == nullptr) {
      continue;
    }
    const double px = x(first->x);
    out += fmt::format("<line class=\"tickmark boundary\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
                       "stroke-dasharray=\"3 3\"><title>{3}</title></line>\n",
                       num(px), num(k_margin_top), num(plot_bottom()), escape(window.label));
    const double baseline = px + k_label_height;
    if (baseline - last_label >= k_label_height && baseline <= plot_right()) {
      const double top = k_margin_top + 4;
      out += fmt::format("<text class=\"tick boundary-label\" x=\"{0}\" y=\"{1}\" text-anchor=\"end\" "
                         "transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
                         num(baseline), num(top), escape(fit(window.label, k_plot_height - 8)));
      last_label = baseline;
    }
  }
  if (finite(chart.limit)) {
    out += fmt::format("<g class=\"legend series neutral\">\n<line class=\"line dashed\" x1=\"{0}\" y1=\"{1}\" "
                       "x2=\"{2}\" y2=\"{1}\"><title>{3}: {4} {5}</title></line>\n</g>\n",
                       num(k_margin_left), num(y(*chart.limit)), num(plot_right()), escape(chart.limit_name),
                       fixed(*chart.limit, 0), escape(chart.unit));
  }
  out += fmt::format("<g class=\"series s{}\">\n", chart.style % k_palette_size);
  for (const auto& window : chart.windows) {
    std::vector<std::string> run;
    double sum = 0;
    double peak = 0;
    for (const auto& point : window.points) {
      if (drawable(point)) {
        run.push_back(num(x(point.x)) + "," + num(y(*point.y)));
        sum += *point.y;
        peak = std::max(peak, *point.y);
      }
    }
    if (run.empty()) {
      continue;
    }
    const std::string tooltip =
        fmt::format("{}: mean {} {}, peak {} {}", window.label, fixed(sum / static_cast<double>(run.size()), 0),
                    chart.unit, fixed(peak, 0), chart.unit);
    if (run.size() == 1) {
      // A window of one sample has no line to draw: its point.
      const Point* only = first_drawable(window);
      out += marker(chart.style, x(only->x), y(*only->y), tooltip);
      continue;
    }
    out += "<polyline class=\"mark line\" points=\"";
    for (std::size_t i = 0; i < run.size(); ++i) {
      out += (i == 0 ? "" : " ") + run[i];
    }
    out += "\"><title>" + escape(tooltip) + "</title></polyline>\n";
  }
  out += "</g>\n";
  out += legend(entries, legend_top).first;
  out += "</svg>\n";
  return out;
}

} // namespace specctl::report::svg
