#pragma once

// GPU telemetry during a benchmark: one long-running `nvidia-smi --query-gpu=...
// -lms 500` per window on the variant's GPUs, started on the host, stopped with
// the window, and turned into figures per level (energy from the counter's
// difference, tokens per joule, power, utilisation, memory, clocks, throttling).
// docs/run.md "GPU telemetry" says what each figure is and where it comes from.

#include <specctl/remote/host.hpp>

#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::run {

// The fields sampled, in the query's order; `index` and `timestamp` always lead.
// The clock-event reasons go by their current name (driver 535 on) or the older
// `clocks_throttle_reasons.active`, whichever the driver accepts.
inline constexpr const char* k_event_reasons_field = "clocks_event_reasons.active";
inline constexpr const char* k_throttle_reasons_field = "clocks_throttle_reasons.active";
inline constexpr const char* k_energy_field = "total_energy_consumption";
std::vector<std::string> telemetry_fields_wanted();

// A level is flagged when a throttle reason held for more than this share of it.
inline constexpr double k_throttle_flag_share = 0.05;

// The program that samples: nvidia-smi, or DCGM's `dcgmi dmon` where the template
// names one (`dcgmi_command`) and it answers.
enum class TelemetryTool { nvidia_smi, dcgmi };

// What nvidia-smi (or dcgmi) on a host can sample, found by asking it once.
struct TelemetryProbe {
  bool available = false;
  // The command that answers as nvidia-smi (the template's `telemetry_command`).
  std::vector<std::string> command;
  std::vector<std::string> fields;
  std::optional<std::string> throttle_field;
  // The energy counter answers with a number (Volta and later).
  bool energy_counter = false;
  // What could not be sampled, in words.
  std::vector<std::string> warnings;
  TelemetryTool tool = TelemetryTool::nvidia_smi;
};

// nvidia-smi's complaint about a field: `Field "x" is not a valid field to query.` -> "x".
std::optional<std::string> rejected_field(std::string_view err);

// Asks the host which of telemetry_fields_wanted() its nvidia-smi accepts (dropping
// each field it rejects, and trying the older name of the clock-event reasons),
// and whether the energy counter has a value. Never an error for a missing or old
// nvidia-smi: that is a probe with warnings. An error only when the host cannot be reached.
std::expected<TelemetryProbe, Error> probe_telemetry(remote::Host& host, const std::vector<std::string>& command,
                                                     const std::optional<std::vector<int>>& gpus);

// The sampler's words: COMMAND --query-gpu=FIELDS --format=csv,noheader,nounits -lms MS [-i GPUS];
// without -lms (one reading) when `interval_ms` is 0. For dcgmi: bash stamping each
// line of `COMMAND dmon -e IDS -d MS [-i GPUS]` (or `-c 1`) with $EPOCHREALTIME.
std::vector<std::string> sampler_argv(const TelemetryProbe& probe, const std::optional<std::vector<int>>& gpus,
                                      int interval_ms);

// One GPU at one instant; a field not sampled or answered [N/A] is nullopt.
struct GpuSample {
  int index = 0;
  // Seconds on the host's clock (only differences mean anything).
  double t = 0;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  std::optional<double> util_pct;
  std::optional<double> memory_used_mib;
  std::optional<double> memory_total_mib;
  std::optional<double> temperature_c;
  std::optional<double> sm_mhz;
  std::optional<double> sm_max_mhz;
  std::optional<double> energy_mj;
  std::optional<std::uint64_t> reasons;
};

// "2026/12/04 12:00:00.123" -> seconds (as if UTC); nullopt when it is not one.
std::optional<double> parse_smi_timestamp(std::string_view text);

// The lines of `csv` (no header, no units, columns in `fields` order); a last line
// without its end is ignored (cut while written), and so is a line that does not
// parse, counted in `bad_lines`.
std::vector<GpuSample> parse_samples(std::string_view csv, const std::vector<std::string>& fields,
                                     int* bad_lines = nullptr);

