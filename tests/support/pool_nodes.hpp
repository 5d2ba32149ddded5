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

#include "process.hpp"
#include "sshd.hpp"

#include <expected>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

namespace specctl::test {

class FakeGpuNode {
public:
  // `root` holds the node's folders (`root`/`name`/gpus and state); `fake_gpu_bin` is
  // the build's bin/fake-gpu, where nvidia-smi is a link to specsim.
  static std::expected<std::unique_ptr<FakeGpuNode>, std::string> start(const std::string& name,
                                                                        const std::string& address,
                                                                        const std::filesystem::path& root,
                                                                        const std::string& fake_gpu_bin);

  FakeGpuNode(const FakeGpuNode&) = delete;
  FakeGpuNode& operator=(const FakeGpuNode&) = delete;
  ~FakeGpuNode();

  const std::string& name() const { return m_name; }
  TestSshd& sshd() const { return *m_sshd; }
  // The node's fake GPUs: SPECSIM_GPU_DIR of every session.
  std::filesystem::path gpu_dir() const { return m_dir / "gpus"; }
  // Where specctl records the servers it starts on this node (the host's state_dir).
  std::filesystem::path state_dir() const { return m_dir / "state"; }

  // This node's entry in an experiment's `hosts` block, indented two spaces.
  std::string host_entry() const;

  // The servers specctl started here: one folder per tag in the state folder.
  std::vector<std::string> tags() const;

  // The pids holding this node's fake GPUs now.
  std::vector<pid_t> gpu_processes() const;

  // "TAG (pid N) ..." for every process still running of a server started here, and
  // "gpu worker N" for every process still holding this node's GPUs; empty when clean.
  std::string leftovers() const;

  void kill_leftovers() const;

private:
  FakeGpuNode() = default;

  std::string m_name;
  std::filesystem::path m_dir;
  std::unique_ptr<TestSshd> m_sshd;
};

} // namespace specctl::test
