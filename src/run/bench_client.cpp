#include "bench_client.hpp"

#include <specctl/bench/stats.hpp>
#include <specctl/bench/wire.hpp>
#include <specctl/http/get.hpp>
#include <specctl/remote/ssh_host.hpp>
#include <specctl/run/bench_job.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/hash.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <charconv>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <gnu/libc-version.h>
#include <sys/utsname.h>

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
// Probing and checking a copy of specctl on a host.
constexpr util::Duration k_probe_timeout = std::chrono::seconds{30};
// How much of a file's name the content fingerprint takes.
constexpr std::size_t k_hash_chars = 12;
// A benchmark without a deadline of its own gives up on its job after this long.
constexpr std::chrono::hours k_no_deadline{24};
// Reading the job's result back: each try's limit, and the pause between tries.
constexpr std::chrono::minutes k_result_read_timeout{5};
constexpr std::chrono::seconds k_result_read_pause{1};

std::string version_line() {
  return std::string("specctl ") + SPECCTL_VERSION;
}

std::string first_line(const std::string& text) {
  return util::trim(text.substr(0, text.find('\n')));
}

// "glibc 2.36" or "2.36" as (2, 36); nullopt for anything else.
std::optional<std::pair<int, int>> glibc_of(std::string_view text) {
  auto words = std::string(util::trim(std::string(text)));
  auto space = words.rfind(' ');
  std::string_view version =
      space == std::string::npos ? std::string_view(words) : std::string_view(words).substr(space + 1);
  auto dot = version.find('.');
  if (dot == std::string_view::npos) {
    return std::nullopt;
  }
  int major = 0;
  int minor = 0;
  auto [end1, ec1] = std::from_chars(version.data(), version.data() + dot, major);
  auto [end2, ec2] = std::from_chars(version.data() + dot + 1, version.data() + version.size(), minor);
  if (ec1 != std::errc() || ec2 != std::errc() || end1 != version.data() + dot) {
    return std::nullopt;
  }
  return std::pair{major, minor};
}

// One copy of specctl per host per run: what was found or uploaded there.
struct Provisioned {
  bool ok = false;
  std::string binary;
  std::string why;
};

std::mutex g_provision_mutex;
std::map<std::string, Provisioned> g_provisioned;

std::expected<std::string, Error> read_own_binary() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) {
    return std::unexpected(Error("cannot read this specctl's own binary (/proc/self/exe)"));
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Finds or puts a specctl that runs on the host; never throws.
Provisioned provision(remote::Host& host, const std::string& state_dir) {
  auto probe = host.exec("v=$(specctl --version 2>/dev/null | head -n 1); printf '%s\\n' \"$v\"; uname -m; "
                         "getconf GNU_LIBC_VERSION 2>/dev/null; true",
                         k_probe_timeout);
  if (!probe || probe->exit_code != 0) {
    return {false, "",
            fmt::format("could not ask {} what it runs: {}", host.describe(),
                        probe ? first_line(probe->err) : probe.error().what())};
  }
  std::istringstream lines(probe->out);
  std::string on_path;
  std::string machine;
  std::string glibc;
  std::getline(lines, on_path);
  std::getline(lines, machine);
  std::getline(lines, glibc);
  if (util::trim(on_path) == version_line()) {
    return {true, "specctl", fmt::format("{} on the host's PATH", version_line())};
  }
  if (auto why = host_incompatibility(build_machine(), util::trim(machine), build_glibc(), util::trim(glibc))) {
    return {false, "", *why};
  }
  auto bytes = read_own_binary();
  if (!bytes) {
    return {false, "", bytes.error().what()};
  }
  const std::string name =
      fmt::format("specctl-{}-{}", SPECCTL_VERSION, util::fingerprint(*bytes).substr(0, k_hash_chars));
  const std::string path = state_dir + "/bin/" + name;
  auto there = host.exec(fmt::format("wc -c < {} 2>/dev/null || true", util::shell_quote(path)), k_probe_timeout);
  bool present = there && there->exit_code == 0 && util::trim(there->out) == std::to_string(bytes->size());
  std::string how = "found from an earlier run";
  if (!present) {
    if (auto written = host.write_file(path, *bytes); !written) {
      return {false, "", fmt::format("cannot upload specctl: {}", written.error().what())};
    }
    how = "uploaded";
  }
  auto check = host.exec(fmt::format("chmod 755 {0} && {0} --version", util::shell_quote(path)), k_probe_timeout);
  if (!check || check->exit_code != 0 || first_line(check->out) != version_line()) {
    std::string said = !check ? check.error().what() : first_line(check->err.empty() ? check->out : check->err);
    return {false, "",
            fmt::format("the copy of specctl at {} does not run on {}: {}", path, host.describe(),
                        said.empty() ? "no output" : said)};
  }
  return {true, path, fmt::format("a copy of this specctl ({}, {})", name, how)};
}

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

} // namespace

std::optional<std::string> host_incompatibility(std::string_view local_machine, std::string_view host_machine,
                                                std::string_view build_glibc, std::string_view host_glibc) {
  if (host_machine.empty()) {
    return "the host did not say its machine (uname -m)";
  }
  if (host_machine != local_machine) {
    return fmt::format("the host is {} and this specctl is built for {}", host_machine, local_machine);
  }
  auto have = glibc_of(host_glibc);
  auto need = glibc_of(build_glibc);
  if (!have) {
    return fmt::format("the host has no GNU libc this specctl can use (getconf GNU_LIBC_VERSION said \"{}\")",
                       host_glibc);
  }
  if (need && *have < *need) {
    return fmt::format("the host has glibc {}.{} and this specctl needs {}.{} or later", have->first, have->second,
                       need->first, need->second);
  }
  return std::nullopt;
}

