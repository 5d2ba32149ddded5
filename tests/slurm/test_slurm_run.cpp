// `specctl run` on a real Slurm cluster (tests/support/slurm_cluster.hpp): two
// nodes, n1 and n2, both this machine, four fake GPUs each. Every variant is a
// batch job whose payload is `specctl job`, running specsim on the node Slurm
// picked with the GPUs it allocated. Each node's fake GPUs are a folder of its
// own (the jobs' setup line picks it by $SLURMD_NODENAME), so a job that
// looked at the other node's GPUs, or at GPUs it was not given, would show.

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "../sim/support.hpp"
#include "../support/pool_nodes.hpp"
#include "../support/result_folder.hpp"
#include "slurm_cluster.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

namespace st = specsim_test;
using nlohmann::json;
using specctl::test::journal;
using specctl::test::read_json;
using specctl::test::SlurmCluster;

namespace {

// Generous for a loaded two-core machine: the 4-variant sweep takes about 20 s there.
constexpr std::chrono::seconds k_sweep_timeout{240};
constexpr std::chrono::seconds k_phase_timeout{120};
constexpr std::chrono::seconds k_signal_exit_timeout{90};
// Slurm checks time limits every 30 s: a 1-minute limit ends a job 60 to 90 s
// in, plus KillWait.
constexpr std::chrono::seconds k_time_limit_sweep_timeout{240};
constexpr std::chrono::milliseconds k_watch_interval{100};
// How long the cluster's processes get to go after a job ends (KillWait is 10 s).
constexpr std::chrono::seconds k_drain_timeout{30};

constexpr const char* k_quick_benchmarks = R"(  - {name: single, kind: single_stream, runs: 2, max_tokens: 32}
  - {name: parallel, kind: concurrency, repeats: 1, levels: [1, 4], max_tokens: 32})";

std::vector<json> events(const std::filesystem::path& out, const std::string& event) {
  auto all = journal(out);
  std::erase_if(all, [&](const json& e) { return e.value("event", "") != event; });
  return all;
}

std::vector<int> distinct_free_ports(std::size_t count) {
  std::set<int> ports;
  while (ports.size() < count) {
    ports.insert(st::free_port());
  }
  return {ports.begin(), ports.end()};
}

// The live processes that run (or ran) under this cluster, the daemons left out:
// the jobs' shells, specctl job, specsim and its workers.
std::vector<pid_t> job_processes(const SlurmCluster& cluster) {
  auto all = cluster.process_pids();
  auto daemons = cluster.daemon_pids();
  std::erase_if(all, [&](pid_t pid) {
    if (std::find(daemons.begin(), daemons.end(), pid) != daemons.end()) {
      return true;
    }
    // slurmstepd carries SLURM_CONF too; it is Slurm's, not the job's.
    auto comm = st::read_file(std::filesystem::path("/proc") / std::to_string(pid) / "comm");
    return comm.starts_with("slurmstepd") || comm.starts_with("slurmscriptd");
  });
  return all;
}

std::string describe(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) {
    auto comm = st::read_file(std::filesystem::path("/proc") / std::to_string(pid) / "cmdline");
    std::replace(comm.begin(), comm.end(), '\0', ' ');
    out += fmt::format("{} ({}) ", pid, comm.substr(0, 80));
  }
  return out;
}

// One Slurm sweep's world: the cluster, per-node fake GPUs, an experiment and
// the specctl processes the test starts.
class SlurmSweep {
public:
  // False, after saying why (ctest reports the case skipped), when Slurm is not
  // installed; a cluster that is installed and does not start fails the test.
  bool start() {
    if (auto why = SlurmCluster::unavailable()) {
      specctl::test::skip(*why);
      return false;
    }
    std::filesystem::create_directories(m_dir.path() / "cluster");
    try {
      m_cluster = std::make_unique<SlurmCluster>(m_dir.path() / "cluster");
    } catch (const std::exception& e) {
      FAIL("the Slurm test cluster did not start: " << e.what());
    }
    for (const auto& node : m_cluster->node_names()) {
      std::filesystem::create_directories(gpu_dir(node));
    }
    return true;
  }

  ~SlurmSweep() {
    // Jobs first (the cluster's stop cancels them and kills what is left),
    // then whatever held the fake GPUs.
    m_cluster.reset();
    for (const auto& node : {"n1", "n2"}) {
      for (const auto& app : specctl::sim::live_app_entries(gpu_dir(node))) {
        if (app.pid > 1 && app.pid != ::getpid()) {
          ::kill(app.pid, SIGKILL);
        }
      }
    }
  }

