#include "bench_client.hpp"

#include <specctl/bench/stats.hpp>
#include <specctl/bench/wire.hpp>
#include <specctl/http/get.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/run/bench_job.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <charconv>
#include <csignal>
#include <fmt/format.h>
#include <thread>

namespace specctl::run::detail {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// A host job's files are looked at this often; one round trip each.
constexpr std::chrono::milliseconds k_job_poll{500};
// After the benchmark's own time limit, how long a job may take to write its result.
constexpr std::chrono::minutes k_job_grace{2};
// A job asked to stop (TERM) that has not ended by then is killed.
constexpr std::chrono::seconds k_job_term_grace{30};
// Progress bytes read per poll.
constexpr std::size_t k_progress_bytes = 256 * 1024;
// The tunnel's round trip: the median of this many small GETs.
constexpr int k_rtt_samples = 3;
constexpr std::chrono::seconds k_rtt_timeout{5};
// A benchmark without a deadline of its own gives up on its job after this long.
constexpr std::chrono::hours k_no_deadline{24};
// Reading the job's result back: each try's limit, and the pause between tries.
constexpr std::chrono::minutes k_result_read_timeout{5};
constexpr std::chrono::seconds k_result_read_pause{1};

// A job's status from one round trip: whether its result is written (its last
// act: a shell TERMed with it writes no exit code), its exit code once it
// ended, and new progress bytes.
struct JobPoll {
  bool result_written = false;
  std::optional<int> exit_code;
  std::string progress;
};

std::expected<JobPoll, Error> poll_job(remote::Host& host, const remote::RunFiles& files, const std::string& progress,
                                       const std::string& result, std::uint64_t offset) {
  static constexpr std::string_view k_marker = "--specctl-job--";
  auto ran = host.exec(
      fmt::format("if [ -s {} ]; then r=1; else r=0; fi; printf '%s %s %s\\n' {} \"$r\" \"$(cat {} 2>/dev/null)\"; "
                  "tail -c +{} {} 2>/dev/null | head -c {}",
                  util::shell_quote(result), k_marker, util::shell_quote(files.exit()), offset + 1,
                  util::shell_quote(progress), k_progress_bytes));
  if (!ran) {
    return std::unexpected(ran.error());
  }
  if (ran->timed_out || !ran->out.starts_with(k_marker)) {
    return std::unexpected(Error(fmt::format("{}: no answer about the benchmark job", host.describe()),
                                 ran->timed_out ? ErrorKind::timed_out : ErrorKind::failed));
  }
  JobPoll poll;
  auto newline = ran->out.find('\n');
  std::string status = util::trim(ran->out.substr(k_marker.size(), newline - k_marker.size()));
  poll.result_written = status.starts_with('1');
  std::string code = util::trim(status.substr(std::min<std::size_t>(1, status.size())));
  if (!code.empty()) {
    int value = 0;
    if (auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), value); ec == std::errc()) {
      poll.exit_code = value;
    }
  }
  poll.progress = newline == std::string::npos ? "" : ran->out.substr(newline + 1);
  return poll;
}

std::string level_label(const experiment::BenchmarkSpec& spec, const bench::LevelResult* level) {
  if (level == nullptr) {
    return fmt::format("benchmark \"{}\"", spec.name);
  }
  if (level->rate) {
    return fmt::format("benchmark \"{}\" at rate {:g}", spec.name, *level->rate);
  }
  if (spec.kind == experiment::BenchmarkKind::single_stream) {
    return fmt::format("benchmark \"{}\"", spec.name);
  }
  return fmt::format("benchmark \"{}\" at c{}", spec.name, level->concurrency);
}

template <typename Result> std::vector<bench::LevelResult*> levels_of(Result& result) {
  std::vector<bench::LevelResult*> out;
  if constexpr (std::is_same_v<Result, bench::SingleStreamResult>) {
    out.push_back(&result.level);
  } else {
    for (auto& level : result.levels) {
      out.push_back(&level);
    }
  }
  return out;
}

