#pragma once

// Private to src/report: the cells of report.html (html.cpp), and its GPU
// telemetry (html_telemetry.cpp): the tok/J tables beside tok/s and the section
// with each variant's load memory, warnings and power over time.

#include <specctl/report/report.hpp>

#include <functional>
#include <optional>
#include <string>

namespace specctl::report::detail {

// A figure that is NaN is as missing as an empty optional; neither may reach the page as "nan".
std::optional<double> present(std::optional<double> value);
std::string num(std::optional<double> value, int decimals);
// Command metrics have any magnitude: more decimals for small figures.
std::string general(std::optional<double> value);
// A level on an axis or a tolerance: "10", "0.5", without trailing zeros.
std::string short_number(double value);
std::string td(const std::string& html, const std::string& css_class = "");
std::string th(const std::string& text, const std::string& css_class = "");
// A plot with its caption; `kind` names it for the browser test (data-plot).
std::string figure_html(const std::string& kind, const std::string& svg_text, const std::string& caption);

// tok/J with "(throttled)" marked; the cell of a single-stream row or a level.
std::string tok_per_j_td(const EnergyFigures& energy);
// tok/J against the baseline's, coloured where there is a verdict, the verdict under it.
std::string tok_per_j_ratio_td(const EnergyFigures& energy);

// A variant's name cell, spanning `rows` rows, as the page writes it.
using VariantCell = std::function<std::string(const std::string& variant, int rows)>;
// A levels benchmark's tok/J table (with its ratios to the baseline's), its GPU
// power table, and the list of its throttled levels.
std::string energy_html(const LevelsTable& table, const VariantCell& variant_cell);
// The GPU telemetry section: per variant its load memory, where its energy came
// from, its warnings and its power over time; `style_of` gives a variant's colour.
std::string telemetry_html(const Report& report, const std::function<int(const std::string&)>& style_of);

} // namespace specctl::report::detail
