#include "gpu_watcher.hpp"

#include "process.hpp"

#include <specctl/sim/gpu_state.hpp>

#include <algorithm>

namespace specctl::test {

GpuWatcher::GpuWatcher(std::map<std::string, std::filesystem::path> gpu_dirs) : m_gpu_dirs(std::move(gpu_dirs)) {
  m_thread = std::thread([this] {
    while (!m_stop.load()) {
      look();
      std::this_thread::sleep_for(k_gpu_watch_interval);
    }
  });
}

GpuWatcher::~GpuWatcher() {
  stop();
}

void GpuWatcher::stop() {
  m_stop = true;
  if (m_thread.joinable()) {
    m_thread.join();
  }
}

void GpuWatcher::look() {
  int busy = 0;
  std::set<std::string> servers;
  for (const auto& [node, dir] : m_gpu_dirs) {
    auto apps = sim::live_app_entries(dir);
    busy += apps.empty() ? 0 : 1;
    for (const auto& app : apps) {
      m_gpus[node].insert(app.gpu);
      if (auto tag = tag_of(app.pid); !tag.empty()) {
        m_tags[node].insert(tag);
        m_gpus_by_tag[tag].insert(app.gpu);
        servers.insert(tag);
      }
    }
  }
  m_most_nodes = std::max(m_most_nodes, busy);
  m_most_servers = std::max(m_most_servers, servers.size());
}

} // namespace specctl::test
