// The fake GPUs' power: the model, what a server publishes, what nvidia-smi reads.
//
// DIR/power/ holds:
//   epoch     unix ms the energy counters count from (written by the first reader)
//   PID       one server's record, key=value lines (write_power_record), replaced atomically
//   base      "GPU MJ" lines: the energy above idle of servers gone, per GPU
//   counters  "GPU MJ" lines: the highest total_energy_consumption each GPU reported
//   lock      flock'ed while folding records and updating base and counters

#include <specctl/sim/gpu_power.hpp>

#include <specctl/util/parse.hpp>
#include <specctl/util/text.hpp>
#include <specctl/util/unique_fd.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>

namespace specctl::sim {

namespace fs = std::filesystem;

namespace {

// A record's draw is carried forward at most this long: a server that publishes no
// more (stalled, or killed) is not credited with energy it may not have drawn.
constexpr std::chrono::milliseconds k_max_extrapolation{1000};
// The pass that fills a GPU halfway to its busiest (tokens).
constexpr double k_half_fill_tokens = 48.0;
// The share of the span from idle to the TDP that one token, and the busiest pass, draw.
constexpr double k_fill_one_token = 0.35;
constexpr double k_fill_span = 0.60;
// The lowest draw above idle a capped pass is allowed (W): the clock never reaches zero.
constexpr double k_min_capped_extra_w = 10.0;
// Memory busy per unit of GPU busy while decoding (memory-bound passes); an assumption.
constexpr double k_memory_util_share = 0.6;

fs::path power_dir(const fs::path& gpu_dir) {
  return gpu_dir / "power";
}

// Readers see the old file or the new one. No fsync: the counters are a simulation's.
void replace_file(const fs::path& path, const std::string& content) {
  const fs::path temp = path.parent_path() / fmt::format(".{}.{}.tmp", path.filename().string(), ::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << content;
    if (!out) {
      return;
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
}

std::map<int, double> read_gpu_values(const fs::path& path) {
  std::map<int, double> values;
  std::ifstream in(path);
  int gpu = 0;
  double mj = 0.0;
  while (in >> gpu >> mj) {
    values[gpu] = mj;
  }
  return values;
}

void write_gpu_values(const fs::path& path, const std::map<int, double>& values) {
  std::string text;
  for (const auto& [gpu, mj] : values) {
    text += fmt::format("{} {:.3f}\n", gpu, mj);
  }
  replace_file(path, text);
}

// The folder's epoch: the first reader writes its own instant (so its reading is 0 and
// the next ones count from exactly there), the rest read it. Called under the lock.
std::int64_t epoch_ms(const fs::path& dir, std::int64_t now_ms) {
  const fs::path path = dir / "epoch";
  {
    std::ifstream in(path);
    std::int64_t value = 0;
    if (in >> value) {
      return value;
    }
  }
  replace_file(path, std::to_string(now_ms) + "\n");
  return now_ms;
}

// The folder's lock, held for the object's life.
class FolderLock {
public:
  explicit FolderLock(const fs::path& dir) : m_fd(::open((dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (m_fd) {
      ::flock(m_fd.get(), LOCK_EX);
    }
  }

private:
  util::UniqueFd m_fd;
};

double seconds_between(std::int64_t from_ms, std::int64_t to_ms) {
  return static_cast<double>(std::max<std::int64_t>(0, to_ms - from_ms)) / 1000.0;
}

// A record's energy at `now_ms`: its last figure plus its draw since, for a bounded time.
double energy_at(const PowerRecord& record, std::int64_t now_ms) {
  const double since_s = std::min(seconds_between(record.stamp_unix_ms, now_ms),
                                  std::chrono::duration<double>(k_max_extrapolation).count());
  return record.extra_energy_mj + record.extra_power_w * since_s * 1000.0;
}

bool is_stepping(const PowerRecord& record) {
  return (record.reasons & k_reason_gpu_idle) == 0;
}

} // namespace

PowerSpec power_spec(const GpuConfig& config) {
  PowerSpec spec;
  spec.limit_w = static_cast<double>(config.power_limit_w);
  return spec;
}

double pass_power_w(long tokens, const PowerSpec& spec) {
  const double n = static_cast<double>(std::max(1L, tokens));
  const double fill = k_fill_one_token + k_fill_span * n / (n + k_half_fill_tokens);
  return spec.idle_w + (spec.tdp_w - spec.idle_w) * fill;
}

PassPower limit_pass(double demand_w, double limit_w, const PowerSpec& spec) {
  if (demand_w <= limit_w) {
    return PassPower{.power_w = demand_w, .sm_mhz = spec.max_sm_mhz, .slowdown = 1.0, .capped = false};
  }
  const double allowed = std::max(limit_w - spec.idle_w, k_min_capped_extra_w);
  const double wanted = std::max(demand_w - spec.idle_w, allowed);
  const double clock_share = allowed / wanted;
  return PassPower{.power_w = spec.idle_w + allowed,
                   .sm_mhz = spec.max_sm_mhz * clock_share,
                   .slowdown = 1.0 / clock_share,
                   .capped = true};
}

double gpu_temperature_c(double power_w, const PowerSpec& spec) {
  // 30 C idle, 74 C at 700 W: a well-cooled SXM board (an assumption).
  constexpr double k_idle_c = 30.0;
  constexpr double k_c_per_w = 0.07;
  return k_idle_c + k_c_per_w * std::max(0.0, power_w - spec.idle_w);
}

GpuReading idle_reading(const PowerSpec& spec) {
  return GpuReading{.power_w = spec.idle_w,
                    .instant_w = spec.idle_w,
                    .limit_w = spec.limit_w,
                    .energy_mj = 0.0,
                    .util_pct = 0.0,
                    .memory_util_pct = 0.0,
                    .sm_mhz = spec.idle_sm_mhz,
                    .reasons = k_reason_gpu_idle,
                    .temperature_c = gpu_temperature_c(spec.idle_w, spec)};
}

std::int64_t unix_ms(std::chrono::system_clock::time_point when) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count();
}

void write_power_record(const fs::path& gpu_dir, const PowerRecord& record) {
  const fs::path dir = power_dir(gpu_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::vector<std::string> gpus;
  for (int gpu : record.gpus) {
    gpus.push_back(std::to_string(gpu));
  }
  replace_file(dir / std::to_string(record.pid),
               fmt::format("pid={}\nstart_time={}\nstamp_unix_ms={}\ngpus={}\nextra_energy_mj={:.3f}\n"
                           "extra_power_w={:.3f}\nextra_power_avg_w={:.3f}\nutilization_pct={:.2f}\nsm_mhz={:.1f}\n"
                           "reasons=0x{:016x}\npower_limit_w={:.2f}\n",
                           record.pid, record.start_time, record.stamp_unix_ms, util::join(gpus, ","),
                           record.extra_energy_mj, record.extra_power_w, record.extra_power_avg_w, record.util_pct,
                           record.sm_mhz, record.reasons, record.limit_w));
}

std::optional<PowerRecord> read_power_record(const fs::path& file) {
  std::ifstream in(file);
  std::map<std::string, std::string, std::less<>> values;
  for (std::string line; std::getline(in, line);) {
    const auto equals = line.find('=');
    if (equals != std::string::npos) {
      values[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  const auto get = [&](std::string_view key) -> std::string_view {
    const auto found = values.find(key);
    return found == values.end() ? std::string_view{} : std::string_view(found->second);
  };
  PowerRecord record;
  const auto pid = util::parse_number<pid_t>(get("pid"));
  const auto start = util::parse_number<unsigned long long>(get("start_time"));
  const auto stamp = util::parse_number<std::int64_t>(get("stamp_unix_ms"));
  const auto energy = util::parse_number<double>(get("extra_energy_mj"));
  if (!pid || !start || !stamp || !energy) {
    return std::nullopt;
  }
  record.pid = *pid;
  record.start_time = *start;
  record.stamp_unix_ms = *stamp;
  record.extra_energy_mj = *energy;
  record.extra_power_w = util::parse_number<double>(get("extra_power_w")).value_or(0.0);
  record.extra_power_avg_w = util::parse_number<double>(get("extra_power_avg_w")).value_or(0.0);
  record.util_pct = util::parse_number<double>(get("utilization_pct")).value_or(0.0);
  record.sm_mhz = util::parse_number<double>(get("sm_mhz")).value_or(0.0);
  record.limit_w = util::parse_number<double>(get("power_limit_w")).value_or(0.0);
  auto reasons = get("reasons");
  if (reasons.starts_with("0x")) {
    reasons.remove_prefix(2);
  }
  std::from_chars(reasons.data(), reasons.data() + reasons.size(), record.reasons, 16);
  std::string_view gpus = get("gpus");
  while (!gpus.empty()) {
    const auto comma = std::min(gpus.find(','), gpus.size());
    if (const auto gpu = util::parse_number<int>(gpus.substr(0, comma))) {
      record.gpus.push_back(*gpu);
    }
    gpus.remove_prefix(std::min(comma + 1, gpus.size()));
  }
  return record;
}

void retire_power_record(const fs::path& gpu_dir, const PowerRecord& record) {
  const fs::path dir = power_dir(gpu_dir);
  const FolderLock lock(dir);
  auto base = read_gpu_values(dir / "base");
  for (int gpu : record.gpus) {
    base[gpu] += record.extra_energy_mj;
  }
  write_gpu_values(dir / "base", base);
  std::error_code ec;
  fs::remove(dir / std::to_string(record.pid), ec);
}

std::vector<GpuReading> read_gpu_power(const fs::path& gpu_dir, int gpu_count, const PowerSpec& spec,
                                       std::chrono::system_clock::time_point now, const PowerRecord* own) {
  const fs::path dir = power_dir(gpu_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::int64_t now_ms = unix_ms(now);
  const FolderLock lock(dir);
  const std::int64_t epoch = epoch_ms(dir, now_ms);

  std::vector<PowerRecord> live;
  if (own != nullptr) {
    live.push_back(*own);
  }
  std::map<int, double> folded;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    auto record = read_power_record(it->path());
    if (!record || (own != nullptr && record->pid == own->pid)) {
      continue;
    }
    const auto started = process_start_time(record->pid);
    if (started && *started == record->start_time) {
      live.push_back(std::move(*record));
      continue;
    }
    // Gone without retiring its record (killed): what it drew stays in the counters.
    for (int gpu : record->gpus) {
      folded[gpu] += energy_at(*record, now_ms);
    }
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
  auto base = read_gpu_values(dir / "base");
  if (!folded.empty()) {
    for (const auto& [gpu, mj] : folded) {
      base[gpu] += mj;
    }
    write_gpu_values(dir / "base", base);
  }

  auto counters = read_gpu_values(dir / "counters");
  bool counters_moved = false;
  std::vector<GpuReading> gpus;
  for (int index = 0; index < gpu_count; ++index) {
    GpuReading g = idle_reading(spec);
    g.energy_mj = spec.idle_w * static_cast<double>(std::max<std::int64_t>(0, now_ms - epoch)) + base[index];
    double extra_avg = 0.0;
    double extra_now = 0.0;
    bool held = false;
    bool stepping = false;
    std::uint64_t reasons = 0;
    for (const auto& record : live) {
      if (std::ranges::find(record.gpus, index) == record.gpus.end()) {
        continue;
      }
      held = true;
      g.energy_mj += energy_at(record, now_ms);
      extra_avg += record.extra_power_avg_w;
      extra_now += record.extra_power_w;
      g.util_pct = std::max(g.util_pct, record.util_pct);
      g.sm_mhz = std::max(g.sm_mhz, record.sm_mhz);
      if (record.limit_w > 0.0) {
        g.limit_w = std::min(g.limit_w, record.limit_w);
      }
      if (is_stepping(record)) {
        stepping = true;
        reasons |= record.reasons;
      }
    }
    if (held) {
      g.power_w = spec.idle_w + extra_avg;
      g.instant_w = spec.idle_w + extra_now;
      g.reasons = stepping ? reasons : k_reason_gpu_idle;
      g.memory_util_pct = g.util_pct * k_memory_util_share;
      g.temperature_c = gpu_temperature_c(g.power_w, spec);
    }
    double& counter = counters[index];
    if (g.energy_mj > counter) {
      counter = g.energy_mj;
      counters_moved = true;
    }
    g.energy_mj = counter;
    gpus.push_back(g);
  }
  if (counters_moved) {
    write_gpu_values(dir / "counters", counters);
  }
  return gpus;
}

} // namespace specctl::sim
