#pragma once

// Test support: watches the fake GPUs of a few nodes while a sweep runs, from a
// thread of its own, and records what held them: which GPU indices of which
// node held a process, the servers (SPECCTL_TAG) whose processes held each
// node's GPUs and which GPUs each server held, and the most nodes and servers
// busy at one moment. So a test can say that a job kept to the GPUs it was
// given, that no node ever saw another's server, or that two variants ran at once.
//
//   GpuWatcher watcher({{"n1", dir / "gpus-n1"}, {"n2", dir / "gpus-n2"}});
//   ... run the sweep ...
//   watcher.stop();
//   CHECK(watcher.most_nodes_at_once() == 2);

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>

namespace specctl::test {

// How often the watcher looks: a variant holds its GPUs for seconds.
inline constexpr std::chrono::milliseconds k_gpu_watch_interval{100};

class GpuWatcher {
public:
  // `gpu_dirs`: node name -> its fake GPU folder (SPECSIM_GPU_DIR).
  explicit GpuWatcher(std::map<std::string, std::filesystem::path> gpu_dirs);
  GpuWatcher(const GpuWatcher&) = delete;
  GpuWatcher& operator=(const GpuWatcher&) = delete;
  ~GpuWatcher();

  // Stops watching; call it before reading what was seen.
  void stop();

  // Node -> GPU indices that held a process at some point.
  const std::map<std::string, std::set<int>>& gpus_used() const { return m_gpus; }
  // Node -> SPECCTL_TAGs of the processes that held its GPUs.
  const std::map<std::string, std::set<std::string>>& tags_seen() const { return m_tags; }
  // Server (SPECCTL_TAG) -> GPU indices its processes held, on whichever node.
  const std::map<std::string, std::set<int>>& gpus_by_tag() const { return m_gpus_by_tag; }
  // The most nodes whose GPUs were held at one moment.
  int most_nodes_at_once() const { return m_most_nodes; }
  // The most servers (distinct tags) holding GPUs at one moment.
  std::size_t most_servers_at_once() const { return m_most_servers; }

private:
  void look();

  std::map<std::string, std::filesystem::path> m_gpu_dirs;
  std::map<std::string, std::set<int>> m_gpus;
  std::map<std::string, std::set<std::string>> m_tags;
  std::map<std::string, std::set<int>> m_gpus_by_tag;
  int m_most_nodes = 0;
  std::size_t m_most_servers = 0;
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

} // namespace specctl::test