std::string build_machine() {
  utsname names{};
  if (::uname(&names) != 0) {
    return "unknown";
  }
  return names.machine;
}

std::string build_glibc() {
  return fmt::format("{}.{}", __GLIBC__, __GLIBC_MINOR__);
}

BenchClient::BenchClient(Setup setup) : m_s(std::move(setup)) {}

bool BenchClient::tunnelled() const {
  return dynamic_cast<remote::SshHost*>(m_s.host) != nullptr;
}

int BenchClient::reconnects() const {
  const auto* ssh = dynamic_cast<const remote::SshHost*>(m_s.host);
  return ssh != nullptr ? ssh->reconnect_count() : 0;
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
  const std::string key = m_s.node + "\n" + m_s.state_dir;
  Provisioned found;
  bool fresh = false;
  {
    // Held while provisioning: the slots of one host share its copy.
    std::lock_guard lock(g_provision_mutex);
    auto it = g_provisioned.find(key);
    if (it == g_provisioned.end()) {
      it = g_provisioned.emplace(key, provision(*m_s.host, m_s.state_dir)).first;
      fresh = true;
    }
    found = it->second;
  }
  if (!found.ok) {
    std::string why = fmt::format("the benchmark cannot run on {}: {}", m_s.host->describe(), found.why);
    if (!m_local_fallback) {
      m_s.warn(why + "; its client runs here, through the SSH tunnel, whose round trip is then in every figure");
      m_local_fallback = Where{false, "", why};
    }
    return *m_local_fallback;
  }
  if (fresh) {
    m_s.journal("bench_client_ready", {{"host", m_s.node}, {"binary", found.binary}, {"why", found.why}});
  }
  return {true, found.binary, found.why};
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

bench::SingleStreamResult BenchClient::single_stream(const experiment::BenchmarkSpec& spec,
                                                     const bench::SingleStreamOptions& options, ServerWatch& watch,
                                                     const WindowFn& window) {
  auto where = where_for(spec);
  if (!where.on_host) {
    return measure_locally<bench::SingleStreamResult>(spec, "single-stream", watch, [&](int attempt) {
      auto again = options;
      if (attempt > 0) {
        again.common.warmup = 0;
        // Prompts of their own: the discarded try's are in the server's prefix cache.
        again.common.prompt_tag += fmt::format(" try{}", attempt + 1);
      }
      return bench::run_single_stream(m_s.target(), again);
    });
  }
  BenchJob job;
  job.mode = BenchJob::Mode::single_stream;
  job.runs = options.runs;
  auto result = run_job(spec, where.binary, std::move(job), options.common, watch, window);
  return bench::single_stream_from_wire(result.at("single_stream"));
}

bench::ConcurrencyResult BenchClient::concurrency(const experiment::BenchmarkSpec& spec,
                                                  const bench::ConcurrencyOptions& options, ServerWatch& watch,
                                                  const WindowFn& window) {
  auto where = where_for(spec);
  if (!where.on_host) {
    std::string label = options.levels.size() == 1 ? fmt::format("concurrency {}", options.levels.front()) : "levels";
    return measure_locally<bench::ConcurrencyResult>(spec, label, watch, [&](int attempt) {
      auto again = options;
      if (attempt > 0) {
        again.common.warmup = 0;
        // Prompts of their own: the discarded try's are in the server's prefix cache.
        again.common.prompt_tag += fmt::format(" try{}", attempt + 1);
      }
      return bench::run_concurrency(m_s.target(), again);
    });
  }
  BenchJob job;
  job.mode = BenchJob::Mode::concurrency;
  job.levels = options.levels;
  job.requests = options.requests;
  auto result = run_job(spec, where.binary, std::move(job), options.common, watch, window);
  return bench::concurrency_from_wire(result.at("concurrency"));
}

bench::RateResult BenchClient::rate(const experiment::BenchmarkSpec& spec, const bench::RateOptions& options,
                                    ServerWatch& watch, const WindowFn& window) {
  auto where = where_for(spec);
  if (!where.on_host) {
    std::string label = options.rates.size() == 1 ? fmt::format("rate {:g}", options.rates.front()) : "rates";
    return measure_locally<bench::RateResult>(spec, label, watch, [&](int attempt) {
      auto again = options;
      if (attempt > 0) {
        again.common.warmup = 0;
        // Prompts of their own: the discarded try's are in the server's prefix cache.
        again.common.prompt_tag += fmt::format(" try{}", attempt + 1);
      }
      return bench::run_rate(m_s.target(), again);
    });
  }
  BenchJob job;
  job.mode = BenchJob::Mode::rate;
  job.rates = options.rates;
  job.duration = options.duration;
  job.max_concurrency = options.max_concurrency;
  job.burstiness = options.burstiness;
  job.seed = options.seed;
  auto result = run_job(spec, where.binary, std::move(job), options.common, watch, window);
  return bench::rate_from_wire(result.at("rate"));
}

json BenchClient::run_job(const experiment::BenchmarkSpec& spec, const std::string& binary, BenchJob job,
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
  job.request = common.request;
  job.prompts = common.prompts;
  job.unique_prompts = common.unique_prompts;
  job.prompt_tag = common.prompt_tag;
  job.warmup = common.warmup;
  job.preconnect = common.preconnect;
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
  auto pid = remote::start_detached(host, {{binary, "bench-job", job_file}, {}, dir, tag});
  if (!pid) {
    throw Error(fmt::format("cannot start the benchmark on {}: {}", host.describe(), pid.error().what()),
                pid.error().kind());
  }
  m_s.journal("bench_job_started",
              {{"variant", m_s.variant}, {"benchmark", spec.name}, {"dir", dir}, {"pid", *pid}, {"binary", binary}});

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
