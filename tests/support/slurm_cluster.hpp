#pragma once

// Test support: a real Slurm cluster of a few nodes on 127.0.0.1.
//
//   if (auto why = specctl::test::SlurmCluster::unavailable()) { specctl::test::skip(*why); return; }
//   specctl::test::TempDir dir("specctl-slurm");
//   specctl::test::SlurmCluster cluster(dir.path());   // throws with the daemons' logs
//   auto submitted = cluster.run("sbatch --parsable --gres=gpu:2 --wrap 'echo $CUDA_VISIBLE_DEVICES'");
//
// One munged with its own key and socket, one slurmctld and one slurmd per
// node ("n1", "n2", ...), each on its own free port, all in the foreground
// and all configured from files in the given folder: nothing is read from or
// written to /etc/slurm, /etc/munge, /var/spool or /run. The fake GPUs are
// links to /dev/null, because slurmd only counts GPUs that have device files.
// The destructor cancels every job, stops every daemon it started by pid and
// kills what is left of the jobs, also when a test fails.

#include "process.hpp"
#include "skip.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace specctl::test {

// The cluster waits this long for every node to be idle before giving up.
inline constexpr auto k_slurm_start_timeout = std::chrono::seconds{30};
// A client command (sbatch, squeue, scontrol, ...) that takes longer is killed:
// they wait at most MessageTimeout per call, so only a hung controller gets there.
inline constexpr auto k_slurm_command_timeout = std::chrono::seconds{30};
// How long a daemon gets to exit after SIGTERM before it gets SIGKILL.
inline constexpr auto k_slurm_stop_grace = std::chrono::seconds{5};
// How long the destructor waits for cancelled jobs to leave the queue.
inline constexpr auto k_slurm_drain_timeout = std::chrono::seconds{15};

struct SlurmClusterOptions {
  int nodes = 2;
  int gpus_per_node = 4;
  // CPUs declared per node; 0 takes this machine's count. More than the
  // machine has makes slurmd register as INVAL ("Low CPUs").
  int cpus_per_node = 0;
  // Must not exceed this machine's memory, for the same reason.
  int memory_mb_per_node = 1024;
  std::chrono::steady_clock::duration start_timeout = k_slurm_start_timeout;
};

class SlurmCluster {
public:
  // Why the cluster cannot run here (a program is not installed, or
  // SPECCTL_TEST_WITHOUT names "slurm"), or nothing.
  static std::optional<std::string> unavailable();

  // Starts the cluster in `dir` (an existing, empty folder that outlives this
  // object) and waits until every node is idle. Throws std::runtime_error
  // with the tails of the daemons' logs when it does not get there.
  explicit SlurmCluster(std::filesystem::path dir, SlurmClusterOptions options = {});
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;
  ~SlurmCluster();

  const std::filesystem::path& dir() const { return m_dir; }
  const std::filesystem::path& conf_path() const { return m_conf; }
  // What a client process needs in its environment to talk to this cluster.
  std::vector<std::string> env() const { return {"SLURM_CONF=" + m_conf.string()}; }
  // "n1", "n2", ...
  std::vector<std::string> node_names() const;
  int controller_port() const { return m_controller_port; }

  // Runs `command` with /bin/sh in dir(), with env() added; stdout and stderr
  // together. Exit code -1 when it did not finish within `timeout`.
  ProgramResult run(const std::string& command,
                    std::chrono::steady_clock::duration timeout = k_slurm_command_timeout) const;

  // munged, slurmctld and the slurmds, while they run.
  std::vector<pid_t> daemon_pids() const;
  // Every live process that belongs to this cluster: the daemons, their
  // helpers (slurmscriptd, slurmstepd) and the jobs' processes, found by the
  // SLURM_CONF in their environment (slurmstepd detaches from slurmd, so it
  // is nobody's child here).
  std::vector<pid_t> process_pids() const;
  // The last lines of every daemon's log, to quote when something fails.
  std::string log_tails(std::size_t lines = 20) const;

  // Cancels every job, stops the daemons (SIGTERM, then SIGKILL after a
  // grace period) and kills the processes left. Safe to call twice.
  void stop();

private:
  struct Daemon {
    std::string name; // "munged", "slurmctld", "slurmd-n1"
    pid_t pid = -1;
    std::filesystem::path log;
  };

  void prepare_files();
  // munged with its own key and socket; it outlives relaunches of the rest.
  void start_munge();
  void write_config();
  void launch();
  void wait_until_idle();
  void start_daemon(const std::string& name, const std::vector<std::string>& argv);
  // Throws when a daemon has exited, quoting its log.
  void check_daemons_alive();
  void cancel_jobs();
  void stop_daemon(Daemon& daemon);

  std::filesystem::path m_dir;
  std::filesystem::path m_conf;
  std::filesystem::path m_munge_socket;
  SlurmClusterOptions m_options;
  int m_controller_port = -1;
  std::vector<int> m_node_ports;
  // In start order; stopped in reverse.
  std::vector<Daemon> m_daemons;
};

} // namespace specctl::test
