#pragma once

// A variant's status: what result.json's "status" says ("ok", "failed",
// "interrupted"), and what the report says of a variant without a readable
// result ("not run", "damaged"). Spelled here once; everything else compares
// the enum.

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace specctl::report {

enum class VariantStatus { ok, failed, interrupted, not_run, damaged };

std::string_view status_name(VariantStatus status);

// The status a result.json (or a Slurm job's payload) says: failed for one it
// lacks or does not know.
VariantStatus status_of(const nlohmann::json& result);
VariantStatus status_of(const nlohmann::ordered_json& result);

// As JSON: its name (found by nlohmann's adl_serializer).
void to_json(nlohmann::json& j, VariantStatus status);
void to_json(nlohmann::ordered_json& j, VariantStatus status);

} // namespace specctl::report

template <> struct fmt::formatter<specctl::report::VariantStatus> : fmt::formatter<std::string_view> {
  auto format(specctl::report::VariantStatus status, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(specctl::report::status_name(status), ctx);
  }
};