// dcgmi: the DCGM fields sampled, in this order (dcgmlib/dcgm_fields.h): SM clock
// (100), clock-event reasons (112, a bitmask, printed in decimal), max SM clock (113),
// GPU temperature (150), power (155, W), energy counter (156, mJ), power limit (160, W),
// utilisation (203, %), framebuffer total and used (250, 252, MiB). Their short names
// head dmon's columns and stand in TelemetryProbe::fields.
struct DcgmField {
  int id;
  const char* short_name;
};
const std::vector<DcgmField>& dcgmi_fields();

// Asks `COMMAND dmon -e IDS -c 1 [-i GPUS]` once. Not available (with a warning that
// says why) when the program is missing or dmon fails (no host engine running, an
// unknown field): the caller then falls back to nvidia-smi. An error only when the
// host cannot be reached.
std::expected<TelemetryProbe, Error> probe_dcgmi(remote::Host& host, const std::vector<std::string>& command,
                                                 const std::optional<std::vector<int>>& gpus);

// dmon's rows as the sampler records them, each prefixed by the host's clock when
// bash read it (dmon prints no time): "1764849600.123456 GPU 0  312.450  ...". The
// headers dmon repeats, and the line it prints when SIGINT stops it, are skipped; a
// GPU row with the wrong number of values is counted in `bad_lines`.
std::vector<GpuSample> parse_dcgmi_samples(std::string_view text, int* bad_lines = nullptr);

// sampler_argv for a dcgmi probe.
std::vector<std::string> dcgmi_sampler_argv(const TelemetryProbe& probe, const std::optional<std::vector<int>>& gpus,
                                            int interval_ms);

// The throttle reasons flagged, by NVML's bits, in report order.
struct ThrottleReason {
  const char* name;
  std::uint64_t bit;
};
const std::vector<ThrottleReason>& throttle_reasons();

// A window's figures: `seconds` is the measured duration the energy is scaled to,
// `output_tokens` what the level generated. Null when there are no samples.
nlohmann::ordered_json level_telemetry(const std::vector<GpuSample>& samples, double seconds,
                                       std::int64_t output_tokens);

// The load phase's figures: peak memory per GPU (in GPU order) and the total.
nlohmann::ordered_json load_telemetry(const std::vector<GpuSample>& samples);

// Which window samples belong to: benchmark name ("" for the load), level ("load",
// "single", "c10", "r2.5") and repeat.
struct TelemetryLabel {
  std::string benchmark;
  std::string level;
  int repeat = 1;
};

// telemetry.csv in a variant's folder: one row per GPU per sample.
inline constexpr const char* k_telemetry_csv_header =
    "benchmark,level,repeat,t_s,index,power_w,power_limit_w,util_pct,memory_used_mib,memory_total_mib,"
    "temperature_c,sm_clock_mhz,sm_clock_max_mhz,energy_mj,throttle_reasons\n";
// Rows for `samples`, `t0` the variant's first sample time.
std::string telemetry_csv_rows(const std::vector<GpuSample>& samples, std::string_view benchmark,
                               std::string_view level, int repeat, double t0);

// A sampler on a host: started detached (its own process group, carrying the
// server's SPECCTL_TAG so a teardown or a resumed run's cleanup finds it), its
// output appended to DIR/server.log, stopped with TERM to its group.
class TelemetrySampler {
public:
  TelemetrySampler(TelemetryProbe probe, std::optional<std::vector<int>> gpus, std::string dir, std::string tag)
      : m_probe(std::move(probe)), m_gpus(std::move(gpus)), m_dir(std::move(dir)), m_tag(std::move(tag)) {}

  const TelemetryProbe& probe() const { return m_probe; }
  bool running() const { return m_pid > 0; }

  std::expected<void, Error> start(remote::Host& host, int interval_ms);
  // Stops the sampler (TERM to its group, then waits for it to go, bounded) and
  // returns what it sampled since it started; with `last_sample`, one more reading
  // taken once it stopped (the load's: a load shorter than its 2 s interval has one
  // sample, taken before the weights).
  std::expected<std::vector<GpuSample>, Error> stop(remote::Host& host, bool last_sample = false);

private:
  TelemetryProbe m_probe;
  std::optional<std::vector<int>> m_gpus;
  std::string m_dir;
  std::string m_tag;
  int m_pid = 0;
  std::uint64_t m_offset = 0;
};

} // namespace specctl::run
