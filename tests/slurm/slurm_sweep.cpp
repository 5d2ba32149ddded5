#include "slurm_sweep.hpp"

#include "../support/result_folder.hpp"

#include <specctl/sim/gpu_state.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <fmt/format.h>
#include <fstream>

#include <unistd.h>

namespace slurm_test {

using namespace specctl::test;

namespace {

constexpr const char* k_quick_benchmarks = R"(  - {name: single, kind: single_stream, runs: 2, max_tokens: 32}
  - {name: parallel, kind: concurrency, repeats: 1, levels: [1, 4], max_tokens: 32})";

} // namespace

std::vector<pid_t> job_processes(const SlurmCluster& cluster) {
  auto all = cluster.process_pids();
  auto daemons = cluster.daemon_pids();
  std::erase_if(all, [&](pid_t pid) {
    if (std::find(daemons.begin(), daemons.end(), pid) != daemons.end()) {
      return true;
    }
    // slurmstepd carries SLURM_CONF too; it is Slurm's, not the job's.
    auto comm = read_file(std::filesystem::path("/proc") / std::to_string(pid) / "comm");
    return comm.starts_with("slurmstepd") || comm.starts_with("slurmscriptd");
  });
  return all;
}

std::string describe(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) {
    auto comm = read_file(std::filesystem::path("/proc") / std::to_string(pid) / "cmdline");
    std::replace(comm.begin(), comm.end(), '\0', ' ');
    out += fmt::format("{} ({}) ", pid, comm.substr(0, 80));
  }
  return out;
}

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

SlurmSweep::~SlurmSweep() {
  m_cluster.reset();
  for (const auto& node : {"n1", "n2"}) {
    for (const auto& app : specctl::sim::live_app_entries(gpu_dir(node))) {
      if (app.pid > 1 && app.pid != ::getpid()) {
        ::kill(app.pid, SIGKILL);
      }
    }
  }
}

bool SlurmSweep::start() {
  if (auto why = SlurmCluster::unavailable()) {
    skip(*why);
    return false;
  }
  std::filesystem::create_directories(m_dir.path() / "cluster");
  try {
    m_cluster = std::make_unique<SlurmCluster>(m_dir.path() / "cluster");
  } catch (const std::exception& e) {
    FAIL("the Slurm test cluster did not start: " << std::string(e.what()));
  }
  for (const auto& node : m_cluster->node_names()) {
    std::filesystem::create_directories(gpu_dir(node));
  }
  return true;
}

std::map<std::string, std::filesystem::path> SlurmSweep::gpu_dirs() const {
  return {{"n1", gpu_dir("n1")}, {"n2", gpu_dir("n2")}};
}

std::filesystem::path SlurmSweep::log() const {
  return m_dir.path() / fmt::format("specctl-{}.log", m_runs);
}

std::string SlurmSweep::output() const {
  return read_file(log());
}

void SlurmSweep::write(const std::vector<std::string>& names, const std::string& load, int speed, int gpus,
                       const std::string& slurm_extra, const std::string& health_timeout,
                       const std::string& more_hosts) {
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

std::unique_ptr<Process> SlurmSweep::start_run(std::vector<std::string> args, Reach reach) {
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
  env["HOME"] = m_dir.home().string();
  return std::make_unique<Process>(argv, log(), env);
}

int SlurmSweep::run(std::vector<std::string> args, Reach reach) {
  auto process = start_run(std::move(args), reach);
  return process->wait_exit_code(k_sweep_timeout).value_or(-1);
}

std::string SlurmSweep::job_state(const std::string& id) const {
  auto shown = m_cluster->run("scontrol show job --oneliner " + id);
  auto at = shown.output.find("JobState=");
  return at == std::string::npos ? "gone" : shown.output.substr(at + 9, shown.output.find(' ', at) - at - 9);
}

std::string SlurmSweep::jobs_report() const {
  std::string report;
  for (const auto& submitted : journal_events(out(), "slurm_submitted")) {
    const auto id = submitted.value("job_id", "");
    const std::filesystem::path job_dir = submitted.value("job_dir", "");
    // Slurm's state, reason, run time and node, out of scontrol's 60-odd fields.
    auto shown = m_cluster->run("scontrol show job --oneliner " + id).output;
    std::string said;
    for (const char* field : {"JobState=", "Reason=", "RunTime=", "NodeList="}) {
      auto at = shown.find(std::string(" ") + field);
      said += at == std::string::npos ? "" : shown.substr(at, shown.find(' ', at + 1) - at);
    }
    report += fmt::format("job {} ({}):{}\n", id, submitted.value("variant", ""), said);
    auto output = read_file(job_dir / fmt::format("slurm-{}.out", id));
    report += "  output, last 2000 bytes: " + output.substr(output.size() > 2000 ? output.size() - 2000 : 0) + "\n";
    auto events = journal(job_dir / "run");
    for (std::size_t i = events.size() > 8 ? events.size() - 8 : 0; i < events.size(); ++i) {
      report += "  journal: " + events[i].dump() + "\n";
    }
  }
  return report;
}

bool SlurmSweep::drained() const {
  return wait_until([&] { return job_processes(*m_cluster).empty(); }, k_drain_timeout);
}

} // namespace slurm_test