constexpr ModeCalls<bench::SingleStreamResult, bench::SingleStreamOptions> k_single_stream{
    BenchJob::Mode::single_stream, bench::run_single_stream, bench::single_stream_from_wire, "single_stream"};
constexpr ModeCalls<bench::ConcurrencyResult, bench::ConcurrencyOptions> k_concurrency{
    BenchJob::Mode::concurrency, bench::run_concurrency, bench::concurrency_from_wire, "concurrency"};
constexpr ModeCalls<bench::RateResult, bench::RateOptions> k_rate{BenchJob::Mode::rate, bench::run_rate,
                                                                  bench::rate_from_wire, "rate"};

} // namespace

BenchClient::BenchClient(Setup setup) : m_s(std::move(setup)) {}

bool BenchClient::tunnelled() const {
  return m_s.host->over_ssh();
}

int BenchClient::reconnects() const {
  return m_s.host->reconnect_count();
}

BenchClient::Where BenchClient::where_for(const experiment::BenchmarkSpec& spec) {
  if (spec.name != m_benchmark) {
    m_benchmark = spec.name;
    m_failed_polls = 0;
    m_reconnects_seen = 0;
    m_remeasured = 0;
  }
  const auto wanted = spec.client.value_or(m_s.default_where);
  if (!tunnelled()) {
    return {false, "", "the server runs on this machine"};
  }
  if (wanted == experiment::ClientWhere::local) {
    return {false, "", spec.client ? "client: local" : "bench: {client: local}"};
  }
  const HostBinary found = host_binary(*m_s.host, m_s.node, m_s.state_dir);
  if (!found.ok) {
    std::string why = fmt::format("the benchmark cannot run on {}: {}", m_s.host->describe(), found.why);
    if (!m_local_fallback) {
      m_s.warn(why + "; its client runs here, through the SSH tunnel, whose round trip is then in every figure");
      m_local_fallback = Where{false, "", why};
    }
    return *m_local_fallback;
  }
  if (found.fresh) {
    m_s.journal("bench_client_ready", {{"host", m_s.node}, {"binary", found.binary}, {"why", found.why}});
  }
  return {true, found.binary, found.why, found.command};
}

json BenchClient::describe(const experiment::BenchmarkSpec& spec) {
  auto where = where_for(spec);
  json out = {{"ran_on", where.on_host ? "host" : "local"}, {"why", where.why}};
  if (where.on_host) {
    out["binary"] = where.binary;
  }
  if (tunnelled()) {
    out["control_connection"] = {
        {"failed_or_slow_polls", m_failed_polls}, {"reconnects", m_reconnects_seen}, {"remeasured", m_remeasured}};
  }
  return out;
}

std::optional<double> BenchClient::tunnel_rtt() {
  if (!tunnelled()) {
    return std::nullopt;
  }
  std::vector<double> samples;
  http::GetOptions options;
  options.timeout = k_rtt_timeout;
  options.connect_timeout = k_rtt_timeout;
  const std::string url = m_s.target().url + "/v1/models";
  for (int i = 0; i < k_rtt_samples; ++i) {
    const auto asked = Clock::now();
    auto response = http::get(url, options);
    if (response) {
      samples.push_back(std::chrono::duration<double, std::milli>(Clock::now() - asked).count());
    }
  }
  if (samples.empty()) {
    return std::nullopt;
  }
  return bench::median(samples);
}