  SlurmCluster& cluster() { return *m_cluster; }
  std::filesystem::path gpu_dir(const std::string& node) const { return m_dir.path() / ("gpus-" + node); }
  std::filesystem::path file() const { return m_dir.path() / "sweep.yaml"; }
  std::filesystem::path out() const { return m_dir.path() / "out"; }
  std::filesystem::path log() const { return m_dir.path() / fmt::format("specctl-{}.log", m_runs); }
  std::string output() const { return st::read_file(log()); }

  // Variants `names`, each on its own port (both nodes are this machine), as
  // jobs of `gpus` GPUs each; `slurm_extra` adds lines to the slurm block.
  void write(const std::vector<std::string>& names, const std::string& load, int speed, int gpus,
             const std::string& slurm_extra = "", const std::string& health_timeout = "2m",
             const std::string& more_hosts = "") {
    auto ports = distinct_free_ports(names.size());
    std::string variants;
    for (std::size_t i = 0; i < names.size(); ++i) {
      variants += fmt::format("  - {{name: {}, port: {}}}\n", names[i], ports[i]);
    }
    std::ofstream(file()) << fmt::format(
        R"(name: slurm
hosts:
{more_hosts}  cluster:
    slurm:
      gpus: {gpus}
      poll: 300ms
      setup:
        - "export SPECSIM_GPU_DIR={root}/gpus-$SLURMD_NODENAME"
        - "export PATH={fake_gpu}:$PATH"
{extra}server:
  template: specsim
  host: cluster
  model: /models/Kimi-K2.5-INT4
  knobs: {{tp: 2, sim_load_time: {load}, sim_speed: {speed}}}
  health: {{timeout: {health}, interval: 200ms, stall: 5m}}
  cleanup: {{policy: kill, grace: 3s, timeout: 30s}}
variants:
{variants}benchmarks:
{benchmarks}
)",
        fmt::arg("gpus", gpus), fmt::arg("root", m_dir.path().string()), fmt::arg("fake_gpu", SPECSIM_FAKE_GPU_BIN),
        fmt::arg("extra", slurm_extra), fmt::arg("load", load), fmt::arg("speed", speed),
        fmt::arg("health", health_timeout), fmt::arg("variants", variants), fmt::arg("benchmarks", k_quick_benchmarks),
        fmt::arg("more_hosts", more_hosts));
  }

  // With Reach::login_node_only the coordinator itself cannot reach the
  // cluster (no SLURM_CONF): only the SSH login node can.
  enum class Reach { here, login_node_only };

  std::unique_ptr<st::Process> start_run(std::vector<std::string> args, Reach reach = Reach::here) {
    std::vector<std::string> argv = {SPECCTL_BINARY, "run", file().string()};
    if (std::find(args.begin(), args.end(), "--resume") == args.end()) {
      argv.insert(argv.end(), {"--out", out().string()});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    ++m_runs;
    std::map<std::string, std::string> env;
    if (reach == Reach::here) {
      for (const auto& var : m_cluster->env()) {
        env[var.substr(0, var.find('='))] = var.substr(var.find('=') + 1);
      }
    } else {
      // Slurm's clients would otherwise read /etc/slurm/slurm.conf, which the test never writes.
      env["SLURM_CONF"] = (m_dir.path() / "no-such-slurm.conf").string();
    }
    return std::make_unique<st::Process>(argv, log(), env);
  }

  std::filesystem::path dir() const { return m_dir.path(); }

  int run(std::vector<std::string> args = {}, Reach reach = Reach::here) {
    auto process = start_run(std::move(args), reach);
    return process->wait_exit_code(k_sweep_timeout).value_or(-1);
  }

  // Slurm's own word on a job: JobState=... of scontrol.
  std::string job_state(const std::string& id) const {
    auto shown = m_cluster->run("scontrol show job --oneliner " + id);
    auto at = shown.output.find("JobState=");
    return at == std::string::npos ? "gone" : shown.output.substr(at + 9, shown.output.find(' ', at) - at - 9);
  }

  // Nothing of any job runs any more, within a bound.
  bool drained() const {
    return st::wait_until([&] { return job_processes(*m_cluster).empty(); },
                          std::chrono::duration_cast<std::chrono::milliseconds>(k_drain_timeout));
  }

private:
  st::TempDir m_dir;
  std::unique_ptr<SlurmCluster> m_cluster;
  int m_runs = 0;
};

