#include <specctl/util/size.hpp>

#include <charconv>
#include <fmt/format.h>

namespace specctl::util {

std::expected<std::uint64_t, std::string> parse_size_mib(std::string_view text) {
  auto error = [&] {
    return std::unexpected(
        fmt::format("invalid size \"{}\" (write it like 1024MiB or 1GiB; MB and GB are ambiguous)", text));
  };
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) {
    return error();
  }
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  constexpr std::uint64_t k_limit = std::uint64_t{1} << 40;
  if (value > k_limit) {
    return error();
  }
  if (unit == "MiB") {
    return value;
  }
  if (unit == "GiB") {
    return value * 1024;
  }
  if (unit == "TiB") {
    return value * 1024 * 1024;
  }
  if (unit == "KiB" && value % 1024 == 0) {
    return value / 1024;
  }
  return error();
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024) {
    return fmt::format("{} B", bytes);
  }
  constexpr const char* k_units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(k_units)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, k_units[unit]);
}

} // namespace specctl::util
