#include "bench_client.hpp"
#include "run_context.hpp"
#include "server_watch.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/bench/prompts.hpp>
#include <specctl/bench/report.hpp>
#include <specctl/http/get.hpp>
#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/local_host.hpp>
#include <specctl/report/results.hpp>
#include <specctl/run/command_bench.hpp>
#include <specctl/run/server_metrics.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/server/render.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <random>
#include <sstream>
#include <thread>

namespace specctl::run::detail {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using ordered = nlohmann::ordered_json;

// The most of a benchmark window's server log that is read for its metrics.
constexpr std::size_t k_max_window_bytes = 64 * 1024 * 1024;
// The warmup request: enough tokens to go through prefill and decode once.
constexpr int k_warmup_tokens = 16;
// By experiment::BenchmarkKind.
constexpr const char* k_kind_names[] = {"single_stream", "concurrency", "rate", "command"};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string error_kind_name(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::timed_out:
    return "timed_out";
  case ErrorKind::bad_input:
    return "bad_input";
  case ErrorKind::interrupted:
    return "interrupted";
  case ErrorKind::unreachable:
    return "unreachable";
  case ErrorKind::failed:
    break;
  }
  return "failed";
}

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

std::string random_suffix() {
  std::random_device random;
  return fmt::format("{:04x}", random() & 0xffff);
}

// Connections to the experiment's hosts, opened on first use and kept for the

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