// Records which GPUs of which node held a process, and how many jobs ran at once.
class GpuWatcher {
public:
  explicit GpuWatcher(const SlurmSweep& sweep) : m_sweep(sweep) {
    m_thread = std::thread([this] {
      while (!m_stop.load()) {
        look();
        std::this_thread::sleep_for(k_watch_interval);
      }
    });
  }
  GpuWatcher(const GpuWatcher&) = delete;
  GpuWatcher& operator=(const GpuWatcher&) = delete;
  ~GpuWatcher() { stop(); }
  void stop() {
    m_stop = true;
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }
  // node -> GPU indices that held a process at some point.
  const std::map<std::string, std::set<int>>& gpus_used() const { return m_gpus; }
  // The most nodes that held a server at one moment.
  int most_nodes_at_once() const { return m_most; }

private:
  void look() {
    int busy = 0;
    for (const auto& node : {"n1", "n2"}) {
      auto apps = specctl::sim::live_app_entries(m_sweep.gpu_dir(node));
      busy += apps.empty() ? 0 : 1;
      for (const auto& app : apps) {
        m_gpus[node].insert(app.gpu);
      }
    }
    m_most = std::max(m_most, busy);
  }
  const SlurmSweep& m_sweep;
  std::map<std::string, std::set<int>> m_gpus;
  int m_most = 0;
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

void check_ok_variant(const std::filesystem::path& out, const std::string& name) {
  INFO("variant " << name);
  auto result = read_json(out / "variants" / name / "result.json");
  CHECK(result.value("status", "") == "ok");
  CHECK(result.value("host", "") == "cluster");
  CHECK(result["slurm"]["state"] == "COMPLETED");
  CHECK(result["benchmarks"]["single"]["metrics"]["output_tok_s"].get<double>() > 0);
  CHECK(result["benchmarks"]["parallel"]["levels"].size() == 2);
  CHECK(std::filesystem::file_size(out / "variants" / name / "server.log") > 0);
  CHECK(std::filesystem::exists(out / "variants" / name / "requests-single.jsonl"));
}

} // namespace

TEST_CASE("a 4-variant sweep runs as Slurm jobs, two at once on n1 and n2, each on its allocated GPUs") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // Three of four GPUs per job: one job fits a node, so two run at once, one per node.
  sweep.write({"a", "b", "c", "d"}, "2s", 10, 3);
  GpuWatcher watcher(sweep);
  int code = sweep.run();
  watcher.stop();
  INFO(sweep.output());
  REQUIRE(code == 0);

  std::set<std::string> nodes;
  for (const auto& name : {"a", "b", "c", "d"}) {
    check_ok_variant(sweep.out(), name);
    auto result = read_json(sweep.out() / "variants" / name / "result.json");
    auto allocation = result["slurm"]["allocation"];
    INFO("variant " << name << ": " << allocation.dump());
    // The job saw the three GPUs Slurm gave it, and the server was told exactly those.
    CHECK(allocation["gpus"].size() == 3);
    CHECK(allocation["node"] == result["slurm"]["node"]);
    nodes.insert(result["slurm"]["node"].get<std::string>());
  }
  CHECK(nodes == std::set<std::string>{"n1", "n2"});
  CHECK(watcher.most_nodes_at_once() == 2);
  // specsim's tp-2 workers took the first two of the three visible GPUs; GPU 3 was never given.
  for (const auto& [node, gpus] : watcher.gpus_used()) {
    INFO("node " << node);
    CHECK(gpus == std::set<int>{0, 1});
  }
  // Slurm's answers, in the journal: one submission per variant, each followed to COMPLETED.
  CHECK(events(sweep.out(), "slurm_submitted").size() == 4);
  for (const auto& e : events(sweep.out(), "slurm_finished")) {
    CHECK(e.value("state", "") == "COMPLETED");
  }
  auto provenance = read_json(sweep.out() / "provenance.json");
  CHECK(provenance["variants"]["a"].value("slurm_job", "") != "");
  auto report = st::read_file(sweep.out() / "report.md");
  for (const auto& name : {"a", "b", "c", "d"}) {
    CHECK(report.find(std::string("| ") + name) != std::string::npos);
  }
  CHECK(sweep.drained());
}

