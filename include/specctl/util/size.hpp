#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace specctl::util {

// Parses a memory size such as "1024MiB", "1GiB", "512KiB" or "2TiB" into MiB.
// Decimal units (MB, GB) are refused: nvidia-smi reports MiB and a silent 5% error hides a leak.
std::expected<std::uint64_t, std::string> parse_size_mib(std::string_view text);

// "812 B", "12.3 KiB", "1.4 MiB", "2.0 GiB".
std::string format_bytes(std::uint64_t bytes);

} // namespace specctl::util
