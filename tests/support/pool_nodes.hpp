#pragma once

// Test support: GPU nodes for host-pool sweeps, all on this machine. Each node is
// a test sshd on a loopback address of its own (127.0.0.2, 127.0.0.3, ...) whose
// sessions find specsim's fake nvidia-smi on PATH and their own fake GPUs in
// SPECSIM_GPU_DIR, plus a specctl state folder of its own. So a server started
// through node A registers its workers in A's GPUs only, and A's cleanup sees
// neither B's GPU processes nor B's servers.
//
//   auto a = FakeGpuNode::start("node-a", "127.0.0.2", dir, fake_gpu_bin);
//   experiment << "hosts:\n" << (*a)->host_entry();
//
// Used by tests/pool/ and bench/pool/; no doctest here. The destructor kills
// whatever servers and GPU workers a failed run left on the node.

#include "sshd.hpp"

#include <specctl/sim/gpu_state.hpp>

#include <csignal>
#include <expected>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace specctl::test {

// The live (not zombie) processes that carry SPECCTL_TAG=tag in their environment.
inline std::vector<pid_t> live_tagged_processes(const std::string& tag) {
  std::vector<pid_t> pids;
  const std::string needle = "SPECCTL_TAG=" + tag;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    auto pid = static_cast<pid_t>(std::stol(name));
    if (!sim::process_start_time(pid)) {
      continue;
    }
    std::istringstream vars(detail::read_file(it->path() / "environ"));
    std::string var;
    while (std::getline(vars, var, '\0')) {
      if (var == needle) {
        pids.push_back(pid);
        break;
      }
    }
  }
  return pids;
}

// The SPECCTL_TAG a process was started with; empty when it has none or is gone.
inline std::string tag_of(pid_t pid) {
  std::istringstream vars(detail::read_file(std::filesystem::path("/proc") / std::to_string(pid) / "environ"));
  std::string var;
  while (std::getline(vars, var, '\0')) {
    if (var.starts_with("SPECCTL_TAG=")) {
      return var.substr(std::string_view("SPECCTL_TAG=").size());
    }
  }
  return {};
}

class FakeGpuNode {
public:
  // `root` holds the node's folders (`root`/`name`/gpus and state); `fake_gpu_bin` is
  // the build's bin/fake-gpu, where nvidia-smi is a link to specsim.
  static std::expected<std::unique_ptr<FakeGpuNode>, std::string> start(const std::string& name,
                                                                        const std::string& address,
                                                                        const std::filesystem::path& root,
                                                                        const std::string& fake_gpu_bin) {
    std::unique_ptr<FakeGpuNode> node(new FakeGpuNode());
    node->m_name = name;
    node->m_dir = root / name;
    std::error_code ec;
    std::filesystem::create_directories(node->gpu_dir(), ec);
    std::filesystem::create_directories(node->state_dir(), ec);
    if (ec) {
      return std::unexpected(fmt::format("cannot create {}: {}", node->m_dir.string(), ec.message()));
    }
    auto sshd = TestSshd::start({.listen_address = address,
                                 .session_env = {"PATH=" + fake_gpu_bin + ":/usr/local/bin:/usr/bin:/bin",
                                                 "SPECSIM_GPU_DIR=" + node->gpu_dir().string()}});
    if (!sshd) {
      return std::unexpected(sshd.error());
    }
    node->m_sshd = std::move(*sshd);
    return node;
  }

  FakeGpuNode(const FakeGpuNode&) = delete;
  FakeGpuNode& operator=(const FakeGpuNode&) = delete;

  ~FakeGpuNode() {
    kill_leftovers();
    // sshd goes first so no session starts anything more while the folders go.
    m_sshd.reset();
    std::error_code ec;
    std::filesystem::remove_all(m_dir, ec);
  }

  const std::string& name() const { return m_name; }
  TestSshd& sshd() const { return *m_sshd; }
  // The node's fake GPUs: SPECSIM_GPU_DIR of every session.
  std::filesystem::path gpu_dir() const { return m_dir / "gpus"; }
  // Where specctl records the servers it starts on this node (the host's state_dir).
  std::filesystem::path state_dir() const { return m_dir / "state"; }

  // This node's entry in an experiment's `hosts` block, indented two spaces.
  std::string host_entry() const {
    return fmt::format("  {}: {{ssh: \"{}@{}:{}\", identity: \"{}\", known_hosts: \"{}\", state_dir: \"{}\"}}\n",
                       m_name, m_sshd->user(), m_sshd->address(), m_sshd->port(), m_sshd->user_key().string(),
                       m_sshd->known_hosts().string(), state_dir().string());
  }

  // The servers specctl started here: one folder per tag in the state folder.
  std::vector<std::string> tags() const {
    std::vector<std::string> found;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(state_dir(), ec), end; !ec && it != end; it.increment(ec)) {
      // A server's folder records it (server.meta); bin/ holds the specctl copy the benchmark jobs run.
      if (std::filesystem::exists(it->path() / "server.meta")) {
        found.push_back(it->path().filename().string());
      }
    }
    return found;
  }

  // The pids holding this node's fake GPUs now.
  std::vector<pid_t> gpu_processes() const {
    std::vector<pid_t> pids;
    for (const auto& app : sim::live_app_entries(gpu_dir())) {
      pids.push_back(app.pid);
    }
    return pids;
  }

  // "TAG (pid N) ..." for every process still running of a server started here, and
  // "gpu worker N" for every process still holding this node's GPUs; empty when clean.
  std::string leftovers() const {
    std::string out;
    for (const auto& tag : tags()) {
      for (pid_t pid : live_tagged_processes(tag)) {
        out += fmt::format("{} (pid {}) ", tag, pid);
      }
    }
    for (pid_t pid : gpu_processes()) {
      out += fmt::format("gpu worker {} ", pid);
    }
    return out;
  }

  void kill_leftovers() const {
    for (const auto& tag : tags()) {
      for (pid_t pid : live_tagged_processes(tag)) {
        ::kill(pid, SIGKILL);
      }
    }
    for (pid_t pid : gpu_processes()) {
      if (pid > 1 && pid != ::getpid()) {
        ::kill(pid, SIGKILL);
      }
    }
  }

private:
  FakeGpuNode() = default;

  std::string m_name;
  std::filesystem::path m_dir;
  std::unique_ptr<TestSshd> m_sshd;
};

} // namespace specctl::test