std::optional<std::uint64_t> log_size(remote::Host& host, const std::string& path) {
  auto result = host.exec(fmt::format("wc -c < {} 2>/dev/null || echo 0", util::shell_quote(path)));
  if (!result || result->exit_code != 0) {
    return std::nullopt;
  }
  try {
    return std::stoull(result->out);
  } catch (const std::exception&) {
    return std::nullopt;
  }
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

json server_metrics_json(const std::vector<ServerMetric>& metrics) {
  json out = json::object();
  for (const auto& m : metrics) {
    out[m.name] = {{"samples", m.samples},
                   {"mean", report::finite_or_null(m.mean)},
                   {"min", report::finite_or_null(m.min)},
                   {"max", report::finite_or_null(m.max)},
                   {"last", report::finite_or_null(m.last)}};
  }
  return out;
}

bench::Endpoint to_bench(experiment::Endpoint endpoint) {
  return endpoint == experiment::Endpoint::chat ? bench::Endpoint::chat : bench::Endpoint::completions;
}

bench::PromptSource prompt_source(const experiment::PromptSpec& spec, const std::filesystem::path& base) {
  bench::PromptSource source;
  if (spec.file) {
    source.kind = bench::PromptKind::file;
    std::filesystem::path file(*spec.file);
    source.path = file.is_relative() ? (base / file).string() : file.string();
  } else if (spec.synthetic_input_tokens) {
    source.kind = bench::PromptKind::synthetic;
    source.input_tokens = *spec.synthetic_input_tokens;
  } else if (!spec.inline_prompts.empty()) {
    source.kind = bench::PromptKind::inline_texts;
    source.texts = spec.inline_prompts;
  } else if (spec.builtin == "long") {
    source.kind = bench::PromptKind::long_set;
  }
  return source;
}

void requests_jsonl(const bench::LevelResult& level, std::string_view phase, std::string& out) {
  for (const auto& record : level.records) {
    out += bench::request_to_json(record, phase).dump(-1, ' ', false, json::error_handler_t::replace);
    out += '\n';
  }
}

// Sums over a benchmark's levels of what its requests say about the figures:
// prompt tokens served from the prefix cache, and drafts accepted on repeats.
struct Honesty {
  std::int64_t prompt_tokens = -1;
  std::int64_t cached_tokens = -1;
  // Without their chunks: the acceptance check needs only the server's counts.
  std::vector<bench::RequestRecord> records;

  // Takes the level's records (its results are written by then).
  void add(bench::LevelResult& level) {
    const auto sum = [](std::int64_t& total, std::int64_t value) {
      if (value >= 0) {
        total = std::max<std::int64_t>(total, 0) + value;
      }
    };
    sum(prompt_tokens, level.prompt_tokens);
    sum(cached_tokens, level.cached_prompt_tokens);
    for (auto& record : level.records) {
      record.chunks = {};
      records.push_back(std::move(record));
    }
    level.records.clear();
  }

  std::vector<std::string> flags(std::string_view benchmark) const {
    std::vector<std::string> out;
    if (auto flag = bench::prefix_cache_flag(benchmark, prompt_tokens, cached_tokens)) {
      out.push_back(std::move(*flag));
    }
    if (auto flag = bench::repeated_acceptance_flag(benchmark, records)) {
      out.push_back(std::move(*flag));
    }
    return out;
  }
};

std::string state_dir_of(const VariantContext& shared, const std::string& node) {
  const auto* machine = experiment::machine_of(shared.experiment, node);
  return machine != nullptr && machine->state_dir ? *machine->state_dir : shared.options.state_dir;
}

class VariantRun {
public:
  using Shared = VariantContext;

  VariantRun(const Shared& shared, const experiment::PlannedVariant& planned, std::string node, int index, int total,
             int attempt)
      : m_s(shared), m_planned(planned), m_variant(*planned.variant), m_config(planned.variant->server),
        m_node(std::move(node)), m_state_dir(state_dir_of(shared, m_node)), m_index(index), m_total(total),
        m_attempt(attempt), m_reporter(shared.display.reporter_for(m_variant.name)) {}

  // The variant's result document; `transient` says whether trying again may help.
  ordered run(bool& transient) {
    m_result["format"] = report::k_result_format;
    m_result["version"] = report::k_results_version;
    m_result["variant"] = m_variant.name;
    m_result["description"] = m_variant.description;
    m_result["host"] = m_node;
    m_result["attempt"] = m_attempt;
    m_result["started"] = utc_timestamp(std::chrono::system_clock::now());
    m_result["phases"] = ordered::object();
    m_result["benchmarks"] = ordered::object();
    m_result["flags"] = ordered::array();
    m_result["warnings"] = ordered::array();
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
      tear_down();
    }
    copy_log();
    // Every benchmark measured is a complete result: a Ctrl-C during the teardown does not undo it.
    if (failure) {
      record_failure(*failure);
      transient = failure->error.unreachable() || (failure->phase == "connect" && failure->error.timed_out());
    } else {
      m_result["status"] = "ok";
      transient = false;
    }
    m_result["finished"] = utc_timestamp(std::chrono::system_clock::now());
    m_result["duration_s"] = seconds_since(started);
    return m_result;
  }

private:
  bool stopped() const { return m_s.options.stop != nullptr && m_s.options.stop->load(); }

  void check_stop() {
    if (stopped()) {
      throw PhaseFailure{m_phase, Error("interrupted", ErrorKind::interrupted)};
    }
  }

  void begin(const std::string& phase) {
    m_phase = phase;
    m_phase_start = Clock::now();
    m_s.display.phase(m_variant.name, m_index, m_total, phase);
    m_s.journal.record("phase_started", {{"variant", m_variant.name}, {"phase", phase}, {"attempt", m_attempt}});
  }

  void end(json fields = json::object()) {
    double took = seconds_since(m_phase_start);
    m_result["phases"][m_phase] = took;
    fields["variant"] = m_variant.name;
    fields["phase"] = m_phase;
    fields["duration_s"] = took;
    m_s.journal.record("phase_finished", std::move(fields));
  }

  void execute() {
    begin("connect");
    if (!m_config.host.empty() && m_node != m_config.host) {
      m_s.display.message(m_variant.name, Severity::info, fmt::format("on {} ({})", m_node, m_config.host));
    }
    m_host = must(m_s.pool.get(m_result["host"].get<std::string>()), "connect");
    record_provenance();
    end();
    check_stop();

    begin("cleanup");
    server::CleanupOptions cleanup_options;
    cleanup_options.state_dir = m_state_dir;
    cleanup_options.owner = m_s.owner;
    cleanup_options.cancel = m_s.options.stop;
    auto cleanup = must(server::cleanup_before_launch(*m_host, m_config, cleanup_options, *m_reporter), "cleanup");
    m_result["cleanup"] = {{"actions", cleanup.actions}, {"left_alone", cleanup.left_alone}};
    end({{"actions", cleanup.actions}});
    check_stop();

    begin("launch");
    std::string tag =
        fmt::format("{}-{}-{}", m_variant.name,
                    fmt::format("{:%Y%m%d%H%M%S}",
                                fmt::localtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()))),
                    random_suffix());
    m_s.journal.record(
        "launching",
        {{"variant", m_variant.name}, {"host", m_result["host"]}, {"tag", tag}, {"state_dir", m_state_dir}});
    m_server = must(server::launch(*m_host, m_config, m_launch, tag, m_state_dir, m_s.owner), "launch");
    m_s.journal.record("launched", {{"variant", m_variant.name},
                                    {"host", m_result["host"]},
                                    {"tag", tag},
                                    {"pid", m_server->pid},
                                    {"run_dir", m_server->files.dir}});
    m_result["tag"] = tag;
    m_result["server"] = {{"pid", m_server->pid}, {"run_dir", m_server->files.dir}, {"url", m_server->base_url()}};
    end({{"tag", tag}, {"pid", m_server->pid}});

    begin("load");
    auto load = must(server::wait_ready(*m_host, *m_server, m_config, *m_reporter, m_s.options.stop), "load");
    ordered milestones = ordered::object();
    for (const auto& [name, at] : load.milestones) {
      milestones[name] = std::chrono::duration<double>(at).count();
    }
    double load_s = std::chrono::duration<double>(load.load_time).count();
    m_result["load"] = {{"load_s", load_s}, {"milestones", milestones}};
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
  bool keep_measured(const experiment::BenchmarkSpec& spec) {
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
    m_result["benchmarks"][spec.name] = entry;
    m_result["flags"].push_back(fmt::format("benchmark \"{}\" was measured before the run was resumed, by an "
                                            "earlier launch of the server",
                                            spec.name));
    m_s.journal.record("benchmark_kept", {{"variant", m_variant.name}, {"benchmark", spec.name}});
    return true;
  }

  // The result so far, on disk the moment a benchmark ends: a kill, a Ctrl-C or a
  // failed teardown after it loses nothing measured. It reads as interrupted until
  // the variant's final result replaces it.
  void save_progress() {
    ordered progress = m_result;
    std::vector<std::string> measured;
    std::vector<std::string> left;
    for (const auto& name : m_variant.benchmarks) {
      bool done = m_result["benchmarks"].contains(name) && m_result["benchmarks"][name].value("status", "") == "ok";
      (done ? measured : left).push_back(name);
    }
    progress["status"] = "interrupted";
    progress["reason"] = fmt::format("the run stopped before this variant finished (measured: {}; not measured: {})",
                                     measured.empty() ? "none" : util::join(measured, ", "),
                                     left.empty() ? "none" : util::join(left, ", "));
    if (!m_s.failures.write(m_s.paths.result(m_variant.name),
                            progress.dump(2, ' ', false, json::error_handler_t::replace) + "\n")) {
      throw PhaseFailure{m_phase, Error(fmt::format("cannot keep the measurement: {}", m_s.failures.first()->what()))};
    }
  }

  void record_provenance() {
    const std::string host_name = m_result["host"];
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
        auto ran = m_host->exec(util::shell_join(tmpl.version_command) + " 2>&1", std::chrono::seconds{60});
        std::string text = ran && ran->exit_code == 0 ? util::trim(ran->out) : std::string();
        m_s.provenance.set_engine_version(key, text);
        known = text;
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
  void render_for_version(const std::string& version) {
    const auto& knobs = m_config.tmpl->knobs;
    bool versioned = std::any_of(knobs.begin(), knobs.end(), [](const auto& k) { return !k.since.empty(); });
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

  bench::RunOptions common_options(const experiment::BenchmarkSpec& spec, const std::string& label) {
    bench::RunOptions common;
    common.request.endpoint = to_bench(spec.endpoint);
    common.request.max_tokens = spec.max_tokens;
    common.request.ignore_eos = spec.ignore_eos;
    common.request.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(spec.idle_timeout);
    auto base = std::filesystem::path(m_s.experiment.file).parent_path();
    auto prompts = bench::load_prompts(prompt_source(spec.prompts, base));
    if (!prompts) {
      throw PhaseFailure{label, Error(prompts.error().what(), ErrorKind::bad_input)};
    }
    common.prompts = std::move(*prompts);
    common.unique_prompts = spec.unique_prompts;
    common.prompt_tag = label;
    common.warmup = spec.warmup;
    common.stop = m_s.options.stop;
    if (spec.timeout > util::Duration::zero()) {
      common.deadline = Clock::now() + spec.timeout;
    }
    std::string variant = m_variant.name;
    Display* display = &m_s.display;
    common.on_progress = [display, variant](const bench::Progress& p) { display->bench_progress(variant, p); };
    return common;
  }

  // Where the built-in benchmarks run their client (src/run/bench_client.hpp), once the server runs.
  BenchClient& client() {
    if (!m_client) {
      BenchClient::Setup setup;
      setup.host = m_host;
      setup.default_where = m_s.experiment.bench_client;
      setup.node = m_node;
      setup.state_dir = std::filesystem::path(m_server->files.dir).parent_path().string();
      setup.variant = m_variant.name;
      setup.server_tag = m_server->tag;
      setup.server_files = m_server->files;
      setup.server_pid = m_server->pid;
      setup.server_port = m_config.port;
      for (const auto& source : m_config.tmpl->accept_length) {
        if (source.kind == server::AcceptSource::Kind::prometheus) {
          setup.metrics_path = source.path;
          break;
        }
      }
      setup.stop = m_s.options.stop;
      setup.target = [this]() -> const bench::Target& { return target(); };
      setup.warn = [this](const std::string& text) { warn(text); };
      setup.flag = [this](const std::string& text) { m_result["flags"].push_back(text); };
      setup.journal = [this](std::string_view event, json fields) { m_s.journal.record(event, std::move(fields)); };
      m_client.emplace(std::move(setup));
    }
    return *m_client;
  }

  const bench::Target& target() {
    if (!m_target) {
      try {
        m_target = bench::resolve_target(bench::Target{m_server->base_url(), "", ""});
      } catch (const Error& e) {
        throw PhaseFailure{m_phase, e};
      }
    }
    return *m_target;
  }

  void run_warmup() {
    if (m_variant.benchmarks.empty()) {
      return;
    }
    const auto* first = m_s.experiment.find_benchmark(m_variant.benchmarks.front());
    begin("warmup");
    experiment::BenchmarkSpec spec =
        first != nullptr && first->kind != experiment::BenchmarkKind::command ? *first : experiment::BenchmarkSpec{};
    spec.max_tokens = std::min(spec.max_tokens, k_warmup_tokens);
    spec.timeout = m_config.warmup_timeout;
    bench::SingleStreamOptions options{common_options(spec, "warmup"), 1};
    options.common.prompt_tag = "warmup";
    options.common.warmup = 0;
    options.common.on_progress = nullptr;
    ServerWatch watch(*m_host, m_server->files, m_server->pid, m_s.options.stop);
    options.common.stop = watch.stop_flag();
    options.common.on_request_failed = [&](bench::FailureKind kind) { watch.poke(kind); };
    options.common.hold = watch.hold_flag();
    auto result = bench::run_single_stream(target(), options);
    if (auto death = watch.death()) {
      server_died(*death, "the warmup");
    }
    check_stop();
    if (result.level.completed == 0) {
      throw PhaseFailure{"warmup", Error(fmt::format("the warmup request failed: {}", first_error(result.level)))};
    }
    end();
  }

  // A benchmark window: the log's size and the Prometheus counters when it opened.
  struct Window {
    std::optional<std::uint64_t> log_from;
    std::optional<std::string> metrics_before;
  };

  // The Prometheus text of the template's first prometheus source, when it has one.
  std::optional<std::string> scrape_metrics() {
    for (const auto& source : m_config.tmpl->accept_length) {
      if (source.kind != server::AcceptSource::Kind::prometheus) {
        continue;
      }
      auto response = http::get(m_server->base_url() + source.path);
      if (response && response->status == 200) {
        return std::move(response->body);
      }
      return std::nullopt;
    }
    return std::nullopt;
  }

  Window open_window() { return Window{log_size(*m_host, m_server->files.log()), scrape_metrics()}; }

  // The window's server metrics and accept length into `holder`: the log from
  // its size at the opening to now, in one read (up to k_max_window_bytes), and
  // the counters' difference; the accept length names its source.
  void close_window(const Window& window, ordered& holder, const bench::LevelResult& level) {
    std::string bytes;
    if (window.log_from) {
      auto read = remote::read_file_from(*m_host, m_server->files.log(), *window.log_from, k_max_window_bytes);
      if (read) {
        bytes = std::move(*read);
      } else {
        warn(fmt::format("could not read the server log for its metrics: {}", read.error().what()));
      }
    }
    const auto& patterns = m_config.tmpl->log;
    holder["server_metrics"] = server_metrics_json(scan_server_metrics(patterns, bytes));
    if (window.log_from) {
      // The bytes of server.log the figures were read from: anyone can read them again.
      holder["server_log_window"] = {*window.log_from, *window.log_from + bytes.size()};
    }
    AcceptWindow facts;
    facts.log = bytes;
    facts.metrics_before = window.metrics_before;
    if (window.metrics_before) {
      facts.metrics_after = scrape_metrics();
    }
    facts.draft_accepted = level.draft_accepted;
    facts.predicted_tokens = level.server_predicted_n;
    facts.completed = level.completed;
    if (auto accept = accept_length_of(m_config.tmpl->accept_length, patterns, facts)) {
      holder["metrics"]["accept_length"] = report::finite_or_null(accept->value);
      holder["accept_length_source"] = {
          {"kind", server::accept_source_name(accept->kind)}, {"how", accept->source}, {"over", accept->over}};
    }
  }

  // The server died while `what` ran: the variant fails saying when and how (the
  // failure record adds the log's last lines).
  [[noreturn]] void server_died(const ServerWatch::Death& death, const std::string& what) {
    std::string how = death.exit_code ? fmt::format("exit code {}", *death.exit_code) : "killed: no exit code";
    throw PhaseFailure{m_phase,
                       Error(fmt::format("the server died during {} ({}, after {:.1f} s)", what, how, death.after_s))};
  }

  static std::string first_error(const bench::LevelResult& level) {
    for (std::size_t k = 0; k < bench::k_failure_kinds; ++k) {
      if (level.failures[k] > 0) {
        return fmt::format("{} ({} x {})", level.first_error[k],
                           bench::failure_name(static_cast<bench::FailureKind>(k)), level.failures[k]);
      }
    }
    return "no request completed";
  }

  void write_requests(const std::string& benchmark, const std::string& content) {
    if (!m_s.failures.write(m_s.paths.requests(m_variant.name, benchmark), content)) {
      throw PhaseFailure{m_phase, Error(fmt::format("cannot keep the requests: {}", m_s.failures.first()->what()))};
    }
  }

  void run_benchmark(const experiment::BenchmarkSpec& spec) {
    begin("bench " + spec.name);
    ordered entry;
    entry["kind"] = k_kind_names[static_cast<std::size_t>(spec.kind)];
    entry["spec"] = spec.describe();
    int completed = 0;
    int failed = 0;
    std::string why_failed;
    bool interrupted = false;
    std::string requests;
    // Where the server died, when it did: what ran then, and how.
    std::optional<std::pair<std::string, ServerWatch::Death>> died;
    // What the benchmark's requests say of the figures' honesty, over all its levels.
    Honesty honesty;
    std::optional<ServerWatch> watch;
    if (spec.kind != experiment::BenchmarkKind::command) {
      watch.emplace(*m_host, m_server->files, m_server->pid, m_s.options.stop);
    }
    switch (spec.kind) {
    case experiment::BenchmarkKind::single_stream: {
      // The window opens after the warmup: its requests are not in the server's figures.
      Window window;
      bench::SingleStreamOptions options{common_options(spec, m_phase), spec.runs};
      options.common.prompt_tag = spec.name;
      options.common.stop = watch->stop_flag();
      options.common.on_request_failed = [&](bench::FailureKind kind) { watch->poke(kind); };
      options.common.hold = watch->hold_flag();
      options.common.on_measured_start = [&] { window = open_window(); };
      auto result = client().single_stream(spec, options, *watch, [&](const ClientWindow& w) {
        window = Window{w.log_from, w.metrics_before};
      });
      entry["client"] = client().describe(spec);
      if (auto death = watch->death()) {
        died.emplace(m_phase, *death);
      }
      entry["metrics"] = report::single_stream_metrics(result);
      close_window(window, entry, result.level);
      entry["result"] = bench::to_json(result);
      completed = result.level.completed;
      failed = result.level.failed;
      why_failed = first_error(result.level);
      interrupted = result.ended == bench::Ended::interrupted;
      requests_jsonl(result.level, "single-stream", requests);
      honesty.add(result.level);
      break;
    }
    case experiment::BenchmarkKind::concurrency:
    case experiment::BenchmarkKind::rate: {
      bool rate = spec.kind == experiment::BenchmarkKind::rate;
      std::size_t count = rate ? spec.rates.size() : spec.levels.size();
      const int repeats = std::max(spec.repeats, 1);
      entry["repeats"] = repeats;
      entry["levels"] = ordered::array();
      auto common = common_options(spec, m_phase);
      common.stop = watch->stop_flag();
      common.on_request_failed = [&](bench::FailureKind kind) { watch->poke(kind); };
      common.hold = watch->hold_flag();
      bool timed_out = false;
      // Every level once, then every level again: drift over the benchmark (a
      // warming GPU, a filling cache) spreads over all levels instead of landing on one.
      for (int r = 1; r <= repeats && !interrupted && !died && !timed_out; ++r) {
        for (std::size_t i = 0; i < count && !interrupted && !died; ++i) {
          check_stop();
          // One level at a time, so the server's log can be read for each level's window.
          Window window;
          std::vector<bench::LevelResult> levels;
          bench::Ended ended = bench::Ended::normally;
          auto level_common = common;
          level_common.warmup = r == 1 && i == 0 ? spec.warmup : 0;
          level_common.prompt_tag = fmt::format("{} r{}", spec.name, r);
          level_common.on_measured_start = [&] { window = open_window(); };
          const std::string repeat_text = repeats > 1 ? fmt::format(" #{}", r) : "";
          if (rate) {
            // A schedule of its own for every level and repeat, the same on every run of the experiment.
            bench::RateOptions options{level_common,
                                       {spec.rates[i]},
                                       std::chrono::duration_cast<std::chrono::milliseconds>(spec.duration),
                                       spec.max_concurrency,
                                       spec.burstiness,
                                       static_cast<std::uint64_t>(static_cast<std::size_t>(r - 1) * count + i)};
            auto result = client().rate(spec, options, *watch, [&](const ClientWindow& w) {
              window = Window{w.log_from, w.metrics_before};
            });
            levels = std::move(result.levels);
            ended = result.ended;
          } else {
            bench::ConcurrencyOptions options{level_common, {spec.levels[i]}, spec.requests};
            auto result = client().concurrency(spec, options, *watch, [&](const ClientWindow& w) {
              window = Window{w.log_from, w.metrics_before};
            });
            levels = std::move(result.levels);
            ended = result.ended;
          }
          entry["client"] = client().describe(spec);
          if (auto death = watch->death()) {
            died.emplace(rate ? fmt::format("{} at rate {:g}{}", m_phase, spec.rates[i], repeat_text)
                              : fmt::format("{} at c{}{}", m_phase, spec.levels[i], repeat_text),
                         *death);
          }
          interrupted = ended == bench::Ended::interrupted && !died;
          for (auto& level : levels) {
            ordered item;
            item["concurrency"] =
                rate ? (spec.max_concurrency ? *spec.max_concurrency : level.concurrency) : spec.levels[i];
            if (rate) {
              item["rate"] = report::finite_or_null(spec.rates[i]);
            }
            item["repeat"] = r;
            item["metrics"] = report::level_metrics(level);
            close_window(window, item, level);
            item["result"] = bench::to_json(level);
            completed += level.completed;
            failed += level.failed;
            if (level.completed == 0 && why_failed.empty()) {
              why_failed = first_error(level);
            }
            std::string phase =
                (rate ? fmt::format("rate {:g}", spec.rates[i]) : fmt::format("concurrency {}", spec.levels[i])) +
                repeat_text;
            requests_jsonl(level, phase, requests);
            honesty.add(level);
            entry["levels"].push_back(std::move(item));
          }
          if (ended == bench::Ended::timed_out) {
            warn(fmt::format("benchmark \"{}\" reached its time limit of {}; later levels did not run", spec.name,
                             util::format_duration(spec.timeout)));
            timed_out = true;
            break;
          }
        }
      }
      break;
    }
    case experiment::BenchmarkKind::command: {
      run_command(spec, entry);
      return;
    }
    }
    entry["completed"] = completed;
    entry["failed"] = failed;
    entry["status"] = completed > 0 && !died ? "ok" : "failed";
    for (auto& flag : honesty.flags(spec.name)) {
      m_result["flags"].push_back(std::move(flag));
    }
    if (died) {
      entry["server_died"] = {{"during", died->first},
                              {"exit_code", died->second.exit_code ? json(*died->second.exit_code) : json(nullptr)},
                              {"after_s", died->second.after_s}};
    }
    m_result["benchmarks"][spec.name] = entry;
    end({{"completed", completed}, {"failed", failed}});
    watch.reset();
    save_progress();
    write_requests(spec.name, requests);
    if (died) {
      server_died(died->second, died->first);
    }
    if (interrupted) {
      check_stop();
    }
    if (completed == 0) {
      throw PhaseFailure{m_phase, Error(fmt::format("every request of benchmark \"{}\" failed: {}", spec.name,
                                                    why_failed.empty() ? "no request completed" : why_failed))};
    }
  }

  void run_command(const experiment::BenchmarkSpec& spec, ordered& entry) {
    bool on_host = spec.run_on == experiment::CommandWhere::host;
    CommandContext context;
    context.variant = m_variant.name;
    context.model = m_config.model;
    // The node's address as the experiment names it ("127.0.0.1" for this machine).
    const auto* machine = experiment::machine_of(m_s.experiment, m_node);
    context.host =
        machine != nullptr && machine->kind == experiment::HostKind::ssh ? machine->hostname : std::string("127.0.0.1");
    context.port = on_host ? m_config.port : m_server->local_port;
    context.url = on_host ? fmt::format("http://127.0.0.1:{}", m_config.port) : m_server->base_url();
    remote::LocalHost local;
    remote::Host& where = on_host ? *m_host : static_cast<remote::Host&>(local);
    auto window = open_window();
    util::Duration timeout = spec.timeout > util::Duration::zero() ? spec.timeout : std::chrono::minutes{30};
    auto outcome = must(run_command_benchmark(where, spec, context, timeout), m_phase);
    entry["command"] = outcome.command_line;
    entry["on"] = on_host ? "host" : "local";
    entry["exit_code"] = outcome.exit_code;
    entry["timed_out"] = outcome.timed_out;
    entry["duration_s"] = outcome.duration_s;
    entry["metrics"] = ordered::object();
    for (const auto& [name, value] : outcome.metrics) {
      entry["metrics"][name] = report::finite_or_null(value);
    }
    entry["problems"] = outcome.problems;
    entry["stdout_tail"] = outcome.out_tail;
    entry["stderr_tail"] = outcome.err_tail;
    close_window(window, entry, bench::LevelResult{});
    bool ok = outcome.ok();
    entry["status"] = ok ? "ok" : "failed";
    m_result["benchmarks"][spec.name] = entry;
    end({{"exit_code", outcome.exit_code}});
    save_progress();
    if (!ok) {
      std::string why = outcome.timed_out           ? fmt::format("timed out after {}", util::format_duration(timeout))
                        : !outcome.problems.empty() ? outcome.problems.front()
                                                    : fmt::format("exit code {}", outcome.exit_code);
      throw PhaseFailure{m_phase, Error(fmt::format("command benchmark \"{}\" failed: {}", spec.name, why),
                                        outcome.timed_out ? ErrorKind::timed_out : ErrorKind::failed)};
    }
  }

  void flag_ineffective_speculation() {
    for (auto& [name, entry] : m_result["benchmarks"].items()) {
      std::vector<const ordered*> holders = {&entry};
      if (entry.contains("levels")) {
        for (const auto& level : entry["levels"]) {
          holders.push_back(&level);
        }
      }
      for (const auto* holder : holders) {
        if (holder->contains("metrics") && (*holder)["metrics"].contains("accept_length") &&
            (*holder)["metrics"]["accept_length"].is_number() &&
            speculation_ineffective((*holder)["metrics"]["accept_length"].get<double>())) {
          m_result["flags"].push_back(fmt::format("speculation does nothing: accept length {:.2f} in benchmark \"{}\"",
                                                  (*holder)["metrics"]["accept_length"].get<double>(), name));
          return;
        }
      }
    }
  }

  void tear_down() {
    auto started = Clock::now();
    m_s.display.phase(m_variant.name, m_index, m_total, "teardown");
    m_s.journal.record("phase_started", {{"variant", m_variant.name}, {"phase", "teardown"}});
    // A lost connection is reopened: the server must not be left holding the GPUs.
    std::optional<Error> last;
    for (int attempt = 0; attempt <= std::max(m_s.options.retries, 1); ++attempt) {
      if (attempt > 0) {
        m_s.pool.drop(m_result["host"]);
        m_host = nullptr;
        std::this_thread::sleep_for(std::min<util::Duration>(m_s.options.retry_backoff * attempt, k_max_backoff));
        auto host = m_s.pool.get(m_result["host"]);
        if (!host) {
          last = host.error();
          continue;
        }
        m_host = *host;
      }
      auto report = server::teardown(*m_host, *m_server, m_config, *m_reporter);
      if (report) {
        m_result["teardown"] = {
            {"escaped", report->escaped}, {"killed", report->killed}, {"gpus_released", report->gpus_released}};
        m_s.journal.record("torn_down", {{"variant", m_variant.name}, {"tag", m_server->tag}});
        last.reset();
        break;
      }
      last = report.error();
      if (!report.error().unreachable()) {
        break;
      }
    }
    if (last) {
      m_result["teardown"] = {{"error", last->what()}};
      warn(fmt::format("teardown failed; the server may still run (tag {}): {}", m_server->tag, last->what()));
    }
    m_result["phases"]["teardown"] = seconds_since(started);
    m_s.journal.record(
        "phase_finished",
        {{"variant", m_variant.name}, {"phase", "teardown"}, {"duration_s", seconds_since(started)}, {"ok", !last}});
  }

  void copy_log() {
    if (!m_server || m_host == nullptr) {
      return;
    }
    auto log = remote::fetch_file(*m_host, m_server->files.log());
    if (!log) {
      warn(fmt::format("could not copy the server log back: {}", log.error().what()));
    } else if (!m_s.failures.write(m_s.paths.server_log(m_variant.name), *log)) {
      warn(fmt::format("could not keep the server log: {}", m_s.failures.first()->what()));
    }
  }

  void record_failure(const PhaseFailure& failure) {
    bool interrupted = failure.error.kind() == ErrorKind::interrupted;
    m_result["status"] = interrupted ? "interrupted" : "failed";
    std::string message = failure.error.what();
    // The first line is the reason; the rest (log excerpts) stays in "failure".
    m_result["reason"] = fmt::format("{}: {}", failure.phase, message.substr(0, message.find('\n')));
    ordered f = {{"phase", failure.phase}, {"kind", error_kind_name(failure.error.kind())}, {"message", message}};
    if (m_server && m_host != nullptr && !interrupted) {
      f["log_tail"] = log_tail(*m_host, m_server->files.log());
    }
    m_result["failure"] = f;
  }

  void warn(const std::string& text) {
    m_result["warnings"].push_back(text);
    m_s.display.message(m_variant.name, Severity::warning, text);
  }

  Shared m_s;
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
  ordered m_result;
  remote::Host* m_host = nullptr;
  std::optional<server::RunningServer> m_server;
  std::optional<bench::Target> m_target;
  std::optional<BenchClient> m_client;
  std::string m_phase = "start";
  Clock::time_point m_phase_start = Clock::now();
};

} // namespace

