#include "commands.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/bench/calibration.hpp>
#include <specctl/bench/prompts.hpp>
#include <specctl/bench/report.hpp>
#include <specctl/bench/vllm_json.hpp>
#include <specctl/experiment/workload_spec.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <memory>

namespace specctl::cli {

namespace {

struct BenchOptions {
  std::string url;
  std::string endpoint = "completions";
  std::string model;
  std::string api_key;
  bool single_stream = false;
  int runs = 5;
  std::vector<int> levels;
  std::optional<int> requests;
  std::vector<double> rates;
  std::string duration = "60s";
  std::optional<int> max_concurrency;
  double burstiness = 1.0;
  std::uint64_t seed = 0;
  int max_tokens = 512;
  bool no_ignore_eos = false;
  bool continuous_usage = false;
  bool no_usage = false;
  std::string prompts = "seeds";
  std::string dataset;
  bool same_prompts = false;
  int warmup = 1;
  std::string timeout = "10m";
  std::string idle_timeout = "60s";
  std::string json_file;
  std::string requests_file;
  std::string vllm_file;
  bool no_calibrate = false;
  bool no_progress = false;
};

std::atomic<bool> g_bench_stop{false};

extern "C" void on_bench_interrupt(int) {
  g_bench_stop.store(true);
}

// Ctrl-C stops the benchmark gracefully (results so far are kept) while this lives.
class InterruptGuard {
public:
  InterruptGuard() {
    g_bench_stop.store(false);
    struct sigaction action {};
    action.sa_handler = &on_bench_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &m_previous_int);
    sigaction(SIGTERM, &action, &m_previous_term);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &m_previous_int, nullptr);
    sigaction(SIGTERM, &m_previous_term, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

private:
  struct sigaction m_previous_int {};
  struct sigaction m_previous_term {};
};

util::Duration duration_or_throw(const std::string& text, std::string_view flag) {
  auto parsed = util::parse_duration(text);
  if (!parsed) {
    throw Error(fmt::format("{}: {}", flag, parsed.error()), ErrorKind::bad_input);
  }
  return *parsed;
}

// Writes beside the target and renames, so a reader never sees half a file.
void write_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      throw Error(fmt::format("{}: cannot write", temporary));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    throw Error(fmt::format("{}: cannot write: {}", path, ec.message()));
  }
}

// Calls visit(level, phase, tag) for every measured level in the order they ran:
// phase "concurrency 10", tag "c10" (a file name's part); "single-stream"/"single", "rate 4/s"/"r4".
template <typename Visit> void for_each_level(const bench::Document& document, Visit&& visit) {
  if (document.single_stream) {
    visit(document.single_stream->level, std::string("single-stream"), std::string("single"));
  }
  if (document.concurrency) {
    for (const auto& level : document.concurrency->levels) {
      visit(level, fmt::format("concurrency {}", level.concurrency), fmt::format("c{}", level.concurrency));
    }
  }
  if (document.rate) {
    for (const auto& level : document.rate->levels) {
      const double rate = level.rate.value_or(0);
      visit(level, fmt::format("rate {:g}/s", rate), std::isfinite(rate) ? fmt::format("r{:g}", rate) : "rinf");
    }
  }
}

std::string records_jsonl(const bench::Document& document) {
  std::string out;
  for_each_level(document, [&](const bench::LevelResult& level, const std::string& phase, const std::string&) {
    for (const auto& record : level.records) {
      out += bench::request_to_json(record, phase).dump();
      out += '\n';
    }
  });
  return out;
}

// --save-vllm-json FILE: FILE itself for one level, else FILE's name with "-TAG"
// before its extension for each ("out.json" -> "out-c1.json", "out-c10.json").
void write_vllm_json(const std::string& file, const bench::Document& document) {
  int levels = 0;
  for_each_level(document, [&](const bench::LevelResult&, const std::string&, const std::string&) { ++levels; });
  const auto now = std::chrono::system_clock::now();
  for_each_level(document, [&](const bench::LevelResult& level, const std::string&, const std::string& tag) {
    std::filesystem::path path(file);
    if (levels > 1) {
      path.replace_filename(path.stem().string() + "-" + tag + path.extension().string());
    }
    const auto v = bench::vllm_level_of(level, document.target.model, document.request.endpoint, now);
    write_file(path.string(), bench::vllm_result_json(v).dump(2) + '\n');
  });
}

