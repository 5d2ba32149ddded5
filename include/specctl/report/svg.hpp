#pragma once

// A small SVG plotting helper for report.html: linear and logarithmic scales
// with readable ticks, line charts with markers and broken lines where values
// are missing, and bar charts with error bars. The SVG carries classes only
// (s0..s7 for series colors, axis, grid, ...); the page's style sheet gives
// them colors, so one chart reads in light, dark and print.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::report::svg {

// How many series colors and marker shapes the style sheet defines; series beyond wrap around.
inline constexpr int k_palette_size = 8;

// Text and attribute values escaped for HTML and SVG alike (& < > " ').
std::string escape(std::string_view text);

// A number for a label: fixed decimals, "-0.0" written as "0.0".
std::string fixed(double value, int decimals);

enum class ScaleKind { linear, log };

// Maps a data interval onto a pixel interval; a log scale needs a positive domain.
class Scale {
public:
  Scale(ScaleKind kind, double domain_low, double domain_high, double pixel_low, double pixel_high);
  double operator()(double value) const;
  ScaleKind kind() const { return m_kind; }

private:
  ScaleKind m_kind;
  double m_low;
  double m_high;
  double m_pixel_low;
  double m_pixel_high;
};

// Round-number ticks (steps of 1, 2 or 5 times a power of ten) that cover
// [low, high]: the first is <= low, the last >= high, about `target` of them.
std::vector<double> nice_ticks(double low, double high, int target = 5);

// Ticks for a log axis over [low, high] (both > 0): powers of ten, with 2 and
// 5 times them when the range spans fewer than three decades.
std::vector<double> log_ticks(double low, double high);

// One point of a series; a missing y breaks the line there.
struct Point {
  double x = 0;
  std::optional<double> y;
};

enum class Dash { solid, dashed };

struct Series {
  std::string name;
  std::vector<Point> points;
  // Index into the palette and the marker shapes.
  int style = 0;
  Dash dash = Dash::solid;
  // Whether the series gets its own legend entry (a p99 twin of a p50 line does not).
  bool in_legend = true;
};

struct Tick {
  double value = 0;
  std::string label;
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  // Unit appended to values in the markers' tooltips ("tok/s").
  std::string unit;
  ScaleKind x_scale = ScaleKind::linear;
  std::vector<Tick> x_ticks;
  std::vector<Series> series;
  // Extra legend entries explaining the dash patterns ("p50", "p99").
  bool legend_dashes = false;
};

struct Bar {
  std::string label;
  std::optional<double> value;
  std::optional<double> error;
  // Written in an empty slot when there is no value ("failed").
  std::string missing_note;
  int style = 0;
};

struct BarChart {
  std::string title;
  std::string y_label;
  std::string unit;
  int decimals = 1;
  std::vector<Bar> bars;
};

// Counts in equal, adjacent bins along a linear x axis.
struct Histogram {
  std::string title;
  std::string x_label;
  std::string y_label;
  // Appended to the bins' bounds in the bars' tooltips ("tokens").
  std::string unit;
  // What a count counts, plural, in the tooltips ("requests"; "1 request" for one).
  std::string counted;
  // Bin k covers [lo + k * width, lo + (k + 1) * width).
  double lo = 0;
  double width = 1;
  std::vector<int> counts;
  int style = 0;
};

// One quantity over time in windows (a benchmark's levels and repeats): a line
// per window, broken between them, and each window's start marked with a dashed
// line and its label.
struct TimeWindow {
  std::string label;
  std::vector<Point> points;
};

struct TimeChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  // Appended to values in the tooltips ("W").
  std::string unit;
  // The line's name in the legend ("summed power").
  std::string name;
  std::vector<TimeWindow> windows;
  // A dashed horizontal line across the plot ("power limit"), when there is one.
  std::optional<double> limit;
  std::string limit_name;
  int style = 0;
};

// Whether a chart has anything to draw; the page writes a note instead of an empty plot.
bool has_data(const LineChart& chart);
bool has_data(const BarChart& chart);
bool has_data(const Histogram& chart);
bool has_data(const TimeChart& chart);

// An <svg> element with viewBox, role="img", a <title> and aria-label.
std::string render(const LineChart& chart);
std::string render(const BarChart& chart);
// A bar per non-empty bin, so the bars' count is the bins that hold something.
std::string render(const Histogram& chart);
// Each window's label is written down along its mark from the top of the plot,
// left out where it would run into the one before (its mark keeps it as a tooltip).
std::string render(const TimeChart& chart);

} // namespace specctl::report::svg
