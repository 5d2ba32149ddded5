// The pieces of the charts (svg_parts.hpp).

#include "svg_parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace specctl::report::svg::parts {

double plot_right() {
  return k_width - k_margin_right;
}
double plot_bottom() {
  return k_margin_top + k_plot_height;
}

std::string num(double value) {
  return fixed(value, 1);
}

bool finite(const std::optional<double>& value) {
  return value && std::isfinite(*value);
}

// Values on the y axis: short for large figures, with decimals for small ones.
std::string tick_label(double value, double step) {
  if (step >= 1 || value == 0) {
    return fixed(value, 0);
  }
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step))), 1, 4);
  return fixed(value, decimals);
}

std::string title_and_open(const std::string& title, double height) {
  const std::string label = escape(title);
  return fmt::format("<svg class=\"chart\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" "
                     "aria-label=\"{}\">\n<title>{}</title>\n",
                     num(k_width), num(height), num(k_width), num(height), label, label);
}

YAxis y_axis(double max_value, const std::string& label) {
  if (!(max_value > 0) || !std::isfinite(max_value)) {
    max_value = 1;
  }
  const auto ticks = nice_ticks(0, max_value);
  YAxis axis;
  axis.top = ticks.back();
  const Scale y(ScaleKind::linear, 0, axis.top, plot_bottom(), k_margin_top);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (double tick : ticks) {
    axis.svg += fmt::format("<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", num(k_margin_left),
                            num(y(tick)), num(plot_right()), num(y(tick)));
    axis.svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                            num(k_margin_left - 6), num(y(tick) + 4), tick_label(tick, step));
  }
  axis.svg += fmt::format("<line class=\"axis\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", num(k_margin_left),
                          num(k_margin_top), num(plot_bottom()));
  axis.svg += fmt::format("<line class=\"axis\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>\n", num(k_margin_left),
                          num(plot_bottom()), num(plot_right()));
  const double middle = k_margin_top + k_plot_height / 2;
  axis.svg += fmt::format("<text class=\"label\" x=\"16\" y=\"{0}\" text-anchor=\"middle\" "
                          "transform=\"rotate(-90 16 {0})\">{1}</text>\n",
                          num(middle), escape(label));
  return axis;
}

std::string x_axis_label(const std::string& label) {
  return fmt::format("<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     num((k_margin_left + plot_right()) / 2), num(plot_bottom() + 40), escape(label));
}

XAxis linear_x_axis(double low, double high, const std::string& label) {
  XAxis axis;
  axis.ticks = nice_ticks(low, high, 6);
  const Scale x(ScaleKind::linear, axis.ticks.front(), axis.ticks.back(), k_margin_left, plot_right());
  const double step = axis.ticks.size() > 1 ? axis.ticks[1] - axis.ticks[0] : 1;
  for (double tick : axis.ticks) {
    axis.svg += fmt::format("<line class=\"tickmark\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", num(x(tick)),
                            num(plot_bottom()), num(plot_bottom() + 5));
    axis.svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(x(tick)),
                            num(plot_bottom() + 19), tick_label(tick, step));
  }
  axis.svg += x_axis_label(label);
  return axis;
}

// A marker shape per style, so series differ without color (print, color blindness).
std::string marker(int style, double x, double y, const std::string& tooltip) {
  const double r = k_marker_radius;
  const std::string title = "<title>" + escape(tooltip) + "</title>";
  const int shape = style % k_palette_size;
  const std::string hollow = shape >= 5 ? " hollow" : "";
  switch (shape % 5) {
  case 0:
    return fmt::format("<circle class=\"mark marker{}\" cx=\"{}\" cy=\"{}\" r=\"{}\">{}</circle>\n", hollow, num(x),
                       num(y), num(r), title);
  case 1:
    return fmt::format("<rect class=\"mark marker{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">{}</rect>\n", hollow,
                       num(x - r), num(y - r), num(2 * r), num(2 * r), title);
  case 2:
    return fmt::format("<path class=\"mark marker{}\" d=\"M{},{} L{},{} L{},{} Z\">{}</path>\n", hollow, num(x),
                       num(y - r - 1), num(x + r + 1), num(y + r), num(x - r - 1), num(y + r), title);
  case 3:
    return fmt::format("<path class=\"mark marker{}\" d=\"M{},{} L{},{} L{},{} L{},{} Z\">{}</path>\n", hollow, num(x),
                       num(y - r - 1), num(x + r + 1), num(y), num(x), num(y + r + 1), num(x - r - 1), num(y), title);
  default:
    return fmt::format("<path class=\"mark marker{}\" d=\"M{},{} L{},{} L{},{} Z\">{}</path>\n", hollow, num(x),
                       num(y + r + 1), num(x + r + 1), num(y - r), num(x - r - 1), num(y - r), title);
  }
}

// Legend entries in rows under the plot; returns the SVG and the height it takes.
std::pair<std::string, double> legend(const std::vector<LegendEntry>& entries, double top) {
  std::string out;
  double x = k_margin_left;
  double y = top;
  for (const auto& entry : entries) {
    const double width = 48 + static_cast<double>(entry.name.size()) * k_char_width;
    if (x + width > plot_right() && x > k_margin_left) {
      x = k_margin_left;
      y += k_legend_row;
    }
    const std::string group = entry.style ? fmt::format("series s{}", *entry.style % k_palette_size) : "series neutral";
    const std::string dashed = entry.dash == Dash::dashed ? " dashed" : "";
    out += fmt::format("<g class=\"legend {}\">\n<line class=\"line{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n",
                       group, dashed, num(x), num(y), num(x + 28), num(y));
    if (entry.marker && entry.style) {
      out += marker(*entry.style, x + 14, y, entry.name);
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n</g>\n", num(x + 34), num(y + 4), escape(entry.name));
    x += width;
  }
  return {out, y - top + k_legend_row};
}

// How many legend rows the entries need, to size the drawing before writing it.
double legend_height(const std::vector<LegendEntry>& entries) {
  if (entries.empty()) {
    return 0;
  }
  return legend(entries, 0).second;
}

// Shortens a label to the characters that fit in `width` pixels.
std::string fit(const std::string& text, double width) {
  const auto max_chars = static_cast<std::size_t>(std::max(4.0, width / k_char_width));
  if (text.size() <= max_chars) {
    return text;
  }
  return text.substr(0, max_chars - 1) + "\u2026";
}

} // namespace specctl::report::svg::parts
