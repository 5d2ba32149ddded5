#pragma once

// Reading one field of a result's JSON: the report's files all need these, and a
// unity build compiles several of them as one source.

#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <string>

namespace specctl::report::detail {

// A finite number, else nothing (a missing field, null, or a string).
inline std::optional<double> json_number(const nlohmann::json& value) {
  if (value.is_number() && std::isfinite(value.get<double>())) {
    return value.get<double>();
  }
  return std::nullopt;
}

// A string, else `fallback`.
inline std::string json_text(const nlohmann::json& value, std::string fallback = {}) {
  return value.is_string() ? value.get<std::string>() : fallback;
}

} // namespace specctl::report::detail
