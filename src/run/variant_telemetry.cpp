// A variant's GPU telemetry: nvidia-smi asked once what it can sample, a coarse
// sampler through the model load (peak memory: how close the load came to OOM),
// one sampler per benchmark window at k_window_interval_ms, every sample into
// telemetry.csv and each window's figures beside its metrics. Nothing here fails
// a variant: what cannot be sampled is a warning.

#include "variant_run.hpp"

#include <specctl/report/results.hpp>

#include <fmt/format.h>

namespace specctl::run::detail {

namespace {

constexpr int k_load_interval_ms = 2000;
constexpr int k_window_interval_ms = 500;

} // namespace

void VariantRun::start_telemetry() {
  // dcgmi where the template names it and it answers; else nvidia-smi, saying why.
  std::expected<TelemetryProbe, Error> probe = std::unexpected(Error("no probe"));
  std::vector<std::string> dcgmi_warnings;
  if (!m_launch.dcgmi.empty()) {
    probe = probe_dcgmi(*m_host, m_launch.dcgmi, m_config.gpus);
    if (probe && !probe->available) {
      dcgmi_warnings = std::move(probe->warnings);
    }
  }
  if (m_launch.dcgmi.empty() || (probe && !probe->available)) {
    probe = probe_telemetry(*m_host, m_launch.telemetry, m_config.gpus);
  }
  if (!probe) {
    warn(fmt::format("GPU telemetry: {}", probe.error().what()));
    return;
  }
  probe->warnings.insert(probe->warnings.begin(), dcgmi_warnings.begin(), dcgmi_warnings.end());
  ordered doc = {{"file", "telemetry.csv"},
                 {"tool", probe->tool == TelemetryTool::dcgmi ? "dcgmi" : "nvidia-smi"},
                 {"fields", probe->fields},
                 {"energy_counter", probe->energy_counter},
                 {"throttle_field", probe->throttle_field ? ordered(*probe->throttle_field) : ordered(nullptr)},
                 {"warnings", probe->warnings}};
  m_result.at("telemetry") = std::move(doc);
  for (const auto& warning : probe->warnings) {
    warn("GPU telemetry: " + warning);
  }
  if (!probe->available) {
    return;
  }
  m_telemetry.emplace(std::move(*probe), m_config.gpus, m_server->files.dir + "/telemetry", m_server->tag);
  if (auto started = m_telemetry->start(*m_host, k_load_interval_ms); !started) {
    warn(fmt::format("GPU telemetry: cannot sample the load: {}", started.error().what()));
  }
}

void VariantRun::load_telemetry_done() {
  if (!m_telemetry || !m_telemetry->running()) {
    return;
  }
  Window load;
  load.label = {"", "load", 1};
  load.sampling = true;
  // With one reading more once ready: the memory the load ended with (the KV cache is
  // allocated last), which a load shorter than the 2 s interval would not have sampled.
  take_samples(load, true);
  if (!load.samples.empty()) {
    m_result.at("telemetry")["load"] = load_telemetry(load.samples);
  }
}

void VariantRun::start_sampling(Window& window) {
  if (!m_telemetry || window.sampling) {
    return;
  }
  if (auto started = m_telemetry->start(*m_host, k_window_interval_ms); !started) {
    warn(fmt::format("GPU telemetry: cannot sample {} {}: {}", window.label.benchmark, window.label.level,
                     started.error().what()));
    return;
  }
  window.sampling = true;
}

// Stops the window's sampler and keeps its samples, in the window and in telemetry.csv.
void VariantRun::take_samples(Window& window, bool last_sample) {
  if (!m_telemetry || !window.sampling) {
    return;
  }
  window.sampling = false;
  auto samples = m_telemetry->stop(*m_host, last_sample);
  if (!samples) {
    warn(fmt::format("GPU telemetry: could not read the samples of {} {}: {}", window.label.benchmark,
                     window.label.level, samples.error().what()));
    return;
  }
  if (samples->empty()) {
    return;
  }
  if (!m_telemetry_t0) {
    m_telemetry_t0 = samples->front().t;
  }
  m_telemetry_rows +=
      telemetry_csv_rows(*samples, window.label.benchmark, window.label.level, window.label.repeat, *m_telemetry_t0);
  // The whole file again: small, and never half written.
  m_s.failures.write(m_s.paths.variant_dir(m_variant.name) / "telemetry.csv",
                     std::string(k_telemetry_csv_header) + m_telemetry_rows);
  window.samples.insert(window.samples.end(), samples->begin(), samples->end());
}

void VariantRun::telemetry_figures(Window& window, ordered& holder, const bench::LevelResult& level) {
  if (window.samples.empty()) {
    return;
  }
  auto figures = level_telemetry(window.samples, level.duration_s, level.output_tokens);
  if (figures.is_null()) {
    return;
  }
  auto& metrics = holder["metrics"];
  if (figures.contains("tok_per_j")) {
    metrics["tok_per_j"] = figures["tok_per_j"];
  }
  if (figures.contains("power_w")) {
    metrics["power_w"] = figures["power_w"]["mean"];
  }
  for (const auto& reason : figures.value("throttled", ordered::array())) {
    warn(fmt::format("{} {}{}: GPUs throttled ({}) for {:.0f}% of the level: its figures may measure the cooling, "
                     "not the configuration",
                     window.label.benchmark, window.label.level,
                     window.label.repeat > 1 ? fmt::format(" #{}", window.label.repeat) : "", reason.get<std::string>(),
                     100.0 * figures["throttle"][reason.get<std::string>()].get<double>()));
  }
  holder["telemetry"] = std::move(figures);
}

// Before the teardown: a sampler still running (a window cut short by an error)
// is stopped by us, not found by the teardown as an escaped worker.
void VariantRun::stop_telemetry() {
  if (!m_telemetry || !m_telemetry->running() || m_host == nullptr) {
    return;
  }
  Window rest;
  rest.label = {"", "interrupted", 1};
  rest.sampling = true;
  take_samples(rest);
}

} // namespace specctl::run::detail