TEST_CASE("a job past its time limit is a failed variant with Slurm's reason") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // The load takes ten minutes; the job has one.
  sweep.write({"slow"}, "10m", 1, 1, "      time_limit: 1m\n", "30m");
  auto specctl = sweep.start_run({});
  auto code = specctl->wait_exit_code(k_time_limit_sweep_timeout).value_or(-1);
  INFO(sweep.output());
  REQUIRE(code == 1);
  auto result = read_json(sweep.out() / "variants" / "slow" / "result.json");
  CHECK(result["status"] == "failed");
  CHECK(result["slurm"]["state"] == "TIMEOUT");
  CHECK(result["failure"]["kind"] == "timed_out");
  CHECK(result.value("reason", "").find("time limit") != std::string::npos);
  // What the job did before Slurm stopped it is kept: it launched and was loading.
  CHECK(result["phases"].contains("launch"));
  // Not retried by default: a second try would hit the same limit.
  CHECK(events(sweep.out(), "slurm_submitted").size() == 1);
  CHECK(sweep.drained());
}

TEST_CASE("Ctrl-C of the coordinator cancels the running jobs and leaves no process") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a", "b", "c"}, "10m", 1, 3, "", "30m");
  auto specctl = sweep.start_run({});
  // Ctrl-C comes when both nodes' jobs are loading, their servers launched (each
  // job's own journal says so), and the third job waits in the queue. Not as soon as
  // Slurm says RUNNING: the payloads may still be starting then, and a payload killed
  // while it starts its server leaves that server behind (it runs detached, out of
  // reach of the cluster's proctrack/linuxproc). Nor before all three are submitted:
  // each variant submits from its own thread, and on a loaded machine the third
  // sbatch may come after the first two jobs run.
  std::vector<nlohmann::json> submitted;
  std::vector<std::string> waiting;
  bool loading = st::wait_until(
      [&] {
        submitted = events(sweep.out(), "slurm_submitted");
        waiting.clear();
        for (const auto& e : submitted) {
          if (events(std::filesystem::path(e.value("job_dir", "")) / "run", "launched").empty()) {
            waiting.push_back(e.value("job_id", ""));
          }
        }
        return submitted.size() == 3 && waiting.size() == 1;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(k_phase_timeout));
  INFO(sweep.output());
  REQUIRE(loading);
  // The waiting job stays queued until specctl cancels it: otherwise a node freed by
  // the first cancellations may start it just as its own scancel comes (specctl
  // cancels each job from its variant's thread, seconds apart under load), and its
  // payload would be killed while it starts its server, as above.
  REQUIRE(sweep.job_state(waiting.front()) == "PENDING");
  auto held = sweep.cluster().run("scontrol hold " + waiting.front());
  INFO(held.output);
  REQUIRE(held.exit_code == 0);
  specctl->signal(SIGINT);
  auto code = specctl->wait_exit_code(k_signal_exit_timeout);
  REQUIRE(code.has_value());
  CHECK(*code == 130);
  for (const auto& e : submitted) {
    INFO("job " << e.value("job_id", ""));
    CHECK(sweep.job_state(e.value("job_id", "")) == "CANCELLED");
  }
  CHECK(events(sweep.out(), "slurm_cancelled").size() == 3);
  bool drained = sweep.drained();
  INFO("left: " << describe(job_processes(sweep.cluster())));
  CHECK(drained);
  for (const auto& node : {"n1", "n2"}) {
    CHECK(specctl::sim::live_app_entries(sweep.gpu_dir(node)).empty());
  }
}