ordered run_variant(const VariantContext& context, const experiment::PlannedVariant& planned, const std::string& node,
                    int index, int total, int attempt, bool& transient) {
  auto slot = experiment::slot_of(context.experiment, node);
  if (!slot) {
    return VariantRun(context, planned, node, index, total, attempt).run(transient);
  }
  // In a GPU slot: the slot's GPUs, and a port of its own (the variant's plus
  // the slot's index), so the slots of one host never collide.
  experiment::Variant variant = *planned.variant;
  variant.server.gpus = slot->gpus;
  variant.server.port += slot->index;
  experiment::PlannedVariant in_slot = planned;
  in_slot.variant = &variant;
  in_slot.launch = server::render_launch(variant.server, context.options.render);
  auto result = VariantRun(context, in_slot, node, index, total, attempt).run(transient);
  std::vector<std::string> ids;
  for (int gpu : slot->gpus) {
    ids.push_back(std::to_string(gpu));
  }
  result["slot"] = {{"host", slot->host},
                    {"index", slot->index},
                    {"of", slot->count},
                    {"gpus", slot->gpus},
                    {"port", variant.server.port}};
  if (!result.contains("flags")) {
    result["flags"] = ordered::array();
  }
  result["flags"].push_back(fmt::format("ran in GPU slot {} of {} on {} (GPUs {}, port {}) while other slots may have "
                                        "run: its figures may include their interference",
                                        slot->index, slot->count, slot->host, util::join(ids, ","),
                                        variant.server.port));
  return result;
}

} // namespace specctl::run::detail
