// GPU telemetry: what the host's nvidia-smi can sample, the sampler's process,
// and the figures of a window. The field names, their units and the [N/A]
// answers are nvidia-smi's (`nvidia-smi --help-query-gpu`); the throttle bits
// are NVML's nvmlClocksEventReason* constants.

#include <specctl/remote/host_ops.hpp>
#include <specctl/run/telemetry.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <map>

namespace specctl::run {

using ordered = nlohmann::ordered_json;

namespace {

// Bytes of one window's samples read back at most: at 500 ms, 8 GPUs and about 150
// bytes a row, an hour of samples.
constexpr std::size_t k_max_sample_bytes = 16u << 20;

std::optional<double> number(std::string_view cell) {
  cell = util::trim_view(cell);
  double value = 0;
  auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  if (ec != std::errc{} || end != cell.data() + cell.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::uint64_t> hex_mask(std::string_view cell) {
  cell = util::trim_view(cell);
  if (cell.starts_with("0x") || cell.starts_with("0X")) {
    cell.remove_prefix(2);
  } else {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value, 16);
  if (ec != std::errc{} || end != cell.data() + cell.size() || cell.empty()) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::string_view> cells_of(std::string_view line) {
  std::vector<std::string_view> cells;
  std::size_t start = 0;
  while (true) {
    auto comma = line.find(',', start);
    cells.push_back(util::trim_view(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
    if (comma == std::string_view::npos) {
      return cells;
    }
    start = comma + 1;
  }
}

std::string gpu_list(const std::vector<int>& gpus) {
  std::vector<std::string> words;
  for (int gpu : gpus) {
    words.push_back(std::to_string(gpu));
  }
  return util::join(words, ",");
}

// Samples in blocks: one instant of every GPU (nvidia-smi prints each GPU once per interval).
std::vector<std::vector<const GpuSample*>> blocks_of(const std::vector<GpuSample>& samples) {
  std::vector<std::vector<const GpuSample*>> blocks;
  for (const auto& s : samples) {
    if (blocks.empty() || std::any_of(blocks.back().begin(), blocks.back().end(),
                                      [&](const GpuSample* other) { return other->index == s.index; })) {
      blocks.emplace_back();
    }
    blocks.back().push_back(&s);
  }
  return blocks;
}

std::string cell(const std::optional<double>& value) {
  return value ? fmt::format("{}", *value) : "";
}

} // namespace

std::vector<std::string> telemetry_fields_wanted() {
  return {"index",        "timestamp",       "power.draw", "power.limit",   "utilization.gpu", "memory.used",
          "memory.total", "temperature.gpu", "clocks.sm",  "clocks.max.sm", k_energy_field,    k_event_reasons_field};
}

const std::vector<ThrottleReason>& throttle_reasons() {
  static const std::vector<ThrottleReason> reasons = {{"sw_power_cap", 0x4},
                                                      {"hw_slowdown", 0x8},
                                                      {"sw_thermal", 0x20},
                                                      {"hw_thermal", 0x40},
                                                      {"hw_power_brake", 0x80}};
  return reasons;
}

std::optional<std::string> rejected_field(std::string_view err) {
  static constexpr std::string_view k_before = "Field \"";
  static constexpr std::string_view k_after = "\" is not a valid field to query";
  auto at = err.find(k_before);
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  at += k_before.size();
  auto end = err.find(k_after, at);
  if (end == std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(err.substr(at, end - at));
}

std::expected<TelemetryProbe, Error> probe_telemetry(remote::Host& host, const std::vector<std::string>& command,
                                                     const std::optional<std::vector<int>>& gpus) {
  TelemetryProbe probe;
  probe.command = command;
  if (command.empty()) {
    probe.warnings.push_back("the template has no telemetry command: no GPU telemetry");
    return probe;
  }
  auto found = host.exec("command -v " + util::shell_quote(command.front()) + " >/dev/null 2>&1");
  if (!found) {
    return std::unexpected(found.error());
  }
  if (found->exit_code != 0) {
    probe.warnings.push_back(fmt::format("{}: {} not found: no GPU telemetry", host.describe(), command.front()));
    return probe;
  }
  probe.fields = telemetry_fields_wanted();
  bool tried_old_name = false;
  // Each round drops the field the driver rejected; bounded by the fields there are.
  for (std::size_t round = 0; round <= telemetry_fields_wanted().size(); ++round) {
    auto argv = command;
    argv.push_back("--query-gpu=" + util::join(probe.fields, ","));
    argv.push_back("--format=csv,noheader,nounits");
    if (gpus && !gpus->empty()) {
      argv.push_back("-i");
      argv.push_back(std::to_string(gpus->front()));
    }
    auto asked = host.exec(util::shell_join(argv));
    if (!asked) {
      return std::unexpected(asked.error());
    }
    if (asked->exit_code == 0) {
      auto samples = parse_samples(asked->out, probe.fields);
      probe.available = true;
      for (const auto& field : probe.fields) {
        if (field == k_event_reasons_field || field == k_throttle_reasons_field) {
          probe.throttle_field = field;
        }
      }
      bool has_energy = std::ranges::find(probe.fields, k_energy_field) != probe.fields.end();
      probe.energy_counter = has_energy && !samples.empty() && samples.front().energy_mj.has_value();
      if (has_energy && !probe.energy_counter) {
        probe.warnings.push_back(
            fmt::format("{}: {} has no value here (a GPU older than Volta?): energy from integrated power.draw",
                        host.describe(), k_energy_field));
      }
      return probe;
    }
    auto rejected = rejected_field(asked->out + asked->err);
    auto it = rejected ? std::ranges::find(probe.fields, *rejected) : probe.fields.end();
    if (it == probe.fields.end() || *it == "index" || *it == "timestamp") {
      // nvidia-smi's own sentence ends with a stop; ours follows it after a semicolon.
      auto said = util::first_line(asked->err.empty() ? asked->out : asked->err);
      if (!said.empty() && said.back() == '.') {
        said.pop_back();
      }
      probe.warnings.push_back(fmt::format("{}: {} failed (exit code {}): {}; no GPU telemetry", host.describe(),
                                           command.front(), asked->exit_code, util::clip(said, 200)));
      probe.fields.clear();
      return probe;
    }
    if (*it == k_event_reasons_field && !tried_old_name) {
      // An older driver: the same reasons under their earlier name.
      *it = k_throttle_reasons_field;
      tried_old_name = true;
      continue;
    }
    probe.warnings.push_back(
        fmt::format("{}: {} rejects the field {}: not sampled", host.describe(), command.front(), *it));
    probe.fields.erase(it);
  }
  probe.fields.clear();
  return probe;
}

std::vector<std::string> sampler_argv(const TelemetryProbe& probe, const std::optional<std::vector<int>>& gpus,
                                      int interval_ms) {
  if (probe.tool == TelemetryTool::dcgmi) {
    return dcgmi_sampler_argv(probe, gpus, interval_ms);
  }
  auto argv = probe.command;
  argv.push_back("--query-gpu=" + util::join(probe.fields, ","));
  argv.push_back("--format=csv,noheader,nounits");
  if (interval_ms > 0) {
    argv.push_back("-lms");
    argv.push_back(std::to_string(interval_ms));
  }
  if (gpus && !gpus->empty()) {
    argv.push_back("-i");
    argv.push_back(gpu_list(*gpus));
  }
  return argv;
}

std::optional<double> parse_smi_timestamp(std::string_view text) {
  // YYYY/MM/DD HH:MM:SS.mmm
  text = util::trim_view(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double s = 0;
  auto take = [&text](char sep, int& out) {
    auto end = text.find(sep);
    if (end == std::string_view::npos) {
      return false;
    }
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, out);
    if (ec != std::errc{} || ptr != text.data() + end) {
      return false;
    }
    text.remove_prefix(end + 1);
    return true;
  };
  if (!take('/', y) || !take('/', mo) || !take(' ', d) || !take(':', h) || !take(':', mi)) {
    return std::nullopt;
  }
  auto seconds = number(text);
  if (!seconds || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59) {
    return std::nullopt;
  }
  s = *seconds;
  // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
  const int yy = y - (mo <= 2 ? 1 : 0);
  const int era = (yy >= 0 ? yy : yy - 399) / 400;
  const int yoe = yy - era * 400;
  const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const long days = static_cast<long>(era) * 146097 + doe - 719468;
  return static_cast<double>(days) * 86400.0 + h * 3600.0 + mi * 60.0 + s;
}

std::vector<GpuSample> parse_samples(std::string_view csv, const std::vector<std::string>& fields, int* bad_lines) {
  std::vector<GpuSample> samples;
  int bad = 0;
  while (true) {
    auto end = csv.find('\n');
    if (end == std::string_view::npos) {
      break;
    }
    auto line = util::trim_view(csv.substr(0, end));
    csv.remove_prefix(end + 1);
    if (line.empty()) {
      continue;
    }
    auto cells = cells_of(line);
    if (cells.size() != fields.size()) {
      ++bad;
      continue;
    }
    GpuSample sample;
    bool has_index = false;
    bool has_time = false;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const auto& field = fields[i];
      const auto value = number(cells[i]);
      if (field == "index") {
        has_index = value && *value >= 0 && *value < 4096;
        sample.index = has_index ? static_cast<int>(*value) : 0;
      } else if (field == "timestamp") {
        auto t = parse_smi_timestamp(cells[i]);
        has_time = t.has_value();
        sample.t = t.value_or(0);
      } else if (field == "power.draw") {
        sample.power_w = value;
      } else if (field == "power.limit") {
        sample.power_limit_w = value;
      } else if (field == "utilization.gpu") {
        sample.util_pct = value;
      } else if (field == "memory.used") {
        sample.memory_used_mib = value;
      } else if (field == "memory.total") {
        sample.memory_total_mib = value;
      } else if (field == "temperature.gpu") {
        sample.temperature_c = value;
      } else if (field == "clocks.sm") {
        sample.sm_mhz = value;
      } else if (field == "clocks.max.sm") {
        sample.sm_max_mhz = value;
      } else if (field == k_energy_field) {
        sample.energy_mj = value;
      } else if (field == k_event_reasons_field || field == k_throttle_reasons_field) {
        sample.reasons = hex_mask(cells[i]);
      }
    }
    if (!has_index || !has_time) {
      ++bad;
      continue;
    }
    samples.push_back(sample);
  }
  if (bad_lines != nullptr) {
    *bad_lines = bad;
  }
  return samples;
}

ordered level_telemetry(const std::vector<GpuSample>& samples, double seconds, std::int64_t output_tokens) {
  if (samples.empty()) {
    return nullptr;
  }
  const auto blocks = blocks_of(samples);
  const double span = blocks.back().front()->t - blocks.front().front()->t;
  if (!(seconds > 0)) {
    seconds = span;
  }
  std::map<int, std::vector<const GpuSample*>> by_gpu;
  for (const auto& s : samples) {
    by_gpu[s.index].push_back(&s);
  }
  ordered per_gpu = ordered::array();
  std::vector<int> gpus;
  double power_mean = 0;
  double power_limit = 0;
  bool all_counter = true;
  bool any_power = false;
  for (const auto& [index, rows] : by_gpu) {
    gpus.push_back(index);
    double sum = 0, peak = 0, util = 0, clock_share = 0, memory = 0;
    int powers = 0, utils = 0, clocks = 0;
    for (const auto* r : rows) {
      if (r->power_w) {
        sum += *r->power_w;
        peak = std::max(peak, *r->power_w);
        ++powers;
      }
      if (r->util_pct) {
        util += *r->util_pct;
        ++utils;
      }
      if (r->sm_mhz && r->sm_max_mhz && *r->sm_max_mhz > 0) {
        clock_share += *r->sm_mhz / *r->sm_max_mhz;
        ++clocks;
      }
      memory = std::max(memory, r->memory_used_mib.value_or(0));
    }
    if (rows.back()->power_limit_w) {
      power_limit += *rows.back()->power_limit_w;
    }
    // The counter's difference over the samples' span is the mean power exactly;
    // without it, the mean of the instantaneous readings.
    std::optional<double> mean;
    const auto* first = rows.front();
    const auto* last = rows.back();
    if (first->energy_mj && last->energy_mj && last->t > first->t && *last->energy_mj >= *first->energy_mj) {
      mean = (*last->energy_mj - *first->energy_mj) / 1000.0 / (last->t - first->t);
    } else {
      all_counter = false;
      if (powers > 0) {
        mean = sum / powers;
      }
    }
    any_power = any_power || mean.has_value();
    power_mean += mean.value_or(0);
    ordered gpu;
    gpu["index"] = index;
    gpu["power_mean_w"] = mean ? ordered(*mean) : ordered(nullptr);
    gpu["power_peak_w"] = powers > 0 ? ordered(peak) : ordered(nullptr);
    gpu["memory_peak_mib"] = memory;
    gpu["util_mean_pct"] = utils > 0 ? ordered(util / utils) : ordered(nullptr);
    gpu["sm_clock_share"] = clocks > 0 ? ordered(clock_share / clocks) : ordered(nullptr);
    per_gpu.push_back(std::move(gpu));
  }

  double peak_sum = 0;
  std::map<std::string, int> throttled_blocks;
  bool any_reasons = false;
  for (const auto& block : blocks) {
    double sum = 0;
    std::uint64_t reasons = 0;
    for (const auto* s : block) {
      sum += s->power_w.value_or(0);
      if (s->reasons) {
        any_reasons = true;
        reasons |= *s->reasons;
      }
    }
    peak_sum = std::max(peak_sum, sum);
    for (const auto& reason : throttle_reasons()) {
      if ((reasons & reason.bit) != 0) {
        ++throttled_blocks[reason.name];
      }
    }
  }
  double util = 0, clock_share = 0, memory_peak = 0, memory_total = 0;
  int utils = 0, clocks = 0;
  for (const auto& s : samples) {
    if (s.util_pct) {
      util += *s.util_pct;
      ++utils;
    }
    if (s.sm_mhz && s.sm_max_mhz && *s.sm_max_mhz > 0) {
      clock_share += *s.sm_mhz / *s.sm_max_mhz;
      ++clocks;
    }
    if (s.memory_used_mib && *s.memory_used_mib >= memory_peak) {
      memory_peak = *s.memory_used_mib;
      memory_total = s.memory_total_mib.value_or(memory_total);
    }
  }

  ordered out;
  out["gpus"] = gpus;
  out["samples"] = blocks.size();
  out["span_s"] = span;
  out["seconds"] = seconds;
  if (any_power) {
    const double energy = power_mean * seconds;
    out["energy_j"] = energy;
    out["energy_source"] = all_counter ? "counter" : "integrated power";
    out["tok_per_j"] =
        energy > 0 && output_tokens > 0 ? ordered(static_cast<double>(output_tokens) / energy) : ordered(nullptr);
    out["j_per_tok"] = output_tokens > 0 ? ordered(energy / static_cast<double>(output_tokens)) : ordered(nullptr);
    out["power_w"] = {
        {"mean", power_mean}, {"peak", peak_sum}, {"limit", power_limit > 0 ? ordered(power_limit) : ordered(nullptr)}};
  }
  out["per_gpu"] = std::move(per_gpu);
  out["util_mean_pct"] = utils > 0 ? ordered(util / utils) : ordered(nullptr);
  out["memory_peak_mib"] = memory_peak;
  out["memory_total_mib"] = memory_total > 0 ? ordered(memory_total) : ordered(nullptr);
  out["sm_clock_share"] = clocks > 0 ? ordered(clock_share / clocks) : ordered(nullptr);
  if (any_reasons) {
    ordered throttle = ordered::object();
    ordered flagged = ordered::array();
    for (const auto& reason : throttle_reasons()) {
      const double share = static_cast<double>(throttled_blocks[reason.name]) / static_cast<double>(blocks.size());
      throttle[reason.name] = share;
      if (share > k_throttle_flag_share) {
        flagged.push_back(reason.name);
      }
    }
    out["throttle"] = std::move(throttle);
    out["throttled"] = std::move(flagged);
  }
  return out;
}

ordered load_telemetry(const std::vector<GpuSample>& samples) {
  std::map<int, double> peak;
  double total = 0;
  for (const auto& s : samples) {
    auto& p = peak[s.index];
    p = std::max(p, s.memory_used_mib.value_or(0));
    total = std::max(total, s.memory_total_mib.value_or(0));
  }
  ordered gpus = ordered::array();
  ordered memory = ordered::array();
  for (const auto& [index, value] : peak) {
    gpus.push_back(index);
    memory.push_back(value);
  }
  return {{"samples", blocks_of(samples).size()},
          {"gpus", std::move(gpus)},
          {"memory_peak_mib", std::move(memory)},
          {"memory_total_mib", total > 0 ? ordered(total) : ordered(nullptr)}};
}

std::string telemetry_csv_rows(const std::vector<GpuSample>& samples, std::string_view benchmark,
                               std::string_view level, int repeat, double t0) {
  std::string out;
  for (const auto& s : samples) {
    out += fmt::format("{},{},{},{:.3f},{},{},{},{},{},{},{},{},{},{},{}\n", benchmark, level, repeat, s.t - t0,
                       s.index, cell(s.power_w), cell(s.power_limit_w), cell(s.util_pct), cell(s.memory_used_mib),
                       cell(s.memory_total_mib), cell(s.temperature_c), cell(s.sm_mhz), cell(s.sm_max_mhz),
                       cell(s.energy_mj), s.reasons ? fmt::format("0x{:016x}", *s.reasons) : "");
  }
  return out;
}

std::expected<void, Error> TelemetrySampler::start(remote::Host& host, int interval_ms) {
  if (m_pid > 0) {
    return {};
  }
  auto pid = remote::start_detached(host, {sampler_argv(m_probe, m_gpus, interval_ms), {}, m_dir, m_tag});
  if (!pid) {
    return std::unexpected(pid.error());
  }
  m_pid = *pid;
  return {};
}

std::expected<std::vector<GpuSample>, Error> TelemetrySampler::stop(remote::Host& host, bool last_sample) {
  if (m_pid <= 0) {
    return std::vector<GpuSample>{};
  }
  const int pid = m_pid;
  m_pid = 0;
  remote::RunFiles files{m_dir};
  // One round trip: TERM to the sampler's group while its leader still carries our
  // tag (a pid is never signalled once it may be someone else's), a bounded wait for
  // it to go, KILL if it did not, then the bytes it wrote since it started.
  const std::string needle = std::string(remote::k_tag_variable) + "=" + m_tag;
  std::string line =
      fmt::format("if tr '\\0' '\\n' < /proc/{pid}/environ 2>/dev/null | grep -qxF {needle}; then "
                  "kill -TERM -{pid} 2>/dev/null; kill -TERM {pid} 2>/dev/null; i=0; "
                  "while [ $i -lt 50 ]; do s=$(ps -o stat= -p {pid} 2>/dev/null) || break; "
                  "case \"$s\" in *Z*) break;; esac; sleep 0.1; i=$((i+1)); done; "
                  "if [ $i -ge 50 ]; then kill -KILL -{pid} 2>/dev/null; fi; fi; "
                  "{last}tail -c +{from} {log} 2>/dev/null | head -c {max}",
                  fmt::arg("pid", pid), fmt::arg("needle", util::shell_quote(needle)), fmt::arg("from", m_offset + 1),
                  fmt::arg("log", util::shell_quote(files.log())), fmt::arg("max", k_max_sample_bytes),
                  fmt::arg("last", last_sample ? fmt::format("{} >> {} 2>/dev/null; ",
                                                             util::shell_join(sampler_argv(m_probe, m_gpus, 0)),
                                                             util::shell_quote(files.log()))
                                               : std::string()));
  auto result = host.exec(line);
  if (!result) {
    return std::unexpected(result.error());
  }
  // Only whole lines are consumed; the rest is read with the next window.
  const auto& out = result->out;
  const auto end = out.rfind('\n');
  const std::size_t used = end == std::string::npos ? 0 : end + 1;
  m_offset += used;
  const std::string_view whole = std::string_view(out).substr(0, used);
  return m_probe.tool == TelemetryTool::dcgmi ? parse_dcgmi_samples(whole) : parse_samples(whole, m_probe.fields);
}

} // namespace specctl::run
