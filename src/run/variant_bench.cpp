#include "bench_tally.hpp"
#include "variant_run.hpp"

#include <specctl/bench/calibration.hpp>
#include <specctl/bench/prompts.hpp>
#include <specctl/bench/report.hpp>
#include <specctl/bench/vllm_json.hpp>
#include <specctl/http/get.hpp>
#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/local_host.hpp>
#include <specctl/report/results.hpp>
#include <specctl/run/command_bench.hpp>
#include <specctl/run/server_metrics.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/hash.hpp>
#include <specctl/util/parse.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <mutex>

namespace specctl::run::detail {

namespace {

// The most of a benchmark window's server log that is read for its metrics.
constexpr std::size_t k_max_window_bytes = 64 * 1024 * 1024;
// The warmup request: enough tokens to go through prefill and decode once.
constexpr int k_warmup_tokens = 16;
// A command benchmark without a timeout of its own.
constexpr util::Duration k_command_timeout = std::chrono::minutes{30};

std::optional<std::uint64_t> log_size(remote::Host& host, const std::string& path) {
  auto result = host.exec(fmt::format("wc -c < {} 2>/dev/null || echo 0", util::shell_quote(path)));
  if (!result || result->exit_code != 0) {
    return std::nullopt;
  }
  return util::parse_number<std::uint64_t>(result->out);
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
  } else if (spec.workload) {
    source.kind = bench::PromptKind::workload;
    source.workload = spec.workload;
  } else if (spec.builtin == "long") {
    source.kind = bench::PromptKind::long_set;
  }
  return source;
}

} // namespace

void requests_jsonl(const bench::LevelResult& level, std::string_view phase, std::string& out) {
  for (const auto& record : level.records) {
    out += bench::request_to_json(record, phase).dump(-1, ' ', false, json::error_handler_t::replace);
    out += '\n';
  }
}

void Honesty::workload(const std::vector<bench::WorkloadRequest>& requests) {
  shared_on_purpose =
      std::any_of(requests.begin(), requests.end(), [](const bench::WorkloadRequest& r) { return r.shared_bytes > 0; });
}

