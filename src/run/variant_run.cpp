#include "variant_run.hpp"

#include <specctl/util/size.hpp>

#include <specctl/remote/host_ops.hpp>
#include <specctl/report/results.hpp>
#include <specctl/server/render.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <random>
#include <sstream>
#include <thread>

namespace specctl::run::detail {

namespace {

// How long the engine's version command may take.
constexpr util::Duration k_version_timeout = std::chrono::seconds{60};

std::string random_suffix() {
  std::random_device random;
  return fmt::format("{:04x}", random() & 0xffff);
}

json facts_to_json(const remote::Host& host, const remote::HostFacts& facts) {
  return {{"description", host.describe()},
          {"hostname", facts.hostname},
          {"kernel", facts.kernel},
          {"gpu_count", facts.gpus.size()},
          {"gpus", facts.gpus},
          {"driver", facts.driver},
          {"cuda", facts.cuda},
          {"free_disk_mib", facts.free_disk_mib ? json(*facts.free_disk_mib) : json(nullptr)}};
}

std::vector<std::string> log_tail(remote::Host& host, const std::string& path) {
  auto result = host.exec(fmt::format("tail -n 20 {} 2>/dev/null", util::shell_quote(path)));
  std::vector<std::string> lines;
  if (result) {
    std::istringstream in(result->out);
    std::string line;
    while (std::getline(in, line)) {
      lines.push_back(line);
    }
  }
  return lines;
}

std::string state_dir_of(const VariantContext& shared, const std::string& node) {
  const auto* machine = experiment::machine_of(shared.experiment, node);
  return machine != nullptr && machine->state_dir ? *machine->state_dir : shared.options.state_dir;
}

} // namespace

VariantRun::VariantRun(const VariantContext& shared, const experiment::PlannedVariant& planned, std::string node,
                       int index, int total, int attempt)
    : m_s(shared), m_planned(planned), m_variant(*planned.variant), m_config(planned.variant->server),
      m_node(std::move(node)), m_state_dir(state_dir_of(shared, m_node)), m_index(index), m_total(total),
      m_attempt(attempt), m_reporter(shared.display.reporter_for(m_variant.name)),
      m_result(
          {m_variant.name, m_variant.description, m_node, attempt, utc_timestamp(std::chrono::system_clock::now())}) {}

Attempted VariantRun::run() {
  auto started = Clock::now();
  std::optional<PhaseFailure> failure;
  try {
    execute();
  } catch (const PhaseFailure& f) {
    failure = f;
  } catch (const Error& e) {
    failure = PhaseFailure{m_phase, e};
  } catch (const std::exception& e) {
    // Whatever went wrong, the server must not be left holding the GPUs.
    failure = PhaseFailure{m_phase, Error(fmt::format("internal error: {}", e.what()))};
  }
  if (m_server) {
    stop_telemetry();
    tear_down();
  }
  release_claims();
  copy_log();
  // Every benchmark measured is a complete result: a Ctrl-C during the teardown does not undo it.
  if (failure) {
    std::vector<std::string> tail;
    if (m_server && m_host != nullptr && failure->error.kind() != ErrorKind::interrupted) {
      tail = log_tail(*m_host, m_server->files.log());
    }
    m_result.fail(failure->phase, failure->error, std::move(tail));
  }
  m_result.finish(utc_timestamp(std::chrono::system_clock::now()), util::seconds_since(started));
  return {std::move(m_result), failure && transient(failure->phase, failure->error)};
}

bool VariantRun::stopped() const {
  return m_s.options.stop != nullptr && m_s.options.stop->load();
}

void VariantRun::check_stop() {
  if (stopped()) {
    throw PhaseFailure{m_phase, Error("interrupted", ErrorKind::interrupted)};
  }
}

void VariantRun::begin(const std::string& phase) {
  m_phase = phase;
  m_phase_start = Clock::now();
  m_s.display.phase(m_variant.name, m_index, m_total, phase);
  m_s.journal.record("phase_started", {{"variant", m_variant.name}, {"phase", phase}, {"attempt", m_attempt}});
}

void VariantRun::end(json fields) {
  double took = util::seconds_since(m_phase_start);
  m_result.phase(m_phase, took);
  fields["variant"] = m_variant.name;
  fields["phase"] = m_phase;
  fields["duration_s"] = took;
  m_s.journal.record("phase_finished", std::move(fields));
}

void VariantRun::execute() {
  begin("connect");
  if (!m_config.host.empty() && m_node != m_config.host) {
    m_s.display.message(m_variant.name, Severity::info, fmt::format("on {} ({})", m_node, m_config.host));
  }
  m_host = must(m_s.pool.get(m_node), "connect");
  record_provenance();
  end();
  check_stop();

  begin("cleanup");
  // Chosen now: the claim on the host names the server it is for.
  std::string tag =
      fmt::format("{}-{}-{}", m_variant.name,
                  fmt::format("{:%Y%m%d%H%M%S}",
                              fmt::localtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()))),
                  random_suffix());
  server::CleanupOptions cleanup_options;
  cleanup_options.tag = tag;
  cleanup_options.state_dir = m_state_dir;
  cleanup_options.owner = m_s.owner;
  cleanup_options.cancel = m_s.options.stop;
  m_claimed = true;
  auto cleanup = must(server::cleanup_before_launch(*m_host, m_config, cleanup_options, *m_reporter), "cleanup");
  m_result.at("cleanup") = {{"actions", cleanup.actions}, {"left_alone", cleanup.left_alone}};
  end({{"actions", cleanup.actions}});
  check_stop();

  begin("launch");
  m_s.journal.record("launching",
                     {{"variant", m_variant.name}, {"host", m_node}, {"tag", tag}, {"state_dir", m_state_dir}});
  m_server = must(server::launch(*m_host, m_config, m_launch, tag, m_state_dir, m_s.owner), "launch");
  m_s.journal.record("launched", {{"variant", m_variant.name},
                                  {"host", m_node},
                                  {"tag", tag},
                                  {"pid", m_server->pid},
                                  {"run_dir", m_server->files.dir}});
  m_result.at("tag") = tag;
  m_result.at("server") = {{"pid", m_server->pid}, {"run_dir", m_server->files.dir}, {"url", m_server->base_url()}};
  end({{"tag", tag}, {"pid", m_server->pid}});

  begin("load");
  start_telemetry();
  auto load = must(server::wait_ready(*m_host, *m_server, m_config, *m_reporter, m_s.options.stop), "load");
  load_telemetry_done();
  ordered milestones = ordered::object();
  for (const auto& [name, at] : load.milestones) {
    milestones[name] = std::chrono::duration<double>(at).count();
  }
  double load_s = std::chrono::duration<double>(load.load_time).count();
  m_result.at("load") = {{"load_s", load_s}, {"milestones", milestones}};
  end({{"load_s", load_s}});
  check_stop();

  run_warmup();
  for (const auto& name : m_variant.benchmarks) {
    const auto* spec = m_s.experiment.find_benchmark(name);
    if (spec == nullptr || keep_measured(*spec)) {
      continue;
    }
    check_stop();
    run_benchmark(*spec);
  }
  flag_ineffective_speculation();
}