template <typename Result, typename Measure>
Result BenchClient::measure_locally(const experiment::BenchmarkSpec& spec, const std::string& label, ServerWatch& watch,
                                    Measure&& measure) {
  std::vector<std::string> discarded;
  for (int attempt = 0;; ++attempt) {
    const int troubles_before = watch.troubles();
    const int reconnects_before = reconnects();
    auto rtt_before = tunnel_rtt();
    Result result = measure(attempt);
    auto rtt_after = tunnel_rtt();
    const int troubles = watch.troubles() - troubles_before;
    const int dropped = reconnects() - reconnects_before;
    m_failed_polls += troubles;
    m_reconnects_seen += dropped;
    std::vector<double> rtts;
    for (const auto& rtt : {rtt_before, rtt_after}) {
      if (rtt) {
        rtts.push_back(*rtt);
      }
    }
    auto levels = levels_of(result);
    for (auto* level : levels) {
      if (!rtts.empty()) {
        level->tunnel_rtt_ms = bench::median(rtts);
      }
      level->remeasured = discarded;
    }
    const bool stopped = watch.stop_flag()->load() || result.ended != bench::Ended::normally;
    if ((troubles == 0 && dropped == 0) || !tunnelled() || stopped) {
      return result;
    }
    const auto* first = levels.empty() ? nullptr : levels.front();
    const std::string where = level_label(spec, first);
    const std::string trouble =
        fmt::format("the control connection to {} {} during the level ({} failed or slow round trips, {} reconnects)",
                    m_s.host->describe(), dropped > 0 ? "dropped" : "stalled", troubles, dropped);
    std::string figures = first != nullptr
                              ? fmt::format("{:.1f} tok/s, TTFT p99 {:.0f} ms", first->output_tok_s, first->ttft_ms.p99)
                              : std::string("its figures");
    m_s.journal("level_disturbed", {{"variant", m_s.variant},
                                    {"benchmark", spec.name},
                                    {"level", label},
                                    {"attempt", attempt + 1},
                                    {"failed_or_slow_polls", troubles},
                                    {"reconnects", dropped},
                                    {"discarded", attempt == 0}});
    if (attempt > 0) {
      m_s.flag(fmt::format("{}: {} again when it was measured again; its figures hold the SSH path's trouble", where,
                           trouble));
      return result;
    }
    discarded.push_back(fmt::format("{}: {} were discarded", trouble, figures));
    m_s.warn(fmt::format("{}: {}; measuring it again", where, trouble));
    ++m_remeasured;
  }
}

template <typename Result, typename Options>
Result BenchClient::run_mode(const experiment::BenchmarkSpec& spec, const Options& options, const std::string& label,
                             BenchJob job, ServerWatch& watch, const WindowFn& window,
                             const ModeCalls<Result, Options>& mode) {
  auto where = where_for(spec);
  if (!where.on_host) {
    return measure_locally<Result>(spec, label, watch, [&](int attempt) {
      auto again = options;
      if (attempt > 0) {
        again.common.warmup = 0;
        // Prompts of their own: the discarded try's are in the server's prefix cache.
        again.common.prompt_tag += fmt::format(" try{}", attempt + 1);
      }
      return mode.run_here(m_s.target(), again);
    });
  }
  job.mode = mode.job_mode;
  auto result = run_job(spec, where.command, std::move(job), options.common, watch, window);
  return mode.from_wire(result.at(mode.key));
}

bench::SingleStreamResult BenchClient::single_stream(const experiment::BenchmarkSpec& spec,
                                                     const bench::SingleStreamOptions& options, ServerWatch& watch,
                                                     const WindowFn& window) {
  BenchJob job;
  job.runs = options.runs;
  return run_mode(spec, options, "single-stream", std::move(job), watch, window, k_single_stream);
}

bench::ConcurrencyResult BenchClient::concurrency(const experiment::BenchmarkSpec& spec,
                                                  const bench::ConcurrencyOptions& options, ServerWatch& watch,
                                                  const WindowFn& window) {
  const std::string label =
      options.levels.size() == 1 ? fmt::format("concurrency {}", options.levels.front()) : "levels";
  BenchJob job;
  job.levels = options.levels;
  job.requests = options.requests;
  return run_mode(spec, options, label, std::move(job), watch, window, k_concurrency);
}

