// The query fields, named, united and formatted as nvidia-smi's `--help-query-gpu`
// and its CSV output have them: an alias prints its canonical name in the header
// (`clocks.sm` is `clocks.current.sm [MHz]`), values carry the header's unit unless
// `nounits`, and a field the GPU cannot measure prints `[Not Supported]`.

#include "nvidia_smi_columns.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <ctime>
#include <utility>

namespace specctl::sim {
namespace {

// The clock-event reasons lost their "throttle" name in driver 535 (NVML's
// nvmlClocksThrottleReason* became nvmlClocksEventReason*); later drivers still
// accept the old name and print the new one.
constexpr int k_event_reasons_driver = 535;
constexpr std::string_view k_event_prefix = "clocks_event_reasons.";
constexpr std::string_view k_throttle_prefix = "clocks_throttle_reasons.";

constexpr std::array<std::pair<std::string_view, std::uint64_t>, 8> k_reason_fields{{
    {"gpu_idle", k_reason_gpu_idle},
    {"applications_clocks_setting", k_reason_applications_clocks},
    {"sw_power_cap", k_reason_sw_power_cap},
    {"hw_slowdown", k_reason_hw_slowdown},
    {"sync_boost", k_reason_sync_boost},
    {"sw_thermal_slowdown", k_reason_sw_thermal},
    {"hw_thermal_slowdown", k_reason_hw_thermal},
    {"hw_power_brake_slowdown", k_reason_hw_power_brake},
}};

constexpr std::string_view k_not_supported = "[Not Supported]";

std::string mib(long value, bool units) {
  return units ? fmt::format("{} MiB", value) : fmt::format("{}", value);
}

std::string with_unit(std::string number, std::string_view unit, bool units) {
  return units ? fmt::format("{} {}", number, unit) : number;
}

std::string watts(double value, bool units) {
  return with_unit(fmt::format("{:.2f}", value), "W", units);
}

std::string whole_number(double value, std::string_view unit, bool units) {
  return with_unit(fmt::format("{:.0f}", value), unit, units);
}

// "2026/12/04 12:00:00.123", local time.
std::string smi_timestamp(std::chrono::system_clock::time_point now) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  std::array<char, 32> stamp{};
  std::strftime(stamp.data(), stamp.size(), "%Y/%m/%d %H:%M:%S", &local);
  return fmt::format("{}.{:03d}", stamp.data(), millis);
}

// A column that prints the same whatever the units.
Column<GpuRow> unit_free(std::string header, std::function<std::string(const GpuRow&)> value) {
  return Column<GpuRow>{std::move(header), [value = std::move(value)](const GpuRow& r, bool) { return value(r); }};
}

std::optional<Column<GpuRow>> reason_column(const std::string& field, const GpuConfig& config) {
  const bool renamed = field.starts_with(k_event_prefix);
  if (!renamed && !field.starts_with(k_throttle_prefix)) {
    return std::nullopt;
  }
  const bool current = driver_major(config) >= k_event_reasons_driver;
  if (renamed && !current) {
    return std::nullopt;
  }
  const std::string what = field.substr(renamed ? k_event_prefix.size() : k_throttle_prefix.size());
  const std::string header = std::string(current ? k_event_prefix : k_throttle_prefix) + what;
  if (what == "active") {
    return unit_free(header, [](const GpuRow& r) { return fmt::format("0x{:016x}", r.reading.reasons); });
  }
  if (what == "supported") {
    return unit_free(header, [](const GpuRow&) { return fmt::format("0x{:016x}", k_reasons_supported); });
  }
  for (const auto& [name, bit] : k_reason_fields) {
    if (what == name) {
      return unit_free(header, [bit](const GpuRow& r) {
        return std::string((r.reading.reasons & bit) != 0 ? "Active" : "Not Active");
      });
    }
  }
  return std::nullopt;
}

std::optional<Column<GpuRow>> power_column(const std::string& field, const SmiSnapshot& s) {
  const PowerSpec spec = power_spec(s.config);
  if (field == "timestamp") {
    return unit_free("timestamp", [now = s.now](const GpuRow&) { return smi_timestamp(now); });
  }
  if (field == "power.draw" || field == "power.draw.average") {
    return Column<GpuRow>{field + " [W]", [](const GpuRow& r, bool u) { return watts(r.reading.power_w, u); }};
  }
  if (field == "power.draw.instant") {
    return Column<GpuRow>{field + " [W]", [](const GpuRow& r, bool u) { return watts(r.reading.instant_w, u); }};
  }
  if (field == "power.limit" || field == "enforced.power.limit") {
    return Column<GpuRow>{field + " [W]", [](const GpuRow& r, bool u) { return watts(r.reading.limit_w, u); }};
  }
  if (field == "utilization.gpu") {
    return Column<GpuRow>{"utilization.gpu [%]",
                          [](const GpuRow& r, bool u) { return whole_number(r.reading.util_pct, "%", u); }};
  }
  if (field == "utilization.memory") {
    return Column<GpuRow>{"utilization.memory [%]",
                          [](const GpuRow& r, bool u) { return whole_number(r.reading.memory_util_pct, "%", u); }};
  }
  if (field == "temperature.gpu") {
    return unit_free("temperature.gpu", [](const GpuRow& r) { return fmt::format("{:.0f}", r.reading.temperature_c); });
  }
  if (field == "clocks.sm" || field == "clocks.current.sm" || field == "clocks.gr" ||
      field == "clocks.current.graphics") {
    const bool sm = field.ends_with("sm");
    return Column<GpuRow>{sm ? "clocks.current.sm [MHz]" : "clocks.current.graphics [MHz]",
                          [](const GpuRow& r, bool u) { return whole_number(r.reading.sm_mhz, "MHz", u); }};
  }
  if (field == "clocks.max.sm" || field == "clocks.max.graphics" || field == "clocks.max.gr") {
    return Column<GpuRow>{field == "clocks.max.sm" ? "clocks.max.sm [MHz]" : "clocks.max.graphics [MHz]",
                          [spec](const GpuRow&, bool u) { return whole_number(spec.max_sm_mhz, "MHz", u); }};
  }
  if (field == "total_energy_consumption") {
    return Column<GpuRow>{
        "total_energy_consumption [mJ]", [supported = s.config.energy_counter](const GpuRow& r, bool u) {
          return supported ? whole_number(r.reading.energy_mj, "mJ", u) : std::string(k_not_supported);
        }};
  }
  return reason_column(field, s.config);
}

} // namespace