TEST_CASE("kill -9 of the coordinator, then --resume adopts the jobs and completes the table") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // A 4 s load (speed 1): the kill comes while the jobs run.
  sweep.write({"a", "b", "c", "d"}, "4s", 1, 3);
  auto specctl = sweep.start_run({});
  // Every variant submitted, and a job running: kill -9 catches the sweep mid-flight.
  bool running = st::wait_until(
      [&] {
        return events(sweep.out(), "slurm_submitted").size() == 4 && !events(sweep.out(), "slurm_running").empty();
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(k_phase_timeout));
  INFO(sweep.output());
  REQUIRE(running);
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit(std::chrono::seconds{10}).has_value());
  // The jobs go on without the coordinator.
  auto first = events(sweep.out(), "slurm_submitted");
  // The jobs of variants not yet finished when the kill came: those the resumed run must adopt.
  std::set<std::string> finished;
  for (const auto& e : events(sweep.out(), "variant_finished")) {
    finished.insert(e.value("variant", ""));
  }
  std::set<std::string> ids;
  for (const auto& e : first) {
    if (!finished.contains(e.value("variant", ""))) {
      ids.insert(e.value("job_id", ""));
    }
  }
  REQUIRE_FALSE(ids.empty());

  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  for (const auto& name : {"a", "b", "c", "d"}) {
    check_ok_variant(sweep.out(), name);
  }
  // Nothing was submitted again: the resumed run followed the same four jobs.
  auto all = events(sweep.out(), "slurm_submitted");
  CHECK(all.size() == 4);
  std::set<std::string> adopted;
  for (const auto& e : events(sweep.out(), "slurm_adopted")) {
    adopted.insert(e.value("job_id", ""));
  }
  CHECK(adopted == ids);
  auto report = st::read_file(sweep.out() / "report.md");
  for (const auto& name : {"a", "b", "c", "d"}) {
    CHECK(report.find(std::string("| ") + name) != std::string::npos);
  }
  CHECK(sweep.drained());
}

TEST_CASE("through an SSH login node: sbatch, scontrol and the jobs' files all go over SSH") {
  // Asked first: a skip must not start (and wait for) a cluster it does not use.
  if (auto why = specctl::test::TestSshd::unavailable()) {
    specctl::test::skip(*why);
    return;
  }
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // The login node: a test sshd whose sessions know the cluster.
  auto sshd = specctl::test::TestSshd::start(
      {.listen_address = "127.0.0.2",
       .session_env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", sweep.cluster().env().front()}});
  REQUIRE_MESSAGE(sshd, (sshd ? "" : sshd.error()));
  auto& login = **sshd;
  auto work = sweep.dir() / "shared-work";
  std::string login_host =
      fmt::format("  login1: {{ssh: \"{}@{}:{}\", identity: \"{}\", known_hosts: \"{}\"}}\n", login.user(),
                  login.address(), login.port(), login.user_key().string(), login.known_hosts().string());
  std::string slurm_lines = fmt::format("      login: login1\n      work_dir: \"{}\"\n      specctl: \"{}\"\n",
                                        work.string(), SPECCTL_BINARY);
  sweep.write({"a", "b"}, "2s", 10, 3, slurm_lines, "2m", login_host);
  int code = sweep.run({}, SlurmSweep::Reach::login_node_only);
  INFO(sweep.output());
  REQUIRE(code == 0);
  for (const auto& name : {"a", "b"}) {
    check_ok_variant(sweep.out(), name);
    auto result = read_json(sweep.out() / "variants" / name / "result.json");
    // The job's folder is in the work folder, in one folder for this run.
    auto job_dir = result["slurm"]["job_dir"].get<std::string>();
    CHECK(job_dir.starts_with((work / "slurm-out").string()));
    CHECK(std::filesystem::exists(std::filesystem::path(job_dir) / "job.sh"));
  }
  // The job read the experiment from the copy put beside the jobs.
  CHECK(std::filesystem::exists(work / "slurm-out" / "experiment.yaml"));
  CHECK(sweep.drained());
}

TEST_CASE("a job someone else cancels fails its variant with that reason, and the sweep goes on") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a", "b"}, "2s", 10, 3, "", "30m");
  // Variant a loads for ten minutes: long enough to be cancelled by hand.
  auto text = st::read_file(sweep.file());
  text.replace(text.find("{name: a, "), 10, "{name: a, knobs: {sim_load_time: 10m, sim_speed: 1}, ");
  std::ofstream(sweep.file()) << text;
  auto specctl = sweep.start_run({});
  std::string job_a;
  bool running = st::wait_until(
      [&] {
        for (const auto& e : events(sweep.out(), "slurm_running")) {
          if (e.value("variant", "") == "a") {
            job_a = e.value("job_id", "");
          }
        }
        return !job_a.empty();
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(k_phase_timeout));
  INFO(sweep.output());
  REQUIRE(running);
  auto cancelled = sweep.cluster().run("scancel " + job_a);
  REQUIRE(cancelled.exit_code == 0);
  auto code = specctl->wait_exit_code(k_sweep_timeout);
  REQUIRE(code.has_value());
  CHECK(*code == 1);
  auto a = read_json(sweep.out() / "variants" / "a" / "result.json");
  CHECK(a["status"] == "failed");
  CHECK(a["slurm"]["state"] == "CANCELLED");
  CHECK(a.value("reason", "").find("cancelled outside specctl") != std::string::npos);
  check_ok_variant(sweep.out(), "b");
  // A cancellation is somebody's decision: not retried.
  CHECK(events(sweep.out(), "slurm_submitted").size() == 2);
  CHECK(sweep.drained());
}

TEST_CASE("a requeued job starts its variant over and is followed to its end") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a"}, "4s", 10, 3);
  auto specctl = sweep.start_run({});
  bool running = st::wait_until([&] { return events(sweep.out(), "slurm_running").size() == 1; },
                                std::chrono::duration_cast<std::chrono::milliseconds>(k_phase_timeout));
  INFO(sweep.output());
  REQUIRE(running);
  auto id = events(sweep.out(), "slurm_running").front().value("job_id", "");
  // What a preemption with PreemptMode=REQUEUE does: the job goes back to the queue.
  auto requeued = sweep.cluster().run("scontrol requeue " + id);
  INFO(requeued.output);
  REQUIRE(requeued.exit_code == 0);
  // Slurm holds a requeued job back for two minutes (its BeginTime); let it go now.
  bool pending = st::wait_until([&] { return sweep.job_state(id) == "PENDING"; },
                                std::chrono::duration_cast<std::chrono::milliseconds>(k_phase_timeout));
  REQUIRE(pending);
  auto released = sweep.cluster().run("scontrol update JobId=" + id + " StartTime=now");
  INFO(released.output);
  CHECK(released.exit_code == 0);
  auto code = specctl->wait_exit_code(k_sweep_timeout);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  check_ok_variant(sweep.out(), "a");
  auto result = read_json(sweep.out() / "variants" / "a" / "result.json");
  CHECK(result["slurm"]["restarts"] == 1);
  // Slurm ran it again; specctl did not submit it again.
  CHECK(events(sweep.out(), "slurm_submitted").size() == 1);
  CHECK(events(sweep.out(), "slurm_running").size() == 2);
  CHECK(sweep.drained());
}

TEST_CASE("a job whose payload cannot start fails with Slurm's exit code and the job's last output") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a"}, "2s", 10, 1, "      specctl: /nonexistent/bin/specctl\n");
  int code = sweep.run();
  INFO(sweep.output());
  CHECK(code == 1);
  auto result = read_json(sweep.out() / "variants" / "a" / "result.json");
  CHECK(result["status"] == "failed");
  CHECK(result["slurm"]["state"] == "FAILED");
  auto reason = result.value("reason", "");
  CHECK(reason.find("without a result") != std::string::npos);
  CHECK(reason.find("exit code 127") != std::string::npos);
  CHECK(reason.find("/nonexistent/bin/specctl") != std::string::npos);
  CHECK(sweep.output().find("without a result") != std::string::npos);
}

