#include "pool_nodes.hpp"
#include "ssh_transport.hpp"

#include <specctl/sim/gpu_state.hpp>

#include <csignal>
#include <fmt/format.h>

#include <unistd.h>

namespace specctl::test {

std::expected<std::unique_ptr<FakeGpuNode>, std::string> FakeGpuNode::start(const std::string& name,
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

FakeGpuNode::~FakeGpuNode() {
  kill_leftovers();
  // sshd goes first so no session starts anything more while the folders go.
  m_sshd.reset();
  std::error_code ec;
  std::filesystem::remove_all(m_dir, ec);
}

std::string FakeGpuNode::host_entry() const {
  return fmt::format("  {}: {{ssh: \"{}@{}:{}\", identity: \"{}\", known_hosts: \"{}\", state_dir: \"{}\"{}}}\n",
                     m_name, m_sshd->user(), m_sshd->address(), m_sshd->port(), m_sshd->user_key().string(),
                     m_sshd->known_hosts().string(), state_dir().string(), ssh_transport_yaml());
}

std::vector<std::string> FakeGpuNode::tags() const {
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

std::vector<pid_t> FakeGpuNode::gpu_processes() const {
  std::vector<pid_t> pids;
  for (const auto& app : sim::live_app_entries(gpu_dir())) {
    pids.push_back(app.pid);
  }
  return pids;
}

std::string FakeGpuNode::leftovers() const {
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

void FakeGpuNode::kill_leftovers() const {
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

} // namespace specctl::test
