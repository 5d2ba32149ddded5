#pragma once

#include <algorithm>
#include <chrono>
#include <expected>
#include <string>
#include <string_view>

namespace specctl::util {

using Duration = std::chrono::milliseconds;

// Parses "90s", "15m", "1h", "1h30m", "250ms", "1.5s" or bare seconds ("90").
// The error is a sentence fit to follow a location, e.g. `invalid duration "15 minutes" ...`.
std::expected<Duration, std::string> parse_duration(std::string_view text);

// Formats for people: "250ms", "45s", "15m", "1h 5m", "2h 10m 5s".
std::string format_duration(Duration d);

// The timeout for one poll(2) that waits until `deadline` on the steady clock: the
// milliseconds left, rounded up (never a 0 that spins before it), at most a minute.
inline int poll_timeout_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

// Seconds from `start` to now, on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace specctl::util