int run_bench(const BenchOptions& o) {
  bench::RunOptions common;
  common.request.endpoint = o.endpoint == "chat" ? bench::Endpoint::chat : bench::Endpoint::completions;
  common.request.max_tokens = o.max_tokens;
  common.request.ignore_eos = !o.no_ignore_eos;
  common.request.continuous_usage = o.continuous_usage;
  common.request.include_usage = !o.no_usage;
  if (o.no_usage && o.continuous_usage) {
    throw Error("--no-usage and --continuous-usage contradict each other", ErrorKind::bad_input);
  }
  common.request.timeout = duration_or_throw(o.timeout, "--timeout");
  if (common.request.timeout <= util::Duration::zero()) {
    throw Error("--timeout must be positive", ErrorKind::bad_input);
  }
  common.request.idle_timeout = duration_or_throw(o.idle_timeout, "--idle-timeout");
  if (common.request.idle_timeout <= util::Duration::zero()) {
    throw Error("--idle-timeout must be positive", ErrorKind::bad_input);
  }
  common.warmup = o.warmup;
  auto source = bench::parse_prompt_source(o.prompts);
  if (!source) {
    throw source.error();
  }
  if (!o.dataset.empty()) {
    source->kind = bench::PromptKind::workload;
    source->workload = experiment::parse_workload_text(o.dataset, ".");
  }
  auto workload = bench::load_workload(*source);
  if (!workload) {
    throw workload.error();
  }
  for (const auto& note : workload->notes) {
    std::cerr << "specctl bench: " << note << '\n';
  }
  common.prompts = std::move(workload->requests);
  common.unique_prompts = !o.same_prompts && !(source->workload && experiment::exact_lengths(*source->workload));
  // The server outlives this invocation: the time keeps its prefixes apart from an earlier run's, still cached.
  common.prompt_tag = fmt::format(
      "bench {}",
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  const auto duration = duration_or_throw(o.duration, "--duration");

  // Resolve once, up front: a wrong URL or a dead server is one clear error before anything runs.
  const bench::Target target = bench::resolve_target(bench::Target{o.url, o.model, o.api_key});
  // Only prompts with a target length are fitted; without any, nothing is sent.
  if (!o.no_calibrate) {
    auto calibrated = bench::calibrate_requests(common.prompts, target, common.request);
    if (!calibrated) {
      throw calibrated.error();
    }
    if (calibrated->calibrated > 0) {
      std::cerr << fmt::format(
          "specctl bench: {} prompts fitted to their lengths by the server's count ({}, {} counts)\n",
          calibrated->calibrated, calibrated->method, calibrated->counts);
    }
  }
  InterruptGuard interrupt_guard;
  common.stop = &g_bench_stop;
  bench::ProgressPrinter progress(stderr, bench::ProgressPrinter::detect(stderr));
  if (!o.no_progress) {
    common.on_progress = [&progress](const bench::Progress& p) { progress.update(p); };
  }

  bench::Document document{target, common.request, source->describe(), common.warmup, {}, {}, {}, {}};
  if (bench::longest_output(common.prompts, 0) > 0) {
    document.output = bench::describe_output(common.prompts, common.request.max_tokens);
  }
  const bool any_mode = o.single_stream || !o.levels.empty() || !o.rates.empty();
  if (o.single_stream || !any_mode) {
    document.single_stream = bench::run_single_stream(target, bench::SingleStreamOptions{common, o.runs});
  }
  if (!o.levels.empty() && !g_bench_stop.load()) {
    document.concurrency = bench::run_concurrency(target, bench::ConcurrencyOptions{common, o.levels, o.requests});
  }
  if (!o.rates.empty() && !g_bench_stop.load()) {
    bench::RateOptions rate{common, o.rates, duration, o.max_concurrency, o.burstiness, o.seed};
    document.rate = bench::run_rate(target, rate);
  }
  progress.clear();

  if (!o.json_file.empty()) {
    write_file(o.json_file, bench::to_json(document).dump(2) + '\n');
  }
  if (!o.requests_file.empty()) {
    write_file(o.requests_file, records_jsonl(document));
  }
  if (!o.vllm_file.empty()) {
    write_vllm_json(o.vllm_file, document);
  }
  std::cout << bench::format_document(document) << std::flush;

  if (g_bench_stop.load()) {
    throw Error("interrupted: the results above are partial", ErrorKind::interrupted);
  }
  int requests = 0;
  int failed = 0;
  const auto count = [&](const bench::LevelResult& level) {
    requests += level.requests;
    failed += level.failed;
  };
  if (document.single_stream) {
    count(document.single_stream->level);
  }
  for (const auto* levels : {document.concurrency ? &document.concurrency->levels : nullptr,
                             document.rate ? &document.rate->levels : nullptr}) {
    if (levels != nullptr) {
      for (const auto& level : *levels) {
        count(level);
      }
    }
  }
  if (failed > 0) {
    std::cerr << fmt::format("specctl: error: {} of {} requests failed (see Problems above)\n", failed, requests);
    return k_exit_failures;
  }
  return k_exit_ok;
}

} // namespace

