#include <specctl/util/duration.hpp>
#include <specctl/util/parse.hpp>

#include <cmath>
#include <fmt/format.h>

namespace specctl::util {

namespace {

constexpr double k_max_duration_ms = 30.0 * 86'400'000;

std::string duration_error(std::string_view text) {
  return fmt::format("invalid duration \"{}\" (write it like 90s, 15m, 1h30m or 500ms)", text);
}

} // namespace

std::expected<Duration, std::string> parse_duration(std::string_view text) {
  if (text.empty()) {
    return std::unexpected(duration_error(text));
  }
  double total_ms = 0;
  std::size_t pos = 0;
  bool any = false;
  while (pos < text.size()) {
    std::size_t start = pos;
    while (pos < text.size() && ((text[pos] >= '0' && text[pos] <= '9') || text[pos] == '.')) {
      ++pos;
    }
    if (pos == start) {
      return std::unexpected(duration_error(text));
    }
    std::string number(text.substr(start, pos - start));
    if (number.find('.') != number.rfind('.') || number == ".") {
      return std::unexpected(duration_error(text));
    }
    const auto parsed = parse_number<double>(number);
    if (!parsed) {
      return std::unexpected(duration_error(text));
    }
    const double value = *parsed;
    std::size_t unit_start = pos;
    while (pos < text.size() && text[pos] >= 'a' && text[pos] <= 'z') {
      ++pos;
    }
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    double factor = 0;
    if (unit.empty()) {
      // Bare seconds only as the whole value: "90", not "1m30".
      if (any || pos != text.size()) {
        return std::unexpected(duration_error(text));
      }
      factor = 1000;
    } else if (unit == "ms") {
      factor = 1;
    } else if (unit == "s") {
      factor = 1000;
    } else if (unit == "m") {
      factor = 60'000;
    } else if (unit == "h") {
      factor = 3'600'000;
    } else if (unit == "d") {
      factor = 86'400'000;
    } else {
      return std::unexpected(duration_error(text));
    }
    total_ms += value * factor;
    any = true;
  }
  if (!std::isfinite(total_ms)) {
    return std::unexpected(duration_error(text));
  }
  // A deadline of steady_clock::now() + the duration must not wrap around, and no wait of
  // specctl's is meant to outlast a month: past that it is a typo (3000000h for 300h?).
  if (total_ms > k_max_duration_ms) {
    return std::unexpected(fmt::format("duration \"{}\" is longer than 30 days, the longest specctl accepts", text));
  }
  return Duration(static_cast<Duration::rep>(std::llround(total_ms)));
}

std::string format_duration(Duration d) {
  auto ms = d.count();
  if (ms < 0) {
    return "-" + format_duration(Duration(-ms));
  }
  if (ms < 1000) {
    return fmt::format("{}ms", ms);
  }
  if (ms < 60'000 && ms % 1000 != 0) {
    return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000.0);
  }
  auto s = ms / 1000;
  auto h = s / 3600;
  auto m = (s % 3600) / 60;
  auto sec = s % 60;
  std::string out;
  if (h > 0) {
    out += fmt::format("{}h", h);
  }
  if (m > 0) {
    out += fmt::format("{}{}m", out.empty() ? "" : " ", m);
  }
  if (sec > 0 || out.empty()) {
    out += fmt::format("{}{}s", out.empty() ? "" : " ", sec);
  }
  return out;
}

} // namespace specctl::util
