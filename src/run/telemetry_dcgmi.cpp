// GPU telemetry through DCGM's `dcgmi dmon`, where a template names dcgmi. What dmon
// prints is DCGM's dcgmi/DeviceMonitor.cpp: a header ("#Entity" and the fields' short
// names, then "ID" and their units) first and again every 14 blocks, then a row per GPU
// and block, "GPU <id>" and the values (doubles with three decimals, integers, "N/A"
// for a blank), flushed after each block; no time column. SIGINT ends it with a line of
// its own; SIGTERM kills it.

#include <specctl/run/telemetry.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <sstream>

namespace specctl::run {

namespace {

// Lines are stamped by bash as they come (dmon flushes a block at once).
constexpr const char* k_stamp_script =
    R"("$@" | while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done)";

std::optional<double> dmon_number(std::string_view word) {
  double value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc{} || end != word.data() + word.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::string dmon_ids() {
  std::vector<std::string> ids;
  for (const auto& field : dcgmi_fields()) {
    ids.push_back(std::to_string(field.id));
  }
  return util::join(ids, ",");
}

std::vector<std::string> dmon_argv(const std::vector<std::string>& command, const std::optional<std::vector<int>>& gpus,
                                   int interval_ms) {
  auto argv = command;
  argv.insert(argv.end(), {"dmon", "-e", dmon_ids()});
  if (interval_ms > 0) {
    argv.insert(argv.end(), {"-d", std::to_string(interval_ms)});
  } else {
    argv.insert(argv.end(), {"-c", "1"});
  }
  if (gpus && !gpus->empty()) {
    std::vector<std::string> ids;
    for (int gpu : *gpus) {
      ids.push_back(std::to_string(gpu));
    }
    argv.insert(argv.end(), {"-i", util::join(ids, ",")});
  }
  return argv;
}

} // namespace

const std::vector<DcgmField>& dcgmi_fields() {
  static const std::vector<DcgmField> fields = {{100, "SMCLK"}, {112, "DVCCTR"}, {113, "SMMAX"}, {150, "TMPTR"},
                                                {155, "POWER"}, {156, "TOTEC"},  {160, "PMLMT"}, {203, "GPUTL"},
                                                {250, "FBTTL"}, {252, "FBUSD"}};
  return fields;
}

std::vector<std::string> dcgmi_sampler_argv(const TelemetryProbe& probe, const std::optional<std::vector<int>>& gpus,
                                            int interval_ms) {
  std::vector<std::string> argv{"bash", "-c", k_stamp_script, "specctl-dcgmi"};
  const auto dmon = dmon_argv(probe.command, gpus, interval_ms);
  argv.insert(argv.end(), dmon.begin(), dmon.end());
  return argv;
}

std::vector<GpuSample> parse_dcgmi_samples(std::string_view text, int* bad_lines) {
  std::vector<GpuSample> samples;
  int bad = 0;
  const auto& fields = dcgmi_fields();
  while (true) {
    auto end = text.find('\n');
    if (end == std::string_view::npos) {
      break;
    }
    const std::string line(text.substr(0, end));
    text.remove_prefix(end + 1);
    std::istringstream words(line);
    std::string stamp, entity;
    words >> stamp >> entity;
    if (entity != "GPU") {
      continue; // a header, a blank line, or dmon's goodbye
    }
    std::vector<std::string> values;
    for (std::string word; words >> word;) {
      values.push_back(word);
    }
    const auto t = dmon_number(stamp);
    const auto index = values.empty() ? std::nullopt : dmon_number(values.front());
    if (!t || !index || *index < 0 || *index >= 4096 || values.size() != fields.size() + 1) {
      ++bad;
      continue;
    }
    GpuSample sample;
    sample.t = *t;
    sample.index = static_cast<int>(*index);
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const auto value = dmon_number(values[i + 1]); // "N/A": no value
      switch (fields[i].id) {
      case 100:
        sample.sm_mhz = value;
        break;
      case 112:
        if (value && *value >= 0) {
          sample.reasons = static_cast<std::uint64_t>(*value);
        }
        break;
      case 113:
        sample.sm_max_mhz = value;
        break;
      case 150:
        sample.temperature_c = value;
        break;
      case 155:
        sample.power_w = value;
        break;
      case 156:
        sample.energy_mj = value;
        break;
      case 160:
        sample.power_limit_w = value;
        break;
      case 203:
        sample.util_pct = value;
        break;
      case 250:
        sample.memory_total_mib = value;
        break;
      case 252:
        sample.memory_used_mib = value;
        break;
      default:
        break;
      }
    }
    samples.push_back(sample);
  }
  if (bad_lines != nullptr) {
    *bad_lines = bad;
  }
  return samples;
}

std::expected<TelemetryProbe, Error> probe_dcgmi(remote::Host& host, const std::vector<std::string>& command,
                                                 const std::optional<std::vector<int>>& gpus) {
  TelemetryProbe probe;
  probe.tool = TelemetryTool::dcgmi;
  probe.command = command;
  auto found = host.exec("command -v " + util::shell_quote(command.front()) +
                         " >/dev/null 2>&1 && "
                         "command -v bash >/dev/null 2>&1");
  if (!found) {
    return std::unexpected(found.error());
  }
  if (found->exit_code != 0) {
    probe.warnings.push_back(
        fmt::format("{}: {} (or bash) not found: GPU telemetry from nvidia-smi", host.describe(), command.front()));
    return probe;
  }
  auto asked = host.exec(util::shell_join(dcgmi_sampler_argv(probe, gpus, 0)));
  if (!asked) {
    return std::unexpected(asked.error());
  }
  auto samples = parse_dcgmi_samples(asked->out);
  if (samples.empty()) {
    // dmon's complaint, e.g. no host engine to connect to.
    std::string said;
    std::istringstream lines(asked->out + asked->err);
    for (std::string line; std::getline(lines, line) && said.empty();) {
      // Our stamp leads the lines dmon printed to stdout; its stderr has none.
      auto space = line.find(' ');
      const bool stamped = space != std::string::npos && dmon_number(std::string_view(line).substr(0, space));
      said = std::string(util::trim_view(stamped ? std::string_view(line).substr(space + 1) : std::string_view(line)));
      if (said.starts_with("#Entity") || said.starts_with("ID")) {
        said.clear();
      }
    }
    probe.warnings.push_back(fmt::format("{}: {} dmon gave no sample{}: GPU telemetry from nvidia-smi", host.describe(),
                                         command.front(), said.empty() ? "" : " (" + util::clip(said, 200) + ")"));
    return probe;
  }
  probe.available = true;
  for (const auto& field : dcgmi_fields()) {
    probe.fields.push_back(field.short_name);
  }
  probe.throttle_field = "DVCCTR";
  probe.energy_counter = samples.front().energy_mj.has_value();
  if (!probe.energy_counter) {
    probe.warnings.push_back(fmt::format(
        "{}: DCGM's energy counter (field 156) has no value here: energy from integrated power", host.describe()));
  }
  return probe;
}

} // namespace specctl::run