Action setup_bench(CLI::App& command) {
  auto o = std::make_shared<BenchOptions>();
  command.add_option("--url", o->url, "Base URL of the server, e.g. http://127.0.0.1:30000")->required();
  command.add_option("--endpoint", o->endpoint, "completions (/v1/completions) or chat (/v1/chat/completions)")
      ->check(CLI::IsMember({"completions", "chat"}))
      ->default_str("completions");
  command.add_option("--model", o->model, "Model name to send (default: the first one of /v1/models)");
  command.add_option("--api-key", o->api_key, "Bearer token, if the server wants one (never printed)")
      ->envname("OPENAI_API_KEY");
  command.add_flag("--single-stream", o->single_stream, "Sequential runs, one request at a time (the default mode)");
  command.add_option("--runs", o->runs, "Single-stream runs")->default_str("5")->check(CLI::PositiveNumber);
  command.add_option("--concurrency", o->levels, "Closed-loop levels: keep C requests in flight, e.g. 1,2,5")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command.add_option("--requests", o->requests, "Requests per concurrency level (default max(2C, 10))")
      ->check(CLI::PositiveNumber);
  command.add_option("--rate", o->rates, "Open-loop request rates per second, e.g. 2,4,8 (Poisson arrivals)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command.add_option("--duration", o->duration, "Length of each rate level")->default_str("60s");
  command.add_option("--max-concurrency", o->max_concurrency, "Cap on requests in flight in rate mode")
      ->check(CLI::PositiveNumber);
  command.add_option("--burstiness", o->burstiness, "Gamma shape of the arrival gaps: 1 Poisson, <1 burstier")
      ->default_str("1")
      ->check(CLI::PositiveNumber);
  command.add_option("--seed", o->seed, "Seed of the arrival times")->default_str("0");
  command.add_option("--max-tokens", o->max_tokens, "Output tokens per request")
      ->default_str("512")
      ->check(CLI::PositiveNumber);
  command.add_flag("--no-ignore-eos", o->no_ignore_eos, "Let the model stop early (output length then varies)");
  command.add_flag("--continuous-usage", o->continuous_usage,
                   "Ask for usage on every chunk (vLLM, SGLang) to count each chunk's tokens exactly");
  command.add_flag("--no-usage", o->no_usage,
                   "Send no stream_options (for servers that refuse it); tokens are then counted from chunks");
  command.add_option("--prompts", o->prompts, "seeds (= builtin), long, synthetic:N (N input tokens), or a file")
      ->default_str("seeds");
  command
      .add_option(
          "--dataset", o->dataset,
          "A workload, written as in an experiment's prompts: specdec, '{sharegpt: {file: F, num_prompts: N}}', "
          "'{jsonl: {file: F}}', '{random: {input_tokens: N, output_tokens: N}}', '{shared_prefix: {...}}' "
          "(docs/bench.md)")
      ->excludes("--prompts");
  command.add_flag("--no-calibrate", o->no_calibrate,
                   "Send random and shared-prefix prompts as generated, without fitting them to the server's token "
                   "count");
  command.add_flag("--same-prompts", o->same_prompts,
                   "Send each prompt as it is (by default every request's prompt starts with a prefix of its own, "
                   "so no answer comes from the server's prefix cache)");
  command.add_option("--warmup", o->warmup, "Requests sent and discarded before each mode")
      ->default_str("1")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--timeout", o->timeout, "Deadline of each request")->default_str("10m");
  command
      .add_option("--idle-timeout", o->idle_timeout, "A request with no byte of answer for this long fails as stalled")
      ->default_str("60s");
  command.add_option("--json", o->json_file, "Write the results as a versioned JSON document");
  command.add_option("--requests-jsonl", o->requests_file, "Write one JSON line per request, with chunk timings");
  command.add_option("--save-vllm-json", o->vllm_file,
                     "Write each level as vLLM's `bench serve --save-result` JSON (FILE for one level, else "
                     "FILE-c10.json, FILE-r4.json, FILE-single.json ...)");
  command.add_flag("--no-progress", o->no_progress, "No progress line on stderr");
  command.footer("Modes run in this order: --single-stream, --concurrency, --rate (single stream when none is "
                 "given). Exit 0 when every request succeeded, 1 when some failed, 2 for bad input, 130 when "
                 "interrupted (partial results are still written).");
  return [o] { return run_bench(*o); };
}

} // namespace specctl::cli
