#include <specctl/sim/gpu_state.hpp>

#include <specctl/util/hash.hpp>
#include <specctl/util/parse.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <unistd.h>

namespace specctl::sim {
namespace {

// Stores the number `text` spells in `out`; false, leaving `out`, when it spells none.
template <typename T> bool parse_into(std::string_view text, T& out) {
  const auto parsed = util::parse_number<T>(text);
  if (parsed) {
    out = *parsed;
  }
  return parsed.has_value();
}

std::map<std::string, std::string, std::less<>> read_key_values(const std::filesystem::path& file) {
  std::map<std::string, std::string, std::less<>> values;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto equals = line.find('=');
    if (equals == std::string::npos || util::trim_view(line).starts_with('#')) {
      continue;
    }
    values[std::string(util::trim_view(std::string_view(line).substr(0, equals)))] =
        std::string(util::trim_view(std::string_view(line).substr(equals + 1)));
  }
  return values;
}

std::filesystem::path apps_dir(const std::filesystem::path& dir) {
  return dir / "apps";
}

} // namespace

std::expected<GpuConfig, std::string> load_gpu_config(const std::filesystem::path& dir) {
  GpuConfig config;
  const auto file = dir / "config";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    return config;
  }
  for (const auto& [key, value] : read_key_values(file)) {
    bool ok = true;
    if (key == "count") {
      ok = parse_into(value, config.count) && config.count >= 1 && config.count <= 1024;
    } else if (key == "memory_total_mib") {
      ok = parse_into(value, config.memory_total_mib) && config.memory_total_mib > 0;
    } else if (key == "name") {
      config.name = value;
    } else if (key == "driver_version") {
      config.driver_version = value;
    } else if (key == "cuda_version") {
      config.cuda_version = value;
    } else if (key == "uuid_seed") {
      ok = parse_into(value, config.uuid_seed);
    } else if (key == "power_limit_w") {
      ok = parse_into(value, config.power_limit_w) && config.power_limit_w >= 200 && config.power_limit_w <= 2000;
    } else if (key == "energy_counter") {
      ok = value == "0" || value == "1";
      config.energy_counter = value == "1";
    } else {
      return std::unexpected(fmt::format("{}: unknown key \"{}\" (known: count, memory_total_mib, name, "
                                         "driver_version, cuda_version, uuid_seed, power_limit_w, energy_counter)",
                                         file.string(), key));
    }
    if (!ok) {
      return std::unexpected(fmt::format("{}: invalid value \"{}\" for \"{}\"", file.string(), value, key));
    }
  }
  return config;
}

std::string gpu_uuid(const GpuConfig& config, int index) {
  const std::uint64_t high = util::mix64(config.uuid_seed * 1315423911ULL + static_cast<std::uint64_t>(index) * 2 + 1);
  const std::uint64_t low = util::mix64(high ^ static_cast<std::uint64_t>(index));
  return fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", high >> 32, (high >> 16) & 0xffff, high & 0xffff,
                     low >> 48, low & 0xffffffffffffULL);
}

std::string gpu_bus_id(int index) {
  constexpr std::array<int, 8> k_buses{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
  const int bus = index < static_cast<int>(k_buses.size()) ? k_buses[static_cast<std::size_t>(index)] : 0xe0 + index;
  return fmt::format("00000000:{:02X}:00.0", bus);
}

std::filesystem::path resolve_gpu_dir(std::string_view flag_value) {
  if (!flag_value.empty()) {
    return std::filesystem::path(flag_value);
  }
  if (const char* env = std::getenv("SPECSIM_GPU_DIR"); env != nullptr && *env != '\0') {
    return std::filesystem::path(env);
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  return base / fmt::format("specsim-gpus-{}", ::getuid());
}

std::optional<unsigned long long> process_start_time(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) {
    return std::nullopt;
  }
  // The command name may hold spaces and parentheses; fields resume after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(stat.substr(close + 2));
  std::string state;
  fields >> state;
  if (state == "Z" || state == "X") {
    return std::nullopt;
  }
  std::string skip;
  // Fields 4..21 come between the state (field 3) and starttime (field 22).
  for (int field = 4; field <= 21; ++field) {
    fields >> skip;
  }
  unsigned long long start = 0;
  if (!(fields >> start)) {
    return std::nullopt;
  }
  return start;
}

std::expected<void, std::string> write_app_entry(const std::filesystem::path& dir, const AppEntry& entry) {
  std::error_code ec;
  std::filesystem::create_directories(apps_dir(dir), ec);
  if (ec) {
    return std::unexpected(fmt::format("cannot create {}: {}", apps_dir(dir).string(), ec.message()));
  }
  const auto final_path = apps_dir(dir) / std::to_string(entry.pid);
  const auto temp_path = apps_dir(dir) / fmt::format(".{}.tmp", entry.pid);
  {
    std::ofstream out(temp_path, std::ios::trunc);
    out << "pid=" << entry.pid << "\nname=" << entry.name << "\ngpu=" << entry.gpu << "\nused_mib=" << entry.used_mib
        << "\nstart_time=" << entry.start_time << "\n";
    if (!out) {
      return std::unexpected(fmt::format("cannot write {}", temp_path.string()));
    }
  }
  // Readers see the old entry or the new one, never half of one.
  std::filesystem::rename(temp_path, final_path, ec);
  if (ec) {
    return std::unexpected(fmt::format("cannot rename {}: {}", temp_path.string(), ec.message()));
  }
  return {};
}

void remove_app_entry(const std::filesystem::path& dir, pid_t pid) {
  std::error_code ec;
  std::filesystem::remove(apps_dir(dir) / std::to_string(pid), ec);
}

std::vector<AppEntry> live_app_entries(const std::filesystem::path& dir) {
  std::vector<AppEntry> entries;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(apps_dir(dir), ec), end; !ec && it != end; it.increment(ec)) {
    const auto file_name = it->path().filename().string();
    if (file_name.starts_with('.')) {
      continue;
    }
    const auto values = read_key_values(it->path());
    AppEntry entry;
    const auto get = [&](std::string_view key) -> std::string_view {
      const auto found = values.find(key);
      return found == values.end() ? std::string_view{} : std::string_view(found->second);
    };
    if (!parse_into(get("pid"), entry.pid) || !parse_into(get("gpu"), entry.gpu) ||
        !parse_into(get("used_mib"), entry.used_mib) || !parse_into(get("start_time"), entry.start_time)) {
      continue;
    }
    entry.name = std::string(get("name"));
    const auto start = process_start_time(entry.pid);
    if (!start || *start != entry.start_time) {
      continue;
    }
    entries.push_back(std::move(entry));
  }
  std::ranges::sort(
      entries, [](const AppEntry& a, const AppEntry& b) { return a.gpu != b.gpu ? a.gpu < b.gpu : a.pid < b.pid; });
  return entries;
}

} // namespace specctl::sim