int driver_major(const GpuConfig& config) {
  int major = 0;
  const auto& text = config.driver_version;
  std::from_chars(text.data(), text.data() + text.size(), major);
  return major;
}

std::optional<Column<GpuRow>> gpu_column(const std::string& field, const SmiSnapshot& s) {
  const auto& c = s.config;
  if (field == "index") {
    return unit_free("index", [](const GpuRow& r) { return std::to_string(r.index); });
  }
  if (field == "uuid" || field == "gpu_uuid") {
    return unit_free("uuid", [&c](const GpuRow& r) { return gpu_uuid(c, r.index); });
  }
  if (field == "name" || field == "gpu_name") {
    return unit_free("name", [&c](const GpuRow&) { return c.name; });
  }
  if (field == "memory.used") {
    return Column<GpuRow>{"memory.used [MiB]", [](const GpuRow& r, bool u) { return mib(r.used_mib, u); }};
  }
  if (field == "memory.total") {
    return Column<GpuRow>{"memory.total [MiB]", [&c](const GpuRow&, bool u) { return mib(c.memory_total_mib, u); }};
  }
  if (field == "memory.free") {
    return Column<GpuRow>{"memory.free [MiB]", [&c](const GpuRow& r, bool u) {
                            return mib(std::max(0L, c.memory_total_mib - r.used_mib), u);
                          }};
  }
  if (field == "count") {
    return unit_free("count", [&c](const GpuRow&) { return std::to_string(c.count); });
  }
  if (field == "driver_version") {
    return unit_free("driver_version", [&c](const GpuRow&) { return c.driver_version; });
  }
  if (field == "pci.bus_id" || field == "gpu_bus_id") {
    return unit_free("pci.bus_id", [](const GpuRow& r) { return gpu_bus_id(r.index); });
  }
  if (field == "pstate") {
    return unit_free("pstate", [](const GpuRow&) { return std::string("P0"); });
  }
  if (field == "serial") {
    return unit_free("serial", [](const GpuRow& r) { return fmt::format("165232400{:04d}", r.index); });
  }
  return power_column(field, s);
}

std::optional<Column<AppRow>> app_column(const std::string& field, const SmiSnapshot& s) {
  const auto& c = s.config;
  if (field == "pid") {
    return Column<AppRow>{"pid", [](const AppRow& r, bool) { return std::to_string(r.app->pid); }};
  }
  if (field == "process_name" || field == "name") {
    return Column<AppRow>{"process_name", [](const AppRow& r, bool) { return r.app->name; }};
  }
  if (field == "used_memory" || field == "used_gpu_memory") {
    return Column<AppRow>{"used_gpu_memory [MiB]", [](const AppRow& r, bool u) { return mib(r.app->used_mib, u); }};
  }
  if (field == "gpu_uuid") {
    return Column<AppRow>{"gpu_uuid", [&c](const AppRow& r, bool) { return gpu_uuid(c, r.app->gpu); }};
  }
  if (field == "gpu_name") {
    return Column<AppRow>{"gpu_name", [&c](const AppRow&, bool) { return c.name; }};
  }
  if (field == "gpu_bus_id") {
    return Column<AppRow>{"gpu_bus_id", [](const AppRow& r, bool) { return gpu_bus_id(r.app->gpu); }};
  }
  if (field == "gpu_serial") {
    return Column<AppRow>{"gpu_serial",
                          [](const AppRow& r, bool) { return fmt::format("165232400{:04d}", r.app->gpu); }};
  }
  return std::nullopt;
}

} // namespace specctl::sim
