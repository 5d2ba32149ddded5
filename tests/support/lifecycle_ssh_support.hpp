#pragma once

// Test support for the server lifecycle suites, on this machine
// (test_server_lifecycle.cpp) and over SSH (test_server_lifecycle_ssh.cpp):
// specsim configurations through the real experiment loader, a node whose
// nvidia-smi is specsim's fake one, a server started behind specctl's back,
// workers orphaned the way SGLang leaves them, and a guard that kills what a
// test started and nothing else. Every wait has a deadline.

#include <doctest/doctest.h>

#include "sshd.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/local_host.hpp>
#include <specctl/server/gpus.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/util/shell.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <expected>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace specctl::test {

// Where the build puts specsim (and so the fake nvidia-smi).
inline const std::string k_lifecycle_bindir = std::string(SPECCTL_TEST_BINARY_DIR) + "/bin";

// Generous: a tp-2 specsim loads in a fraction of a second, but a loaded CI machine
// with a second SSH hop per query can take many times that.
inline constexpr auto k_stray_timeout = std::chrono::seconds{30};
// Workers take their memory in steps during the load; past this they hold most of it.
inline constexpr std::uint64_t k_loaded_worker_mib = 10'000;

inline bool any_line_contains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const auto& l) { return l.find(text) != std::string::npos; });
}

// The message of a failed result, for REQUIRE_MESSAGE; empty on success.
template <typename T> std::string error_text(const std::expected<T, Error>& result) {
  return result ? std::string() : std::string(result.error().what());
}

// Writes an experiment with one specsim server to `dir`/experiment.yaml and returns that
// server resolved through the real loader and template: tp 2 on the fake GPUs in
// `gpu_dir`, on `port`, with `knobs` (more flow-mapping entries) and `extra` (more
// lines of the `server` block).
inline server::ServerConfig specsim_config(const std::filesystem::path& dir, const std::filesystem::path& gpu_dir,
                                           int port, const std::string& knobs, const std::string& extra = "",
                                           const std::string& tmpl = "specsim") {
  auto file = dir / "experiment.yaml";
  std::ofstream(file) << fmt::format(R"(name: life
server:
  template: {}
  model: /models/sim
  port: {}
  knobs: {{tp: 2, sim_gpu_dir: {}, {}}}
  health: {{timeout: 60s, interval: 200ms, stall: 20s}}
  cleanup: {{grace: 2s, timeout: 10s}}
{}
variants: [{{name: v}}]
benchmarks: [{{name: s, kind: single_stream}}]
)",
                                     tmpl, port, gpu_dir.string(), knobs, extra);
  util::Diagnostics diag;
  auto e = experiment::load_experiment(file.string(), diag);
  for (const auto& d : diag.items()) {
    MESSAGE(d.str());
  }
  REQUIRE_FALSE(diag.has_errors());
  return e.variants.at(0).server;
}

// A GPU node as specctl finds one: nvidia-smi on PATH. Here it is specsim's fake one
// (a link in `bin_dir`) reading the fake GPUs in `gpu_dir`. sshd gives a session a
// fixed environment, so every command line is run with these two set first; the
// commands still go through `inner` (an SSH host) unchanged otherwise.
class NodeWithFakeGpus final : public remote::Host {
public:
  NodeWithFakeGpus(remote::Host& inner, const std::filesystem::path& bin_dir, const std::filesystem::path& gpu_dir)
      : m_inner(inner),
        m_prefix(fmt::format("PATH={}:\"$PATH\" SPECSIM_GPU_DIR={}; export PATH SPECSIM_GPU_DIR; ",
                             util::shell_quote(bin_dir.string()), util::shell_quote(gpu_dir.string()))) {}

  std::string describe() const override { return m_inner.describe(); }

  std::expected<remote::CommandResult, Error> exec(const std::string& command_line, util::Duration timeout) override {
    return m_inner.exec(m_prefix + command_line, timeout);
  }

  std::expected<int, Error> open_tunnel(const std::string& target_host, int target_port) override {
    return m_inner.open_tunnel(target_host, target_port);
  }

private:
  remote::Host& m_inner;
  std::string m_prefix;
};

