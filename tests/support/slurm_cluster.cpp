#include "slurm_cluster.hpp"

#include "files.hpp"
#include "net.hpp"
#include "wait.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <deque>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace specctl::test {

namespace {

// Daemons that run in the foreground, and the clients the cluster itself uses.
constexpr const char* k_slurm_programs[] = {"munged",  "slurmctld", "slurmd", "sbatch",
                                            "scancel", "scontrol",  "sinfo",  "squeue"};
// How often the cluster asks sinfo whether the nodes are idle yet.
constexpr auto k_idle_poll_interval = std::chrono::milliseconds{250};
// How long munged gets to create its socket.
constexpr auto k_munge_start_timeout = std::chrono::seconds{10};
// A free port found by binding may be taken before slurmd binds it; a
// daemon that exits at start is then retried with new ports this often.
constexpr int k_launch_attempts = 3;
constexpr std::size_t k_munge_key_bytes = 1024;

// Daemons live in /usr/sbin, which is not in every user's PATH.
std::string locate(const std::string& name) {
  auto found = find_program(name);
  if (found.find('/') != std::string::npos && ::access(found.c_str(), X_OK) == 0) {
    return found;
  }
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    auto candidate = std::string(dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string tail_of(const std::filesystem::path& path, std::size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) {
      last.pop_front();
    }
  }
  std::string text;
  for (const auto& kept : last) {
    text += "  " + kept + "\n";
  }
  return text;
}

// "n[1-2]", or "n1" for one node: slurm.conf's host list syntax.
std::string range(const std::string& prefix, int first, int last) {
  if (first == last) {
    return prefix + std::to_string(first);
  }
  return prefix + "[" + std::to_string(first) + "-" + std::to_string(last) + "]";
}

} // namespace

std::optional<std::string> SlurmCluster::unavailable() {
  std::vector<std::string> missing;
  for (const char* program : k_slurm_programs) {
    if (pretend_missing("slurm") || locate(program).empty()) {
      missing.emplace_back(program);
    }
  }
  if (missing.empty()) {
    return std::nullopt;
  }
  std::string list;
  for (const auto& name : missing) {
    list += (list.empty() ? "" : ", ") + name;
  }
  return "no Slurm (" + list + " not installed; scripts/setup.sh --tests installs slurmctld slurmd slurm-client munge)";
}

SlurmCluster::SlurmCluster(std::filesystem::path dir, SlurmClusterOptions options)
    : m_dir(std::move(dir)), m_conf(m_dir / "slurm.conf"), m_munge_socket(m_dir / "munge" / "munge.sock"),
      m_options(options) {
  if (m_options.cpus_per_node <= 0) {
    m_options.cpus_per_node = std::max(1U, std::thread::hardware_concurrency());
  }
  // The destructor does not run when the constructor throws.
  try {
    prepare_files();
    start_munge();
    launch();
  } catch (...) {
    stop();
    throw;
  }
}

SlurmCluster::~SlurmCluster() {
  stop();
}

std::vector<std::string> SlurmCluster::node_names() const {
  std::vector<std::string> names;
  for (int i = 1; i <= m_options.nodes; ++i) {
    names.push_back("n" + std::to_string(i));
  }
  return names;
}

ProgramResult SlurmCluster::run(const std::string& command, std::chrono::steady_clock::duration timeout) const {
  return run_program({"/bin/sh", "-c", "cd " + shell_quote(m_dir.string()) + " && " + command}, m_dir, env(), timeout);
}

std::vector<pid_t> SlurmCluster::daemon_pids() const {
  std::vector<pid_t> pids;
  for (const auto& daemon : m_daemons) {
    if (daemon.pid > 0) {
      pids.push_back(daemon.pid);
    }
  }
  return pids;
}

std::vector<pid_t> SlurmCluster::process_pids() const {
  std::vector<pid_t> pids = daemon_pids();
  const std::string marker = "SLURM_CONF=" + m_conf.string();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    auto pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid() || std::find(pids.begin(), pids.end(), pid) != pids.end()) {
      continue;
    }
    std::istringstream environment(read_file(entry.path() / "environ"));
    std::string variable;
    while (std::getline(environment, variable, '\0')) {
      if (variable == marker) {
        if (process_alive(pid)) {
          pids.push_back(pid);
        }
        break;
      }
    }
  }
  return pids;
}

std::string SlurmCluster::log_tails(std::size_t lines) const {
  std::string text;
  for (const auto& daemon : m_daemons) {
    text += daemon.name + " (" + daemon.log.string() + "):\n" + tail_of(daemon.log, lines);
  }
  return text;
}