void Honesty::add(bench::LevelResult& level) {
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

ordered Honesty::lengths() const {
  std::vector<int> input;
  std::vector<int> output;
  for (const auto& record : records) {
    if (!record.ok()) {
      continue;
    }
    if (record.prompt_tokens >= 0) {
      input.push_back(record.prompt_tokens);
    }
    output.push_back(record.output_tokens);
  }
  ordered out = ordered::object();
  const auto put = [&out](const char* key, const std::vector<int>& values) {
    if (auto h = bench::length_histogram(values)) {
      out[key] = {{"lo", h->lo}, {"width", h->width}, {"counts", h->counts}};
    }
  };
  put("input_tokens", input);
  put("output_tokens", output);
  return out;
}

std::vector<std::string> Honesty::flags(std::string_view benchmark) const {
  std::vector<std::string> out;
  // A workload that shares a prefix on purpose (shared_prefix groups, random's
  // prefix_tokens) measures the cache: its hits are the point, not a flattery.
  if (auto flag = bench::prefix_cache_flag(benchmark, prompt_tokens, cached_tokens); flag && !shared_on_purpose) {
    out.push_back(std::move(*flag));
  }
  if (auto flag = bench::repeated_acceptance_flag(benchmark, records)) {
    out.push_back(std::move(*flag));
  }
  return out;
}

std::string first_error(const bench::LevelResult& level) {
  for (std::size_t k = 0; k < bench::k_failure_kinds; ++k) {
    if (level.failures[k] > 0) {
      return fmt::format("{} ({} x {})", level.first_error[k], bench::failure_name(static_cast<bench::FailureKind>(k)),
                         level.failures[k]);
    }
  }
  return "no request completed";
}

bench::RunOptions VariantRun::common_options(const experiment::BenchmarkSpec& spec, const std::string& label,
                                             ordered* workload) {
  bench::RunOptions common;
  common.request.endpoint = to_bench(spec.endpoint);
  common.request.max_tokens = spec.max_tokens;
  common.request.ignore_eos = spec.ignore_eos;
  common.request.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(spec.idle_timeout);
  auto base = std::filesystem::path(m_s.experiment.file).parent_path();
  // A workload source was made when the experiment was read: those requests, not a second reading.
  auto loaded = spec.prompts.loaded ? std::expected<bench::Workload, Error>(*spec.prompts.loaded)
                                    : bench::load_workload(prompt_source(spec.prompts, base));
  if (!loaded) {
    throw PhaseFailure{label, Error(loaded.error().what(), ErrorKind::bad_input)};
  }
  if (workload != nullptr) {
    // What a colleague needs to send exactly these requests again.
    *workload = loaded->provenance.to_json();
    (*workload)["described"] = bench::describe(*loaded);
    (*workload)["notes"] = loaded->notes;
    // Prompts of a target length are fitted to the server's own count, before anything
    // is timed; without any, nothing is sent.
    auto calibrated = calibrate(loaded->requests, common.request);
    if (calibrated.calibrated > 0) {
      (*workload)["calibration"] = {{"method", calibrated.method},
                                    {"offset", calibrated.offset},
                                    {"prompts", calibrated.calibrated},
                                    {"counts", calibrated.counts},
                                    {"cached", calibrated.cached}};
    }
  }
  common.prompts = std::move(loaded->requests);
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
BenchClient& VariantRun::client() {
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
    setup.flag = [this](const std::string& text) { m_result.flag(text); };
    setup.journal = [this](std::string_view event, json fields) { m_s.journal.record(event, std::move(fields)); };
    m_client.emplace(std::move(setup));
  }
  return *m_client;
}

const bench::Target& VariantRun::target() {
  if (!m_target) {
    try {
      m_target = bench::resolve_target(bench::Target{m_server->base_url(), "", ""});
    } catch (const Error& e) {
      throw PhaseFailure{m_phase, e};
    }
  }
  return *m_target;
}

void VariantRun::run_warmup() {
  if (m_variant.benchmarks.empty()) {
    return;
  }
  const auto* first = m_s.experiment.find_benchmark(m_variant.benchmarks.front());
  begin("warmup");
  check_port_is_ours();
  experiment::BenchmarkSpec spec =
      first != nullptr && first->kind != experiment::BenchmarkKind::command ? *first : experiment::BenchmarkSpec{};
  spec.max_tokens = std::min(spec.max_tokens, k_warmup_tokens);
  spec.timeout = m_config.warmup_timeout;
  bench::SingleStreamOptions options{common_options(spec, "warmup"), 1};
  options.common.prompt_tag = "warmup";
  options.common.warmup = 0;
  // It shares nothing with a measured request, not even a workload's shared prefix:
  // a verbatim prompt would be in the server's cache when its turn comes.
  options.common.unique_prompts = true;
  for (auto& request : options.common.prompts) {
    request.shared_bytes = 0;
  }
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

// The Prometheus text of the template's first prometheus source, when it has one.
std::optional<std::string> VariantRun::scrape_metrics() {
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

VariantRun::Window VariantRun::open_window(TelemetryLabel label) {
  Window window{log_size(*m_host, m_server->files.log()), scrape_metrics(), std::move(label), false, {}};
  start_sampling(window);
  return window;
}

VariantRun::Window VariantRun::client_window(const ClientWindow& opened, TelemetryLabel label) {
  Window window{opened.log_from, opened.metrics_before, std::move(label), false, {}};
  start_sampling(window);
  return window;
}

// The window's server metrics and accept length into `holder`: the log from
// its size at the opening to now, in one read (up to k_max_window_bytes), and
// the counters' difference; the accept length names its source.
void VariantRun::close_window(Window& window, ordered& holder, const bench::LevelResult& level) {
  take_samples(window);
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
  telemetry_figures(window, holder, level);
}

void VariantRun::write_requests(const std::string& benchmark, const std::string& content) {
  if (!m_s.failures.write(m_s.paths.requests(m_variant.name, benchmark), content)) {
    throw PhaseFailure{m_phase, Error(fmt::format("cannot keep the requests: {}", m_s.failures.first()->what()))};
  }
}

void VariantRun::run_benchmark(const experiment::BenchmarkSpec& spec) {
  begin("bench " + spec.name);
  check_port_is_ours();
  ordered entry;
  entry["kind"] = report::benchmark_kind_name(spec.kind);
  entry["spec"] = spec.describe();
  BenchTally tally;
  std::optional<ServerWatch> watch;
  if (spec.kind != experiment::BenchmarkKind::command) {
    watch.emplace(*m_host, m_server->files, m_server->pid, m_s.options.stop);
  }
  switch (spec.kind) {
  case experiment::BenchmarkKind::single_stream: {
    // The window opens after the warmup: its requests are not in the server's figures.
    Window window;
    bench::SingleStreamOptions options{common_options(spec, m_phase, &entry["workload"]), spec.runs};
    options.common.prompt_tag = spec.name;
    options.common.stop = watch->stop_flag();
    options.common.on_request_failed = [&](bench::FailureKind kind) { watch->poke(kind); };
    options.common.hold = watch->hold_flag();
    const TelemetryLabel label{spec.name, "single", 1};
    options.common.on_measured_start = [&] { window = open_window(label); };
    tally.categories = bench::categories_of(options.common.prompts);
    tally.honesty.workload(options.common.prompts);
    const auto parts = windows_per_category() ? bench::split_by_category(options.common.prompts, spec.runs)
                                              : std::vector<bench::CategoryPart>{};
    auto result = parts.empty()
                      ? client().single_stream(spec, options, *watch,
                                               [&](const ClientWindow& w) { window = client_window(w, label); })
                      : single_stream_by_category(spec, options, parts, *watch, window, tally.accepts);
    entry["client"] = client().describe(spec);
    if (auto death = watch->death()) {
      tally.died.emplace(m_phase, *death);
    }
    entry["metrics"] = report::single_stream_metrics(result);
    close_window(window, entry, result.level);
    add_categories(entry, result.level, tally.categories, tally.accepts);
    entry["result"] = bench::to_json(result);
    tally.completed = result.level.completed;
    tally.failed = result.level.failed;
    tally.why_failed = first_error(result.level);
    tally.interrupted = result.ended == bench::Ended::interrupted;
    requests_jsonl(result.level, "single-stream", tally.requests);
    write_vllm_level(spec, "single", result.level);
    tally.honesty.add(result.level);
    break;
  }
  case experiment::BenchmarkKind::concurrency:
  case experiment::BenchmarkKind::rate:
    run_levels(spec, entry, *watch, tally);
    break;
  case experiment::BenchmarkKind::command: {
    run_command(spec, entry);
    return;
  }
  }
  const auto& died = tally.died;
  entry["completed"] = tally.completed;
  entry["failed"] = tally.failed;
  // Cut short by Ctrl-C, a benchmark keeps what it measured but is not complete:
  // --resume measures it again.
  entry["status"] = report::status_name(tally.completed == 0 || died ? report::VariantStatus::failed
                                        : tally.interrupted          ? report::VariantStatus::interrupted
                                                                     : report::VariantStatus::ok);
  if (auto lengths = tally.honesty.lengths(); !lengths.empty()) {
    entry["lengths"] = std::move(lengths);
  }
  for (auto& flag : tally.honesty.flags(spec.name)) {
    m_result.flag(std::move(flag));
  }
  if (died) {
    entry["server_died"] = {{"during", died->first},
                            {"exit_code", died->second.exit_code ? json(*died->second.exit_code) : json(nullptr)},
                            {"after_s", died->second.after_s}};
  }
  m_result.benchmark(spec.name, std::move(entry));
  end({{"completed", tally.completed}, {"failed", tally.failed}});
  watch.reset();
  save_progress();
  write_requests(spec.name, tally.requests);
  if (died) {
    server_died(died->second, died->first);
  }
  if (tally.interrupted) {
    check_stop();
  }
  if (tally.completed == 0) {
    throw PhaseFailure{m_phase,
                       Error(fmt::format("every request of benchmark \"{}\" failed: {}", spec.name,
                                         tally.why_failed.empty() ? "no request completed" : tally.why_failed))};
  }
}

void VariantRun::run_command(const experiment::BenchmarkSpec& spec, ordered& entry) {
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
  auto window = open_window({spec.name, "command", 1});
  util::Duration timeout = spec.timeout > util::Duration::zero() ? spec.timeout : k_command_timeout;
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
  entry["status"] = report::status_name(ok ? report::VariantStatus::ok : report::VariantStatus::failed);
  m_result.benchmark(spec.name, std::move(entry));
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

void VariantRun::flag_ineffective_speculation() {
  for (const auto& [name, entry] : m_result.doc()["benchmarks"].items()) {
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
        m_result.flag(fmt::format("speculation does nothing: accept length {:.2f} in benchmark \"{}\"",
                                  (*holder)["metrics"]["accept_length"].get<double>(), name));
        return;
      }
    }
  }
}

} // namespace specctl::run::detail