// Resuming: a benchmark an earlier attempt measured completely, with the same
// spec, is kept as it was (and says so) instead of being run again.
bool VariantRun::keep_measured(const experiment::BenchmarkSpec& spec) {
  if (m_s.measured == nullptr) {
    return false;
  }
  auto it = m_s.measured->find(m_variant.name);
  if (it == m_s.measured->end() || !it->second.contains(spec.name)) {
    return false;
  }
  const auto& entry = it->second[spec.name];
  if (entry.value("spec", "") != spec.describe()) {
    return false;
  }
  m_result.benchmark(spec.name, entry);
  m_result.flag(fmt::format("benchmark \"{}\" was measured before the run was resumed, by an "
                            "earlier launch of the server",
                            spec.name));
  m_s.journal.record("benchmark_kept", {{"variant", m_variant.name}, {"benchmark", spec.name}});
  return true;
}

// The result so far, on disk the moment a benchmark ends: a kill, a Ctrl-C or a
// failed teardown after it loses nothing measured. It reads as interrupted until
// the variant's final result replaces it.
void VariantRun::save_progress() {
  std::vector<std::string> measured;
  std::vector<std::string> left;
  const auto& measured_so_far = m_result.doc()["benchmarks"];
  for (const auto& name : m_variant.benchmarks) {
    bool done = measured_so_far.contains(name) && report::status_of(measured_so_far[name]) == report::VariantStatus::ok;
    (done ? measured : left).push_back(name);
  }
  auto reason = fmt::format("the run stopped before this variant finished (measured: {}; not measured: {})",
                            measured.empty() ? "none" : util::join(measured, ", "),
                            left.empty() ? "none" : util::join(left, ", "));
  if (!m_result.write_progress(m_s.paths.result(m_variant.name), reason, m_s.failures)) {
    throw PhaseFailure{m_phase, Error(fmt::format("cannot keep the measurement: {}", m_s.failures.first()->what()))};
  }
}