void SlurmCluster::stop() {
  bool controller_up = std::any_of(m_daemons.begin(), m_daemons.end(),
                                   [](const Daemon& d) { return d.name == "slurmctld" && d.pid > 0; });
  if (controller_up) {
    cancel_jobs();
  }
  // Everything that carries our SLURM_CONF, found before the daemons go:
  // slurmstepd and the jobs' processes outlive slurmd by design.
  auto daemons = daemon_pids();
  auto leftovers = process_pids();
  std::erase_if(leftovers, [&](pid_t pid) { return std::find(daemons.begin(), daemons.end(), pid) != daemons.end(); });
  // Slurm daemons first (they need munged to say goodbye), all at once so
  // that their grace periods overlap; munged last.
  for (auto& daemon : m_daemons) {
    if (daemon.pid > 0 && daemon.name != "munged") {
      ::kill(daemon.pid, SIGTERM);
    }
  }
  for (auto it = m_daemons.rbegin(); it != m_daemons.rend(); ++it) {
    stop_daemon(*it);
  }
  for (pid_t pid : process_pids()) {
    leftovers.push_back(pid);
  }
  for (pid_t pid : leftovers) {
    if (process_alive(pid)) {
      ::kill(pid, SIGKILL);
    }
  }
}

void SlurmCluster::prepare_files() {
  namespace fs = std::filesystem;
  fs::create_directories(m_dir / "munge");
  fs::create_directories(m_dir / "state");
  fs::create_directories(m_dir / "dev");
  for (const auto& node : node_names()) {
    fs::create_directories(m_dir / "spool" / node);
  }
  // munged refuses a key that others can read.
  auto key = m_dir / "munge" / "munge.key";
  std::string bytes(k_munge_key_bytes, '\0');
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    throw std::runtime_error("cannot read /dev/urandom for the munge key");
  }
  write_file(key, bytes);
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
  // slurmd counts a GPU only when gres.conf names a device file for it.
  for (int i = 0; i < m_options.gpus_per_node; ++i) {
    fs::create_symlink("/dev/null", m_dir / "dev" / ("nvidia" + std::to_string(i)));
  }
  // Keeps the spank plugins listed in /etc/slurm/plugstack.conf.d out of the jobs.
  write_file(m_dir / "plugstack.conf", "");
}

void SlurmCluster::start_munge() {
  namespace fs = std::filesystem;
  auto key = m_dir / "munge" / "munge.key";
  // --force: munged insists that everyone may traverse the socket's folders,
  // and a test's temporary folder is 0700.
  start_daemon("munged", {locate("munged"), "--foreground", "--force", "--socket=" + m_munge_socket.string(),
                          "--key-file=" + key.string(), "--pid-file=" + (m_dir / "munge" / "munged.pid").string(),
                          "--seed-file=" + (m_dir / "munge" / "munged.seed").string()});
  auto deadline = std::chrono::steady_clock::now() + k_munge_start_timeout;
  std::error_code ec;
  while (!fs::exists(m_munge_socket, ec)) {
    check_daemons_alive();
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("munged did not create " + m_munge_socket.string() + " within 10s:\n" + log_tails());
    }
    std::this_thread::sleep_for(k_poll_interval);
  }
}

void SlurmCluster::write_config() {
  const auto dir = m_dir.string();
  const int nodes = m_options.nodes;
  const int gpus = m_options.gpus_per_node;
  std::ostringstream conf;
  conf << "ClusterName=specctltest\n"
       // slurmctld only runs where SlurmctldHost names this machine, and it
       // accepts "localhost" whatever the hostname is.
       << "SlurmctldHost=localhost(127.0.0.1)\n"
       << "SlurmctldPort=" << m_controller_port << "\n"
       << "SlurmUser=root\n"
       << "SlurmdUser=root\n"
       << "AuthType=auth/munge\n"
       << "CredType=cred/munge\n"
       // Daemons and clients alike reach our munged through this, not /run/munge.
       << "AuthInfo=socket=" << m_munge_socket.string() << "\n"
       << "StateSaveLocation=" << dir << "/state\n"
       << "SlurmdSpoolDir=" << dir << "/spool/%n\n"
       << "SlurmctldPidFile=" << dir << "/slurmctld.pid\n"
       << "SlurmdPidFile=" << dir << "/slurmd-%n.pid\n"
       << "PlugStackConfig=" << dir << "/plugstack.conf\n"
       << "MailProg=/bin/true\n"
       // cons_tres is what binds GPUs to jobs (CUDA_VISIBLE_DEVICES); the
       // default cons_res leaves it empty.
       << "SelectType=select/cons_tres\n"
       << "SelectTypeParameters=CR_Core\n"
       << "GresTypes=gpu\n"
       // The default, proctrack/cgroup, fails every job launch without a
       // writable cgroup hierarchy ("Plugin initialization failed").
       << "ProctrackType=proctrack/linuxproc\n"
       << "TaskPlugin=task/none\n"
       << "JobAcctGatherType=jobacct_gather/none\n"
       << "AccountingStorageType=accounting_storage/none\n"
       << "JobCompType=jobcomp/none\n"
       << "MpiDefault=none\n"
       << "SwitchType=switch/none\n"
       // Generous: a loaded test machine must not have its nodes marked DOWN.
       << "SlurmdTimeout=60\n"
       << "MessageTimeout=10\n"
       // A node that was DOWN comes back as soon as its slurmd registers.
       << "ReturnToService=2\n"
       // Seconds between SIGTERM and SIGKILL when a job is cancelled or times out.
       // Long enough for `specctl job` to tear its server down at SIGTERM on a loaded
       // machine (a sanitizer build included) before the SIGKILL.
       << "KillWait=10\n"
       << "InactiveLimit=0\n"
       // Finished jobs stay visible to scontrol for five minutes.
       << "MinJobAge=300\n";
  for (int i = 0; i < nodes; ++i) {
    conf << "NodeName=n" << (i + 1) << " NodeAddr=127.0.0.1 Port=" << m_node_ports.at(static_cast<std::size_t>(i))
         << " CPUs=" << m_options.cpus_per_node << " RealMemory=" << m_options.memory_mb_per_node;
    if (gpus > 0) {
      conf << " Gres=gpu:" << gpus;
    }
    conf << " State=UNKNOWN\n";
  }
  conf << "PartitionName=test Nodes=" << range("n", 1, nodes) << " Default=YES MaxTime=INFINITE State=UP\n";
  write_file(m_conf, conf.str());

  std::string gres;
  if (gpus > 0) {
    gres = "NodeName=" + range("n", 1, nodes) + " Name=gpu File=" + range(dir + "/dev/nvidia", 0, gpus - 1) + "\n";
  }
  write_file(m_dir / "gres.conf", gres);
}

