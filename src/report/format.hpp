#pragma once

// How the report's formats write figures, so a number reads the same in
// Markdown, HTML and JUnit.

#include <specctl/report/report.hpp>

#include <optional>
#include <string>

namespace specctl::report::detail {

// "c10" for a concurrency level, "2/s" for a request rate.
std::string level_label(bool rate, double level);
// "923.2", or "-" when not measured.
std::string fixed(std::optional<double> value, int decimals);
// "1.04×", or "-".
std::string times(std::optional<double> ratio);
// "[1.01, 1.07]", or "-" without an interval.
std::string interval(const std::optional<Ratio>& ratio);
// "c10 (≈3)", "faster at all levels", "never faster", "faster at some levels", "-".
std::string crossover_text(const LevelsTable& table, const Crossover& crossover);
// "passed: 3/3 variants ok, 2/2 expectations reproduced" or "FAILED: ...".
std::string verdict_line(const Report& report);
// "+1.2%", or "-".
std::string percent(std::optional<double> value);

// A CSV field, quoted as RFC 4180 says when it holds a comma, quote or newline.
std::string csv_field(const std::string& value);
// Text for XML content and attributes; control characters XML 1.0 forbids become '?'.
std::string xml_escape(std::string_view text);

} // namespace specctl::report::detail
