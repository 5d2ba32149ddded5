#pragma once

// What the run suite's tests share: one sweep's world (an experiment file, its
// result folder, the state folder, fake GPUs) and the checks on tagged servers.

#include "../support/result_folder.hpp"
#include "../support/specsim.hpp"
#include "../support/ssh_testing.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

namespace run_test {

namespace st = specctl::test;
using nlohmann::json;

// Generous for a loaded two-core machine; a sweep here takes seconds.
constexpr std::chrono::seconds k_sweep_timeout{180};
constexpr std::chrono::seconds k_phase_timeout{60};
constexpr std::chrono::seconds k_signal_exit_timeout{60};

using specctl::test::journal;
using specctl::test::read_json;

inline bool journal_has(const std::filesystem::path& out, const std::string& event, const std::string& variant,
                        const std::string& phase = "") {
  for (const auto& e : journal(out)) {
    if (e.value("event", "") == event && e.value("variant", "") == variant &&
        (phase.empty() || e.value("phase", "") == phase)) {
      return true;
    }
  }
  return false;
}

// Live (not zombie) processes carrying SPECCTL_TAG=tag in their environment.
inline std::vector<int> live_tagged(const std::string& tag) {
  std::vector<int> pids;
  std::string needle = "SPECCTL_TAG=" + tag;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::string environ = st::read_file(it->path() / "environ");
    std::string stat = st::read_file(it->path() / "stat");
    auto close = stat.rfind(')');
    bool zombie = close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
    std::istringstream vars(environ);
    std::string var;
    while (std::getline(vars, var, '\0')) {
      if (var == needle && !zombie) {
        pids.push_back(std::stoi(name));
      }
    }
  }
  return pids;
}

// Every server a sweep started has a folder named by its tag in the state dir.
// The servers' folders in the state dir, named by tag (each records its server in
// server.meta); bin/ holds the specctl copies that benchmark jobs run.
inline std::vector<std::string> tags_in(const std::filesystem::path& state) {
  std::vector<std::string> tags;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(state, ec), end; !ec && it != end; it.increment(ec)) {
    if (std::filesystem::exists(it->path() / "server.meta")) {
      tags.push_back(it->path().filename().string());
    }
  }
  return tags;
}

// Servers, and the benchmark jobs beside them (tagged <tag>-bench), a sweep left running.
inline std::string stray_servers(const std::filesystem::path& state) {
  std::string out;
  for (const auto& tag : tags_in(state)) {
    for (const auto& t : {tag, tag + "-bench"}) {
      for (int pid : live_tagged(t)) {
        out += fmt::format("{} (pid {}) ", t, pid);
      }
    }
  }
  return out;
}

// One sweep's world: an experiment file, its result folder, the hosts' state
// folder and fake GPUs, and the specctl processes the test starts.
class Sweep {
public:
  explicit Sweep(std::string host_block = "", std::string host = "local")
      : m_host_block(std::move(host_block)), m_host(std::move(host)) {}
  ~Sweep() {
    // Whatever a failed test left: servers by tag (only ours), then fake GPU workers.
    for (const auto& tag : tags_in(state())) {
      for (int pid : live_tagged(tag)) {
        ::kill(pid, SIGKILL);
      }
    }
  }

  std::filesystem::path file() const { return m_dir.path() / "sweep.yaml"; }
  std::filesystem::path out() const { return m_dir.path() / "out"; }
  std::filesystem::path state() const { return m_shared_state ? *m_shared_state : m_dir.path() / "state"; }
  std::filesystem::path gpus() const { return m_shared_gpus ? *m_shared_gpus : m_gpus.path(); }
  // Another run on the same machine: the same fake GPUs and state folder, its own port and results.
  // The server's cleanup block, inside its braces.
  void cleanup(std::string keys) { m_cleanup = std::move(keys); }
  void use_port(int port) { m_port = port; }
  // The subcommand start() and run() call: "run" by default, "tune" for a tuning file.
  void subcommand(std::string name) { m_subcommand = std::move(name); }
  void share_host_with(const Sweep& other) {
    m_shared_state = other.state();
    m_shared_gpus = other.gpus();
  }
  std::filesystem::path log() const { return m_dir.path() / fmt::format("specctl-{}.log", m_runs); }
  int port() const { return m_port; }

  // `variants` and `benchmarks` are YAML blocks; the server defaults are a
  // specsim on the fake GPUs with `load` of simulated load time.
  // `speed` divides every simulated duration (specsim's --sim-speed).
  // Another engine's personality of specsim: its template and the knobs it takes beside the sim's.
  void personality(std::string tmpl, std::string knobs) {
    m_template = std::move(tmpl);
    m_knobs = std::move(knobs);
  }