void VariantRun::record_provenance() {
  const std::string& host_name = m_node;
  if (!m_s.provenance.has_host(host_name)) {
    auto facts = remote::host_facts(*m_host);
    if (facts) {
      m_s.provenance.set_host(host_name, facts_to_json(*m_host, *facts));
    } else {
      warn(fmt::format("could not read the facts of {}: {}", m_host->describe(), facts.error().what()));
    }
  }
  const auto& tmpl = *m_config.tmpl;
  json engine_version = nullptr;
  if (!tmpl.version_command.empty()) {
    std::string key = host_name + "\n" + tmpl.name;
    auto known = m_s.provenance.engine_version(key);
    if (!known) {
      auto ran = m_host->exec(util::shell_join(tmpl.version_command) + " 2>&1", k_version_timeout);
      std::string text = ran && ran->exit_code == 0 ? util::trim(ran->out) : std::string();
      m_s.provenance.set_engine_version(key, text);
      known = text;
      // With `before` rules the base spelling is the newest, which an older engine rejects: a
      // launch that fails on it is explained here (once per host: later variants find the
      // empty version in the provenance). `since` bases are ones every version takes.
      if (text.empty() &&
          std::any_of(tmpl.knobs.begin(), tmpl.knobs.end(), [](const auto& k) { return !k.before.empty(); })) {
        warn(fmt::format("could not read the {} version on {} ({}): flags use the template's newest spelling",
                         tmpl.name, host_name, util::shell_join(tmpl.version_command)));
      }
    }
    if (!known->empty()) {
      engine_version = *known;
    }
  }
  render_for_version(engine_version.is_string() ? engine_version.get<std::string>() : std::string());
  json env = json::object();
  for (const auto& [name, value] : m_launch.env) {
    env[name] = value;
  }
  m_s.provenance.set_variant(
      m_variant.name, {{"host", host_name},
                       {"command", m_launch.shell_line()},
                       {"argv", m_launch.argv},
                       {"env", env},
                       {"template", {{"name", tmpl.name}, {"file", tmpl.file}, {"content_hash", tmpl.content_hash}}},
                       {"engine_version", engine_version}});
}

// A template whose flags changed spelling between engine versions (`since:`)
// is rendered again for the version the host has: the plan could not know it.
void VariantRun::render_for_version(const std::string& version) {
  const auto& knobs = m_config.tmpl->knobs;
  bool versioned = std::any_of(knobs.begin(), knobs.end(), [](const auto& k) { return k.versioned(); });
  if (!versioned || version.empty()) {
    return;
  }
  server::RenderOptions options = m_s.options.render;
  options.engine_version = version;
  m_launch = server::render_launch(m_config, options);
  for (const auto& warning : m_launch.warnings) {
    warn(warning);
  }
  if (m_launch.argv != m_planned.launch.argv) {
    m_s.display.message(m_variant.name, Severity::info,
                        fmt::format("flags spelled for {} {}", m_config.tmpl->name, version));
  }
}

// The server died while `what` ran: the variant fails saying when and how (the
// failure record adds the log's last lines).
void VariantRun::server_died(const ServerWatch::Death& death, const std::string& what) {
  std::string how = death.exit_code ? fmt::format("exit code {}", *death.exit_code) : "killed: no exit code";
  throw PhaseFailure{m_phase,
                     Error(fmt::format("the server died during {} ({}, after {:.1f} s)", what, how, death.after_s))};
}