TEST_CASE("a job submitted just before kill -9 and never journaled is found with squeue and adopted") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a", "b"}, "4s", 10, 3);
  auto specctl = sweep.start_run({});
  bool running = st::wait_until(
      [&] {
        return events(sweep.out(), "slurm_submitted").size() == 2 && !events(sweep.out(), "slurm_running").empty();
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(k_phase_timeout));
  INFO(sweep.output());
  REQUIRE(running);
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit(std::chrono::seconds{10}).has_value());
  // The kill came between sbatch and the journal's fsync for b: no line of b's job survives.
  std::string job_b;
  std::string kept;
  for (const auto& e : journal(sweep.out())) {
    if (e.value("variant", "") == "b" && e.value("event", "").starts_with("slurm_")) {
      job_b = e.value("job_id", job_b);
      continue;
    }
    kept += e.dump() + "\n";
  }
  REQUIRE_FALSE(job_b.empty());
  std::ofstream(sweep.out() / "journal.jsonl", std::ios::trunc) << kept;

  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  check_ok_variant(sweep.out(), "a");
  check_ok_variant(sweep.out(), "b");
  auto b = read_json(sweep.out() / "variants" / "b" / "result.json");
  CHECK(b["slurm"]["job_id"] == job_b);
  bool unrecorded = false;
  for (const auto& e : events(sweep.out(), "slurm_adopted")) {
    unrecorded = unrecorded || (e.value("job_id", "") == job_b && e.value("unrecorded", false));
  }
  CHECK(unrecorded);
  // Nothing was submitted again: b's one job is the one that ran.
  CHECK(events(sweep.out(), "slurm_submitted").size() == 1);
  CHECK(sweep.drained());
}
