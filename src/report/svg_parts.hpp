#pragma once

// Private to src/report: the pieces every chart of svg.cpp and svg_time.cpp is
// drawn with (sizes, the y axis, markers, the legend).

#include <specctl/report/svg.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace specctl::report::svg::parts {

// The drawing's size in SVG units; the page scales it down on narrow screens.
inline constexpr double k_width = 720;
inline constexpr double k_margin_left = 72;
inline constexpr double k_margin_right = 20;
inline constexpr double k_margin_top = 22;
inline constexpr double k_plot_height = 250;
// Room under the plot for tick labels and the axis label.
inline constexpr double k_axis_room = 48;
inline constexpr double k_legend_row = 22;
// Markers sit this far inside the plot's left and right edges, off the axis.
inline constexpr double k_x_inset = 18;
// A rough width of one character at the charts' 12px font, to keep labels from overlapping.
inline constexpr double k_char_width = 6.5;
inline constexpr double k_marker_radius = 4.5;

double plot_right();
double plot_bottom();
// A coordinate: one decimal.
std::string num(double value);
bool finite(const std::optional<double>& value);
// Values on the y axis: short for large figures, with decimals for small ones.
std::string tick_label(double value, double step);
// The <svg> element's opening with its <title>.
std::string title_and_open(const std::string& title, double height);

// The y axis from 0: grid lines, tick labels and the rotated axis label.
struct YAxis {
  double top = 1;
  std::string svg;
};
YAxis y_axis(double max_value, const std::string& label);

std::string x_axis_label(const std::string& label);
// A linear x axis between round ticks around [low, high] (so every tick lies on the
// plot): its tick marks and labels, and the axis label.
struct XAxis {
  std::vector<double> ticks;
  std::string svg;
};
XAxis linear_x_axis(double low, double high, const std::string& label);
// A marker shape per style, so series differ without color (print, color blindness).
std::string marker(int style, double x, double y, const std::string& tooltip);

struct LegendEntry {
  std::string name;
  std::optional<int> style;
  Dash dash = Dash::solid;
  bool marker = true;
};
// Legend entries in rows under the plot; returns the SVG and the height it takes.
std::pair<std::string, double> legend(const std::vector<LegendEntry>& entries, double top);
// How many legend rows the entries need, to size the drawing before writing it.
double legend_height(const std::vector<LegendEntry>& entries);
// Shortens a label to the characters that fit in `width` pixels.
std::string fit(const std::string& text, double width);

} // namespace specctl::report::svg::parts