void SlurmCluster::launch() {
  for (int attempt = 1;; ++attempt) {
    m_controller_port = free_port();
    m_node_ports.clear();
    while (m_node_ports.size() < static_cast<std::size_t>(m_options.nodes)) {
      int port = free_port();
      if (port != m_controller_port &&
          std::find(m_node_ports.begin(), m_node_ports.end(), port) == m_node_ports.end()) {
        m_node_ports.push_back(port);
      }
    }
    write_config();
    try {
      start_daemon("slurmctld", {locate("slurmctld"), "-D"});
      for (const auto& node : node_names()) {
        start_daemon("slurmd-" + node, {locate("slurmd"), "-D", "-N", node});
      }
      wait_until_idle();
      return;
    } catch (const std::runtime_error&) {
      bool exited = std::any_of(m_daemons.begin(), m_daemons.end(), [](const Daemon& d) { return d.pid <= 0; });
      if (!exited || attempt >= k_launch_attempts) {
        throw;
      }
      // Probably a port taken meanwhile: stop the Slurm daemons, keep munged.
      for (auto& daemon : m_daemons) {
        if (daemon.name != "munged") {
          stop_daemon(daemon);
        }
      }
      std::erase_if(m_daemons, [](const Daemon& d) { return d.name != "munged"; });
    }
  }
}

void SlurmCluster::wait_until_idle() {
  std::string expected;
  for (const auto& node : node_names()) {
    expected += node + " idle\n";
  }
  auto deadline = std::chrono::steady_clock::now() + m_options.start_timeout;
  std::string last;
  while (true) {
    check_daemons_alive();
    auto nodes = run("sinfo --noheader --Node --format='%N %T'", k_slurm_command_timeout);
    last = nodes.output;
    if (nodes.exit_code == 0 && last == expected) {
      return;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("the Slurm nodes were not idle in time; sinfo said:\n" + last + log_tails());
    }
    std::this_thread::sleep_for(k_idle_poll_interval);
  }
}

void SlurmCluster::start_daemon(const std::string& name, const std::vector<std::string>& argv) {
  Daemon daemon{name, -1, m_dir / (name + ".log")};
  std::error_code ec;
  std::filesystem::remove(daemon.log, ec);
  std::vector<std::string> environment;
  if (name != "munged") {
    environment = env();
  }
  daemon.pid = spawn(argv, daemon.log, environment);
  if (daemon.pid <= 0) {
    throw std::runtime_error("cannot start " + argv.at(0));
  }
  m_daemons.push_back(daemon);
}

void SlurmCluster::check_daemons_alive() {
  for (auto& daemon : m_daemons) {
    int status = 0;
    if (daemon.pid > 0 && ::waitpid(daemon.pid, &status, WNOHANG) == daemon.pid) {
      daemon.pid = -1;
      throw std::runtime_error(daemon.name + " exited at start (status " + std::to_string(status) + "):\n" +
                               log_tails());
    }
  }
}

void SlurmCluster::cancel_jobs() {
  run("squeue --noheader --format=%i | xargs -r scancel", k_slurm_command_timeout);
  auto deadline = std::chrono::steady_clock::now() + k_slurm_drain_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto queue = run("squeue --noheader --format=%i", k_slurm_command_timeout);
    if (queue.exit_code != 0 || queue.output.empty()) {
      return;
    }
    std::this_thread::sleep_for(k_idle_poll_interval);
  }
}

void SlurmCluster::stop_daemon(Daemon& daemon) {
  if (daemon.pid <= 0) {
    return;
  }
  ::kill(daemon.pid, SIGTERM);
  // Kills it when the grace period is over.
  wait_for(daemon.pid, k_slurm_stop_grace);
  daemon.pid = -1;
}

} // namespace specctl::test