bench::RateResult BenchClient::rate(const experiment::BenchmarkSpec& spec, const bench::RateOptions& options,
                                    ServerWatch& watch, const WindowFn& window) {
  const std::string label = options.rates.size() == 1 ? fmt::format("rate {:g}", options.rates.front()) : "rates";
  BenchJob job;
  job.rates = options.rates;
  job.duration = options.duration;
  job.max_concurrency = options.max_concurrency;
  job.burstiness = options.burstiness;
  job.seed = options.seed;
  return run_mode(spec, options, label, std::move(job), watch, window, k_rate);
}

json BenchClient::run_job(const experiment::BenchmarkSpec& spec, const std::vector<std::string>& command, BenchJob job,
                          const bench::RunOptions& common, ServerWatch& watch, const WindowFn& window) {
  remote::Host& host = *m_s.host;
  const std::string dir = fmt::format("{}/bench-{}-{}", m_s.server_files.dir, ++m_jobs, spec.name);
  const remote::RunFiles files{dir};
  // The mode's fields are set; the rest is what every mode shares.
  job.url = fmt::format("http://127.0.0.1:{}", m_s.server_port);
  // The model the warmup found through the tunnel, so both ends ask for the same.
  try {
    job.model = m_s.target().model;
  } catch (const Error&) {
    job.model.clear();
  }
  set_common(job, common);
  if (common.deadline) {
    job.deadline_s = std::max(0.0, std::chrono::duration<double>(*common.deadline - Clock::now()).count());
  }
  job.server_dir = m_s.server_files.dir;
  job.server_pid = m_s.server_pid;
  job.server_log = m_s.server_files.log();
  job.metrics_path = m_s.metrics_path;
  job.progress_file = dir + "/progress.jsonl";
  job.result_file = dir + "/result.json";
  const std::string job_file = dir + "/job.json";

  if (auto written = host.write_file(job_file, to_json(job).dump(-1, ' ', false, json::error_handler_t::replace));
      !written) {
    throw Error(fmt::format("cannot hand the benchmark to {}: {}", host.describe(), written.error().what()),
                written.error().kind());
  }
  const std::string tag = m_s.server_tag + "-bench";
  std::vector<std::string> argv = command;
  argv.insert(argv.end(), {"bench-job", job_file});
  auto pid = remote::start_detached(host, {std::move(argv), {}, dir, tag});
  if (!pid) {
    throw Error(fmt::format("cannot start the benchmark on {}: {}", host.describe(), pid.error().what()),
                pid.error().kind());
  }
  m_s.journal("bench_job_started", {{"variant", m_s.variant},
                                    {"benchmark", spec.name},
                                    {"dir", dir},
                                    {"pid", *pid},
                                    {"command", util::join(command, " ")}});

  const auto started = Clock::now();
  const auto give_up = (common.deadline ? *common.deadline : started + k_no_deadline) + k_job_grace;
  std::uint64_t offset = 0;
  std::string partial;
  // Plain time points and flags: g++ 12 sees optional time points as maybe uninitialized.
  bool termed = false;
  Clock::time_point termed_at{};
  bool in_trouble = false;
  Clock::time_point trouble_since{};
  const int reconnects_before = reconnects();
  std::optional<int> exit_code;
  while (true) {
    const auto asked = Clock::now();
    if (watch.stop_flag()->load() && !termed) {
      // Ctrl-C or a dead server: the job records what is in flight as interrupted and writes its result.
      (void)remote::signal_group(host, *pid, SIGTERM);
      termed = true;
      termed_at = Clock::now();
    }
    auto poll = poll_job(host, files, job.progress_file, job.result_file, offset);
    const bool slow = Clock::now() - asked > k_slow_watch_check;
    if (!poll || slow) {
      ++m_failed_polls;
      if (!in_trouble) {
        in_trouble = true;
        trouble_since = asked;
        m_s.journal("bench_job_unreachable", {{"variant", m_s.variant},
                                              {"benchmark", spec.name},
                                              {"why", poll ? "a round trip took over 3 s" : poll.error().what()}});
      }
    }
    if (poll) {
      if (in_trouble && !slow) {
        m_s.journal("bench_job_reachable",
                    {{"variant", m_s.variant},
                     {"benchmark", spec.name},
                     {"after_s", std::chrono::duration<double>(Clock::now() - trouble_since).count()},
                     {"reconnects", reconnects() - reconnects_before}});
        in_trouble = false;
      }
      offset += poll->progress.size();
      partial += poll->progress;
      std::optional<bench::Progress> last;
      for (auto newline = partial.find('\n'); newline != std::string::npos; newline = partial.find('\n')) {
        auto line = json::parse(partial.substr(0, newline), nullptr, false);
        partial.erase(0, newline + 1);
        if (line.is_object()) {
          try {
            last = bench::progress_from_wire(line);
          } catch (const Error&) {
            // A progress line is for people: a bad one is skipped.
          }
        }
      }
      if (last && common.on_progress) {
        common.on_progress(*last);
      }
      if (poll->exit_code || poll->result_written) {
        exit_code = poll->exit_code;
        break;
      }
    }
    if (termed && Clock::now() - termed_at > k_job_term_grace) {
      (void)remote::signal_group(host, *pid, SIGKILL);
      break;
    }
    if (Clock::now() > give_up) {
      (void)remote::signal_group(host, *pid, SIGKILL);
      throw Error(fmt::format("the benchmark on {} did not end within its time limit and {} more; stopped it ({})",
                              host.describe(), util::format_duration(k_job_grace), dir),
                  ErrorKind::timed_out);
    }
    std::this_thread::sleep_for(
        std::max<Clock::duration>(Clock::duration::zero(), k_job_poll - (Clock::now() - asked)));
  }
  m_reconnects_seen += reconnects() - reconnects_before;

  // The result is read with a connection that works again: a few tries.
  std::expected<remote::CommandResult, Error> read = std::unexpected(Error("not read"));
  constexpr int k_read_tries = 5;
  for (int i = 0; i < k_read_tries; ++i) {
    read = host.exec(fmt::format("cat {}", util::shell_quote(job.result_file)), k_result_read_timeout);
    if (read && !read->timed_out) {
      break;
    }
    std::this_thread::sleep_for(k_result_read_pause);
  }
  if (!read || read->timed_out || read->exit_code != 0) {
    auto tail = host.exec(fmt::format("tail -n 5 {} 2>/dev/null", util::shell_quote(files.log())));
    throw Error(fmt::format("the benchmark on {} ended{} without a result in {}{}", host.describe(),
                            exit_code ? fmt::format(" (exit code {})", *exit_code) : std::string(" (killed)"), dir,
                            tail && !tail->out.empty() ? ":\n" + tail->out : std::string()));
  }
  json result = json::parse(read->out, nullptr, false);
  if (!result.is_object() || result.value("format", "") != k_bench_job_result_format) {
    throw Error(fmt::format("{}: {} is not a benchmark result", host.describe(), job.result_file));
  }
  m_s.journal("bench_job_finished", {{"variant", m_s.variant},
                                     {"benchmark", spec.name},
                                     {"dir", dir},
                                     {"exit_code", exit_code ? json(*exit_code) : json(nullptr)},
                                     {"duration_s", std::chrono::duration<double>(Clock::now() - started).count()}});
  if (result.contains("error")) {
    const auto& error = result["error"];
    throw Error(fmt::format("the benchmark on {}: {}", host.describe(), error.value("message", "failed")),
                error.value("kind", "") == "bad_input" ? ErrorKind::bad_input : ErrorKind::failed);
  }
  const json& opened = result["window"];
  ClientWindow w;
  if (opened.is_object() && opened.contains("log_from") && opened["log_from"].is_number_unsigned()) {
    w.log_from = opened["log_from"].get<std::uint64_t>();
  }
  if (opened.is_object() && opened.contains("metrics_before") && opened["metrics_before"].is_string()) {
    w.metrics_before = opened["metrics_before"].get<std::string>();
  }
  if (window) {
    window(w);
  }
  return result;
}

} // namespace specctl::run::detail