// Makes `dir`/bin/nvidia-smi a link to specsim, for PATH.
inline void link_fake_nvidia_smi(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "bin");
  std::filesystem::create_symlink(k_lifecycle_bindir + "/specsim", dir / "bin" / "nvidia-smi");
}

// Starts `argv` on `host` in a session of its own, untagged (a server specctl did not
// start), logging to `log`; returns its pid.
inline int start_stray(remote::Host& host, const std::vector<std::string>& argv, const std::filesystem::path& log) {
  auto started = host.exec(fmt::format("setsid {} > {} 2>&1 < /dev/null & echo $!", util::shell_join(argv),
                                       util::shell_quote(log.string())));
  REQUIRE_MESSAGE(started, error_text(started));
  int pid = std::atoi(started->out.c_str());
  REQUIRE_MESSAGE(pid > 1, "no pid from: " << started->out << started->err);
  return pid;
}

// Leaves workers behind the way a crashed SGLang does: starts `argv` (a specsim server
// with the orphan-workers fault) untagged on `host`, waits until each of its `tp`
// workers holds its memory, SIGKILLs the server, and returns the workers as the node's
// nvidia-smi lists them, re-parented and still holding their GPUs.
inline std::vector<server::ComputeApp> orphan_workers(remote::Host& host, const std::vector<std::string>& argv,
                                                      const std::filesystem::path& log, std::size_t tp = 2) {
  int parent = start_stray(host, argv, log);
  auto loaded = [&] {
    auto snapshot = server::query_gpus(host, std::nullopt);
    return snapshot && snapshot->apps.size() == tp &&
           std::all_of(snapshot->apps.begin(), snapshot->apps.end(),
                       [](const auto& app) { return app.used_mib.value_or(0) > k_loaded_worker_mib; });
  };
  auto deadline = std::chrono::steady_clock::now() + k_stray_timeout;
  while (!loaded() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  REQUIRE_MESSAGE(loaded(), "the workers did not take their memory; the server's log:\n" << read_file(log));
  REQUIRE(remote::signal_pids(host, {parent}, SIGKILL));
  auto dead = [&] {
    auto alive = remote::is_alive(host, parent);
    return alive && !*alive;
  };
  while (!dead() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  REQUIRE_MESSAGE(dead(), "the server " << parent << " outlived SIGKILL");
  auto orphans = server::query_gpus(host, std::nullopt);
  REQUIRE_MESSAGE(orphans, error_text(orphans));
  REQUIRE(orphans->apps.size() == tp);
  return orphans->apps;
}

// Whether `pid` runs on this machine (a zombie does not).
inline bool running_here(int pid) {
  auto stat = read_file(std::filesystem::path("/proc") / std::to_string(pid) / "stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Kills, on this machine, what a lifecycle test started under `sandbox` and nothing
// else: processes whose command line names the sandbox (servers given its GPU dir, the
// shells around them), workers registered in its fake GPU state `gpu_dir` (orphaned
// ones carry only "sglang::scheduler_TPn"), and processes carrying one of `tags`.
inline void kill_sandbox_processes(const std::filesystem::path& sandbox, const std::filesystem::path& gpu_dir,
                                   const std::vector<std::string>& tags) {
  std::vector<int> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    auto cmdline = read_file(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    int pid = std::atoi(name.c_str());
    if (pid != ::getpid() && cmdline.find(sandbox.string()) != std::string::npos) {
      pids.push_back(pid);
    }
  }
  // The fake nvidia-smi counts a registered pid only while it is the process that registered.
  auto apps =
      run_program({k_lifecycle_bindir + "/specsim", "nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"},
                  sandbox, {"SPECSIM_GPU_DIR=" + gpu_dir.string()});
  std::istringstream listed(apps.exit_code == 0 ? apps.output : "");
  for (int pid = 0; listed >> pid;) {
    pids.push_back(pid);
  }
  remote::LocalHost local;
  for (const auto& tag : tags) {
    if (auto tagged = remote::find_tagged(local, tag)) {
      pids.insert(pids.end(), tagged->begin(), tagged->end());
    }
  }
  for (int pid : pids) {
    if (pid > 1 && pid != ::getpid()) {
      ::kill(pid, SIGKILL);
    }
  }
}

} // namespace specctl::test
