#pragma once

// One attempt at one variant on one machine: connect, clean up, launch, wait
// out the load, warm up, benchmark, tear down. The lifecycle is in
// variant_run.cpp, the benchmarks (warmup, windows, commands) in variant_bench.cpp,
// a concurrency or rate benchmark's levels and its SLO search in variant_levels.cpp,
// what they do with their workload (calibration, categories, vLLM files) in
// variant_workload.cpp; result.json is written through report::ResultWriter.

#include "bench_client.hpp"
#include "run_context.hpp"
#include "server_watch.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/bench/breakdown.hpp>
#include <specctl/bench/calibration.hpp>
#include <specctl/report/result_writer.hpp>
#include <specctl/run/telemetry.hpp>
#include <specctl/server/lifecycle.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace specctl::run::detail {

// The experiment's endpoint as the benchmark engine names it.
inline bench::Endpoint to_bench(experiment::Endpoint endpoint) {
  return endpoint == experiment::Endpoint::chat ? bench::Endpoint::chat : bench::Endpoint::completions;
}

struct BenchTally;

// Why a variant attempt stopped: the phase and the error.
struct PhaseFailure {
  std::string phase;
  Error error;
};

template <typename T> T must(std::expected<T, Error> value, const std::string& phase) {
  if (!value) {
    throw PhaseFailure{phase, value.error()};
  }
  return std::move(*value);
}

class VariantRun {
public:
  VariantRun(const VariantContext& shared, const experiment::PlannedVariant& planned, std::string node, int index,
             int total, int attempt);

  // The variant's result, and whether its failure was transient.
  Attempted run();

private:
  // variant_run.cpp: the lifecycle.
  bool stopped() const;
  void check_stop();
  void begin(const std::string& phase);
  void end(json fields = json::object());
  void execute();
  bool keep_measured(const experiment::BenchmarkSpec& spec);
  void save_progress();
  void record_provenance();
  void render_for_version(const std::string& version);
  void tear_down();
  void release_claims();
  // Before each benchmark: every socket on the server's port is the server's own.
  void check_port_is_ours();
  void copy_log();
  void warn(const std::string& text);
  [[noreturn]] void server_died(const ServerWatch::Death& death, const std::string& what);

  // variant_bench.cpp: the warmup and the benchmarks.
  // workload: where the provenance of the requests goes, when wanted.
  bench::RunOptions common_options(const experiment::BenchmarkSpec& spec, const std::string& label,
                                   ordered* workload = nullptr);
  bench::CalibrationResult calibrate(std::vector<bench::WorkloadRequest>& requests,
                                     const bench::RequestOptions& options);
  BenchClient& client();
  const bench::Target& target();
  void run_warmup();
  // A benchmark window: the log's size and the Prometheus counters when it opened,
  // and the GPU telemetry sampled through it (telemetry.csv names it by `label`).
  struct Window {
    std::optional<std::uint64_t> log_from;
    std::optional<std::string> metrics_before;
    TelemetryLabel label;
    bool sampling = false;
    std::vector<GpuSample> samples;
  };
  std::optional<std::string> scrape_metrics();
  Window open_window(TelemetryLabel label);
  // A window the benchmark client opened on the host.
  Window client_window(const ClientWindow& opened, TelemetryLabel label);
  void close_window(Window& window, ordered& holder, const bench::LevelResult& level);
  // variant_telemetry.cpp: the GPU telemetry of the load and of each window.
  void start_telemetry();
  void load_telemetry_done();
  void start_sampling(Window& window);
  void take_samples(Window& window, bool last_sample = false);
  void telemetry_figures(Window& window, ordered& holder, const bench::LevelResult& level);
  void stop_telemetry();
  void write_requests(const std::string& benchmark, const std::string& content);
  // A measured level in vLLM's --save-result shape, beside the requests (vllm-BENCH-TAG.json).
  void write_vllm_level(const experiment::BenchmarkSpec& spec, const std::string& tag, const bench::LevelResult& level);
  // Whether a single-stream benchmark of several categories runs one window per
  // category: the template reads acceptance only over a window (log, counters).
  bool windows_per_category() const;
  bench::SingleStreamResult single_stream_by_category(const experiment::BenchmarkSpec& spec,
                                                      bench::SingleStreamOptions options,
                                                      const std::vector<bench::CategoryPart>& parts, ServerWatch& watch,
                                                      Window& window, ordered& accepts);
  // holder["by_category"] (and "category_order") from a window's records: each
  // category's requests, tok/s, and accept length from `accepts` (a window per
  // category) or from the responses' own counts.
  void add_categories(ordered& holder, const bench::LevelResult& level, const std::vector<std::string>& order,
                      const ordered& accepts);
  void run_benchmark(const experiment::BenchmarkSpec& spec);
  // variant_levels.cpp: a concurrency or rate benchmark's levels, each repeat, and
  // the search for the highest rate that meets its SLO.
  void run_levels(const experiment::BenchmarkSpec& spec, ordered& entry, ServerWatch& watch, BenchTally& tally);
  void run_command(const experiment::BenchmarkSpec& spec, ordered& entry);
  void flag_ineffective_speculation();

  VariantContext m_s;
  const experiment::PlannedVariant& m_planned;
  // The command launched: the plan's, or rendered again for the host's engine version.
  server::LaunchCommand m_launch = m_planned.launch;
  const experiment::Variant& m_variant;
  const server::ServerConfig& m_config;
  // The machine this attempt runs on: the variant's host, or a member of its pool.
  std::string m_node;
  std::string m_state_dir;
  int m_index;
  int m_total;
  int m_attempt;
  std::unique_ptr<util::Reporter> m_reporter;
  report::ResultWriter m_result;
  remote::Host* m_host = nullptr;
  std::optional<server::RunningServer> m_server;
  // Whether the cleanup may have claimed the host's port and GPUs for this run.
  bool m_claimed = false;
  bool m_port_unverified_said = false;
  std::optional<bench::Target> m_target;
  std::optional<BenchClient> m_client;
  std::optional<TelemetrySampler> m_telemetry;
  // telemetry.csv's rows so far, and the host time of the first sample.
  std::string m_telemetry_rows;
  std::optional<double> m_telemetry_t0;
  std::string m_phase = "start";
  Clock::time_point m_phase_start = Clock::now();
};

} // namespace specctl::run::detail