void VariantRun::tear_down() {
  auto started = Clock::now();
  m_s.display.phase(m_variant.name, m_index, m_total, "teardown");
  m_s.journal.record("phase_started", {{"variant", m_variant.name}, {"phase", "teardown"}});
  // A lost connection is reopened: the server must not be left holding the GPUs.
  std::optional<Error> last;
  const RetryPolicy policy = retry_policy(m_s.options, 1);
  for (int attempt = 1; attempt <= policy.attempts(); ++attempt) {
    if (attempt > 1) {
      m_s.pool.drop(m_node);
      m_host = nullptr;
      std::this_thread::sleep_for(policy.wait_before(attempt));
      auto host = m_s.pool.get(m_node);
      if (!host) {
        last = host.error();
        continue;
      }
      m_host = *host;
    }
    auto report = server::teardown(*m_host, *m_server, m_config, *m_reporter);
    if (report) {
      m_result.at("teardown") = {
          {"escaped", report->escaped}, {"killed", report->killed}, {"gpus_released", report->gpus_released}};
      m_s.journal.record("torn_down", {{"variant", m_variant.name}, {"tag", m_server->tag}});
      last.reset();
      break;
    }
    last = report.error();
    if (!transient("teardown", report.error())) {
      break;
    }
  }
  if (last) {
    m_result.at("teardown") = {{"error", last->what()}};
    warn(fmt::format("teardown failed; the server may still run (tag {}): {}", m_server->tag, last->what()));
  }
  m_result.phase("teardown", util::seconds_since(started));
  m_s.journal.record("phase_finished", {{"variant", m_variant.name},
                                        {"phase", "teardown"},
                                        {"duration_s", util::seconds_since(started)},
                                        {"ok", !last}});
}

void VariantRun::release_claims() {
  if (!m_claimed) {
    return;
  }
  auto host = m_host != nullptr ? std::expected<remote::Host*, Error>(m_host) : m_s.pool.get(m_node);
  if (!host) {
    return;
  }
  if (auto released = server::release_claims(**host, m_config, m_state_dir, m_s.owner); !released) {
    warn(fmt::format("could not give back this run's claim on the port (it lapses when the run ends): {}",
                     released.error().what()));
  }
}

void VariantRun::check_port_is_ours() {
  auto checked = must(server::check_port_is_ours(*m_host, *m_server, m_config.port), m_phase);
  if (!checked.empty() && !m_port_unverified_said) {
    warn(checked);
    m_port_unverified_said = true;
  }
}

void VariantRun::copy_log() {
  if (!m_server || m_host == nullptr) {
    return;
  }
  auto copied = remote::copy_back(*m_host, m_server->files.log(), m_s.paths.server_log(m_variant.name).string(),
                                  m_config.log_keep_mib * 1024 * 1024, &m_s.failures);
  if (!copied) {
    warn(fmt::format("could not copy the server log back: {}", copied.error().what()));
  } else if (copied->cut > 0) {
    warn(fmt::format("the server log was {}: the copy keeps its first {} and its last {} (log_keep: {}MiB)",
                     util::format_bytes(copied->size), util::format_bytes(remote::k_copy_head_bytes),
                     util::format_bytes(m_config.log_keep_mib * 1024 * 1024 - remote::k_copy_head_bytes),
                     m_config.log_keep_mib));
  }
}

void VariantRun::warn(const std::string& text) {
  m_result.warn(text);
  m_s.display.message(m_variant.name, Severity::warning, text);
}

Attempted run_variant(const VariantContext& context, const experiment::PlannedVariant& planned, const std::string& node,
                      int index, int total, int attempt) {
  auto slot = experiment::slot_of(context.experiment, node);
  if (!slot) {
    return VariantRun(context, planned, node, index, total, attempt).run();
  }
  experiment::Variant variant = *planned.variant;
  variant.server = slot->server_in_slot(variant.server);
  experiment::PlannedVariant in_slot = planned;
  in_slot.variant = &variant;
  in_slot.launch = server::render_launch(variant.server, context.options.render);
  auto attempted = VariantRun(context, in_slot, node, index, total, attempt).run();
  std::vector<std::string> ids;
  for (int gpu : slot->gpus) {
    ids.push_back(std::to_string(gpu));
  }
  attempted.result.at("slot") = {{"host", slot->host},
                                 {"index", slot->index},
                                 {"of", slot->count},
                                 {"gpus", slot->gpus},
                                 {"port", variant.server.port}};
  attempted.result.flag(fmt::format("ran in GPU slot {} of {} on {} (GPUs {}, port {}) while other slots may have "
                                    "run: its figures may include their interference",
                                    slot->index, slot->count, slot->host, util::join(ids, ","), variant.server.port));
  return attempted;
}

} // namespace specctl::run::detail
