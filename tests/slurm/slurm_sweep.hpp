#pragma once

// What the `specctl run` on Slurm tests share (test_slurm_run.cpp): one Slurm
// sweep's world — a real two-node cluster (tests/support/slurm_cluster.hpp),
// n1 and n2, both this machine, four fake GPUs each in a folder of their own,
// an experiment, and the specctl processes the test starts — and what the tests
// read back from it.

#include "../support/process.hpp"
#include "../support/slurm_cluster.hpp"
#include "../support/specsim.hpp"
#include "../support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

namespace slurm_test {

// Generous for a loaded two-core machine: the 4-variant sweep takes about 20 s there.
inline constexpr std::chrono::seconds k_sweep_timeout{240};
inline constexpr std::chrono::seconds k_phase_timeout{120};
inline constexpr std::chrono::seconds k_signal_exit_timeout{90};
// Slurm checks time limits every 30 s: a 1-minute limit ends a job 60 to 90 s
// in, plus KillWait.
inline constexpr std::chrono::seconds k_time_limit_sweep_timeout{240};
// How long the cluster's processes get to go after a job ends (KillWait is 10 s).
inline constexpr std::chrono::seconds k_drain_timeout{30};

// The live processes that run (or ran) under this cluster, the daemons left out:
// the jobs' shells, specctl job, specsim and its workers.
std::vector<pid_t> job_processes(const specctl::test::SlurmCluster& cluster);

// "PID (command line) ..." of each process, to show what was left.
std::string describe(const std::vector<pid_t>& pids);

// CHECKs that variant `name` ran on the cluster and its benchmarks gave figures.
void check_ok_variant(const std::filesystem::path& out, const std::string& name);

class SlurmSweep {
public:
  SlurmSweep() = default;
  SlurmSweep(const SlurmSweep&) = delete;
  SlurmSweep& operator=(const SlurmSweep&) = delete;
  // Jobs first (the cluster's stop cancels them and kills what is left), then
  // whatever held the fake GPUs.
  ~SlurmSweep();

  // False, after saying why (ctest reports the case skipped), when Slurm is not
  // installed; a cluster that is installed and does not start fails the test.
  bool start();

  specctl::test::SlurmCluster& cluster() { return *m_cluster; }
  std::filesystem::path gpu_dir(const std::string& node) const { return m_dir.path() / ("gpus-" + node); }
  // Node -> its fake GPUs, for a GpuWatcher.
  std::map<std::string, std::filesystem::path> gpu_dirs() const;
  std::filesystem::path file() const { return m_dir.path() / "sweep.yaml"; }
  std::filesystem::path out() const { return m_dir.path() / "out"; }
  std::filesystem::path log() const;
  std::string output() const;
  std::filesystem::path dir() const { return m_dir.path(); }

  // Variants `names`, each on its own port (both nodes are this machine), as
  // jobs of `gpus` GPUs each; `slurm_extra` adds lines to the slurm block.
  void write(const std::vector<std::string>& names, const std::string& load, int speed, int gpus,
             const std::string& slurm_extra = "", const std::string& health_timeout = "2m",
             const std::string& more_hosts = "");

  // With Reach::login_node_only the coordinator itself cannot reach the
  // cluster (no SLURM_CONF): only the SSH login node can.
  enum class Reach { here, login_node_only };

  std::unique_ptr<specctl::test::Process> start_run(std::vector<std::string> args, Reach reach = Reach::here);

  int run(std::vector<std::string> args = {}, Reach reach = Reach::here);

  // Slurm's own word on a job: JobState=... of scontrol.
  std::string job_state(const std::string& id) const;

  // For a failure's message: each job the coordinator submitted, Slurm's word on it,
  // the last lines of its output and its payload's last journal events.
  std::string jobs_report() const;

  // Nothing of any job runs any more, within a bound.
  bool drained() const;

private:
  specctl::test::TempDir m_dir;
  std::unique_ptr<specctl::test::SlurmCluster> m_cluster;
  int m_runs = 0;
};

} // namespace slurm_test