  void write(const std::string& variants, const std::string& benchmarks, const std::string& load, int speed,
             const std::string& extra = "") {
    std::ofstream(file()) << fmt::format(
        R"(name: e2e
{hosts}
server:
  template: {template}
  host: {host}
  model: /models/Kimi-K2.5-INT4
  port: {port}
  knobs: {{{knobs}sim_load_time: {load}, sim_speed: {speed}, sim_gpu_dir: {gpus}}}
  health: {{timeout: 2m, interval: 200ms, stall: 1m}}
  cleanup: {{{cleanup}}}
variants:
{variants}
benchmarks:
{benchmarks}
{extra}
)",
        fmt::arg("hosts", m_host_block), fmt::arg("host", m_host), fmt::arg("template", m_template),
        fmt::arg("knobs", m_knobs), fmt::arg("port", m_port), fmt::arg("cleanup", m_cleanup), fmt::arg("load", load),
        fmt::arg("speed", speed), fmt::arg("gpus", gpus().string()), fmt::arg("variants", variants),
        fmt::arg("benchmarks", benchmarks), fmt::arg("extra", extra));
  }

  // `wrapper` runs first and is given specctl's command line (e.g. a shell that mounts something).
  std::unique_ptr<st::Process> start(std::vector<std::string> args, std::vector<std::string> wrapper = {}) {
    std::vector<std::string> argv = std::move(wrapper);
    for (const auto& word :
         {std::string(SPECCTL_BINARY), m_subcommand, file().string(), std::string("--state-dir"), state().string()}) {
      argv.push_back(word);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    ++m_runs;
    const char* path = std::getenv("PATH");
    return std::make_unique<st::Process>(
        argv, log(),
        std::map<std::string, std::string>{
            {"PATH", std::string(SPECSIM_FAKE_GPU_BIN) + ":" + (path != nullptr ? path : "/usr/bin:/bin")},
            {"SPECSIM_GPU_DIR", gpus().string()},
            {"HOME", m_dir.home().string()}});
  }

  // Runs specctl to its end; the exit code, or -1 if it did not end in time.
  int run(std::vector<std::string> args) {
    auto process = start(std::move(args));
    return process->wait_exit_code(k_sweep_timeout).value_or(-1);
  }

  std::string output() const { return st::read_file(log()); }

private:
  st::TempDir m_dir;
  st::GpuDir m_gpus;
  std::optional<std::filesystem::path> m_shared_state;
  std::optional<std::filesystem::path> m_shared_gpus;
  int m_port = st::free_port();
  std::string m_cleanup = "policy: kill, grace: 3s, timeout: 30s";
  std::string m_host_block;
  std::string m_host;
  std::string m_subcommand = "run";
  std::string m_template = "specsim";
  std::string m_knobs = "tp: 8, ";
  int m_runs = 0;
};

constexpr const char* k_three_variants = R"(  - name: baseline
  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 2, spec_topk: 1, spec_draft_tokens: 3}
  - name: crashy
    knobs: {sim_fault: [crash-load]})";

constexpr const char* k_quick_benchmarks = R"(  - {name: single, kind: single_stream, runs: 2, max_tokens: 32}
  - {name: parallel, kind: concurrency, levels: [1, 4], repeats: 1, max_tokens: 32})";

inline void check_complete_variant(const std::filesystem::path& out, const std::string& name) {
  INFO("variant " << name);
  auto result = read_json(out / "variants" / name / "result.json");
  CHECK(result.value("status", "") == "ok");
  CHECK(result["load"]["load_s"].get<double>() > 0);
  auto single = result["benchmarks"]["single"];
  CHECK(single["status"] == "ok");
  CHECK(single["metrics"]["output_tok_s"].get<double>() > 0);
  CHECK(single["result"]["runs"].size() == 2);
  auto levels = result["benchmarks"]["parallel"]["levels"];
  REQUIRE(levels.size() == 2);
  CHECK(levels[1]["concurrency"] == 4);
  CHECK(levels[1]["metrics"]["output_tok_s"].get<double>() > levels[0]["metrics"]["output_tok_s"].get<double>());
  CHECK(std::filesystem::file_size(out / "variants" / name / "server.log") > 0);
  // Every request, one line each: warmup + 2 single-stream runs; 10 + 10 at the two levels plus warmup.
  auto requests = st::read_file(out / "variants" / name / "requests-single.jsonl");
  CHECK(std::count(requests.begin(), requests.end(), '\n') >= 2);
  requests = st::read_file(out / "variants" / name / "requests-parallel.jsonl");
  CHECK(std::count(requests.begin(), requests.end(), '\n') >= 20);
}

// The experiment's hosts block for the test sshd, as host "node".
inline std::string ssh_hosts(const specctl::test::TestSshd& sshd) {
  return fmt::format(R"(hosts:
  node: {{ssh: "{}@127.0.0.1:{}", identity: "{}", known_hosts: "{}"{}}})",
                     sshd.user(), sshd.port(), sshd.user_key().string(), sshd.known_hosts().string(),
                     specctl::test::ssh_transport_yaml());
}

} // namespace run_test
