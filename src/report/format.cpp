#include "format.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::report::detail {

std::string level_label(bool rate, double level) {
  return rate ? fmt::format("{:g}/s", level) : fmt::format("c{:g}", level);
}

std::string fixed(std::optional<double> value, int decimals) {
  return value && std::isfinite(*value) ? fmt::format("{:.{}f}", *value, decimals) : "-";
}

std::string times(std::optional<double> ratio) {
  return ratio && std::isfinite(*ratio) ? fmt::format("{:.2f}×", *ratio) : "-";
}

std::string interval(const std::optional<Ratio>& ratio) {
  if (!ratio || !ratio->low || !ratio->high) {
    return "-";
  }
  return fmt::format("[{:.2f}, {:.2f}]", *ratio->low, *ratio->high);
}

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\n\r") == std::string::npos) {
    return value;
  }
  std::string out = "\"";
  for (char c : value) {
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  }
  return out + "\"";
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      // Control characters other than tab and newline are not allowed in XML 1.0.
      out += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? '?' : c;
    }
  }
  return out;
}

std::string percent(std::optional<double> value) { return value ? fmt::format("{:+.1f}%", *value) : "-"; }

std::string crossover_text(const LevelsTable& table, const Crossover& crossover) {
  auto label = [&](double level) { return level_label(table.rate, level); };
  switch (crossover.kind) {
  case Crossover::Kind::none:
    return "-";
  case Crossover::Kind::always_faster:
    return "faster at all levels";
  case Crossover::Kind::never_faster:
    return "never faster";
  case Crossover::Kind::mixed:
    return "faster at some levels";
  case Crossover::Kind::crosses:
    if (crossover.estimate) {
      // An estimate: one decimal below 10, whole numbers above.
      return fmt::format("{} (≈{:.{}f})", label(*crossover.first_not_faster), *crossover.estimate,
                         *crossover.estimate < 10 ? 1 : 0);
    }
    return label(*crossover.first_not_faster);
  }
  return "-";
}

std::string verdict_line(const Report& report) {
  auto ok = std::count_if(report.variants.begin(), report.variants.end(), [](const auto& v) { return v.status == "ok"; });
  auto met = std::count_if(report.expectations.begin(), report.expectations.end(),
                           [](const auto& e) { return e.reproduced; });
  std::string out = fmt::format("{}: {}/{} variants ok", report.passed() ? "passed" : "FAILED", ok,
                                report.variants.size());
  if (!report.expectations.empty()) {
    out += fmt::format(", {}/{} expectations reproduced", met, report.expectations.size());
  }
  return out;
}

} // namespace specctl::report::detail

namespace specctl::report {

std::string expectation_text(const ExpectationRow& e) {
  std::string where = e.level.empty() ? "" : " " + e.level;
  std::string subject = fmt::format("{} {}{} {}", e.variant, e.benchmark, where, e.metric);
  if (!e.measured) {
    return fmt::format("{}: not measured ({:g} expected)", subject, e.expected);
  }
  return fmt::format("{}: {:.4g} vs {:g} expected ({:+.1f}%, {} {:g}%)", subject, *e.measured, e.expected,
                     e.delta_pct.value_or(0), e.reproduced ? "within" : "outside", e.tolerance_pct);
}

} // namespace specctl::report
