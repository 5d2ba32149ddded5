// junit.xml: a testcase per variant (failed when it did not finish ok) and per
// expectation (failed when not reproduced), for CI.

#include "cells.hpp"

#include <fmt/format.h>

namespace specctl::report {

namespace {

using detail::xml_escape;

// JUnit has no warning: what a CI should still show of a variant that passed (its
// levels throttled by the GPUs, telemetry it could not sample) goes to the
// testcase's <system-err>, which CI servers show beside it. Empty without any.
std::string telemetry_warnings(const VariantRow& v) {
  if (!v.telemetry || (v.telemetry->throttled.empty() && v.telemetry->warnings.empty())) {
    return "";
  }
  std::string text;
  for (const auto& flag : v.telemetry->throttled) {
    text += "warning: " + flag + "\n";
  }
  for (const auto& warning : v.telemetry->warnings) {
    text += "warning: GPU telemetry: " + warning + "\n";
  }
  return "      <system-err>" + xml_escape(text) + "</system-err>\n";
}

} // namespace

std::string to_junit(const Report& r) {
  std::string cases;
  int failures = 0;
  for (const auto& v : r.variants) {
    cases += fmt::format("    <testcase classname=\"{}.variants\" name=\"{}\" time=\"{:.3f}\"",
                         xml_escape(r.experiment), xml_escape(v.name), v.duration_s.value_or(0));
    const std::string warnings = telemetry_warnings(v);
    if (v.status == VariantStatus::ok) {
      cases += warnings.empty() ? "/>\n" : ">\n" + warnings + "    </testcase>\n";
      continue;
    }
    ++failures;
    std::string body = v.reason + (v.log_tail.empty() ? "" : "\n\nLast lines of the server's log:\n" + v.log_tail);
    cases += fmt::format(">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n{}    </testcase>\n",
                         xml_escape(status_name(v.status)), xml_escape(v.reason), xml_escape(body), warnings);
  }
  for (const auto& e : r.expectations) {
    std::string name =
        fmt::format("{} {}{} {}", e.variant, e.benchmark, e.level.empty() ? "" : " " + e.level, e.metric);
    cases += fmt::format("    <testcase classname=\"{}.expectations\" name=\"{}\"", xml_escape(r.experiment),
                         xml_escape(name));
    if (e.reproduced) {
      cases += "/>\n";
      continue;
    }
    ++failures;
    std::string message =
        e.measured
            ? fmt::format("measured {:.4g}, expected {:g} ±{:g}% ({:+.1f}%)", *e.measured, e.expected, e.tolerance_pct,
                          e.delta_pct.value_or(0))
            : fmt::format("not measured (expected {:g} ±{:g}%): {}", e.expected, e.tolerance_pct,
                          r.find_variant(e.variant) != nullptr && r.find_variant(e.variant)->status == VariantStatus::ok
                              ? "the result has no such figure"
                              : fmt::format("the variant's status is \"{}\"", detail::status_text(r, e.variant)));
    cases += fmt::format(">\n      <failure type=\"not reproduced\" message=\"{}\"/>\n    </testcase>\n",
                         xml_escape(message));
  }
  std::size_t tests = r.variants.size() + r.expectations.size();
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"specctl\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", tests, failures);
  out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" "
                     "timestamp=\"{}\">\n",
                     xml_escape(r.experiment), tests, failures, xml_escape(r.started.substr(0, 19)));
  out += fmt::format("    <properties>\n      <property name=\"baseline\" value=\"{}\"/>\n"
                     "      <property name=\"specctl_version\" value=\"{}\"/>\n    </properties>\n",
                     xml_escape(r.baseline), xml_escape(r.specctl_version));
  out += cases;
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

} // namespace specctl::report
