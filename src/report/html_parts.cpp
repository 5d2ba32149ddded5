// The cells of report.html (html_parts.hpp).

#include "html_parts.hpp"
#include "cells.hpp"

#include <specctl/report/svg.hpp>

#include <cmath>

namespace specctl::report::detail {

using svg::escape;

// A figure that is NaN is as missing as an empty optional; neither may reach the page as "nan".
std::optional<double> present(std::optional<double> value) {
  if (value && std::isfinite(*value)) {
    return value;
  }
  return std::nullopt;
}

std::string num(std::optional<double> value, int decimals) {
  return detail::fixed(present(value), decimals);
}

// Command metrics have any magnitude: more decimals for small figures.
std::string general(std::optional<double> value) {
  value = present(value);
  if (!value) {
    return "-";
  }
  const double magnitude = std::abs(*value);
  return num(value, magnitude >= 100 ? 1 : magnitude >= 1 ? 2 : 4);
}

// A level on an axis or a tolerance: "10", "0.5", without trailing zeros.
std::string short_number(double value) {
  if (!std::isfinite(value)) {
    return "-";
  }
  std::string out = svg::fixed(value, 2);
  while (out.ends_with('0')) {
    out.pop_back();
  }
  if (out.ends_with('.')) {
    out.pop_back();
  }
  return out;
}

std::string td(const std::string& html, const std::string& css_class) {
  return css_class.empty() ? "<td>" + html + "</td>" : "<td class=\"" + css_class + "\">" + html + "</td>";
}

std::string th(const std::string& text, const std::string& css_class) {
  return css_class.empty() ? "<th>" + escape(text) + "</th>"
                           : "<th class=\"" + css_class + "\">" + escape(text) + "</th>";
}

std::string figure_html(const std::string& kind, const std::string& svg_text, const std::string& caption) {
  return "<figure class=\"plot\" data-plot=\"" + kind + "\">\n" + svg_text + "<figcaption>" + escape(caption) +
         "</figcaption>\n</figure>\n";
}

} // namespace specctl::report::detail
