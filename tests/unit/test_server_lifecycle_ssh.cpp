#include <doctest/doctest.h>

#include "../support/sshd.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/ssh_host.hpp>
#include <specctl/server/lifecycle.hpp>

#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <thread>

using namespace specctl;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string k_bindir = std::string(SPECCTL_TEST_BINARY_DIR) + "/bin";

// The node is this machine reached through a real sshd on 127.0.0.1; the server is specsim.
struct SshSandbox {
  std::unique_ptr<test::TestSshd> sshd;
  std::unique_ptr<remote::SshHost> host;
  fs::path dir;

  SshSandbox() {
    auto started = test::TestSshd::start();
    REQUIRE_MESSAGE(started, (started ? std::string() : started.error()));
    sshd = std::move(*started);
    auto connected = remote::connect_ssh(sshd->target());
    REQUIRE_MESSAGE(connected, (connected ? std::string() : std::string(connected.error().what())));
    host = std::move(*connected);
    dir = sshd->dir() / "node";
    fs::create_directories(dir / "gpus");
    setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  }

  server::ServerConfig config(const std::string& knobs) {
    auto file = dir / "experiment.yaml";
    std::ofstream(file) << fmt::format(R"(name: ssh-life
server:
  template: specsim
  model: /models/sim
  port: {}
  knobs: {{tp: 2, sim_gpu_dir: {}, {}}}
  health: {{timeout: 60s, interval: 200ms, stall: 20s}}
  cleanup: {{grace: 2s, timeout: 10s}}
variants: [{{name: v}}]
benchmarks: [{{name: s, kind: single_stream}}]
)",
                                       test::detail::free_port(), (dir / "gpus").string(), knobs);
    util::Diagnostics diag;
    auto e = experiment::load_experiment(file.string(), diag);
    REQUIRE_FALSE(diag.has_errors());
    return e.variants.at(0).server;
  }
};

} // namespace

TEST_CASE("lifecycle over SSH: ready through the tunnel, surviving a dropped connection mid-load") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 4s");
  util::RecordingReporter reporter;
  auto server = server::launch(*sb.host, config, server::render_launch(config, {k_bindir}), "ssh-ready",
                               (sb.dir / "state").string());
  REQUIRE_MESSAGE(server, (server ? std::string() : std::string(server.error().what())));
  CHECK(server->local_port != config.port);
  std::thread cutter([&] {
    std::this_thread::sleep_for(1500ms);
    sb.sshd->kill_sessions();
  });
  auto loaded = server::wait_ready(*sb.host, *server, config, reporter);
  cutter.join();
  REQUIRE_MESSAGE(loaded, (loaded ? std::string() : std::string(loaded.error().what())));
  CHECK(sb.host->reconnect_count() >= 1);
  CHECK(loaded->load_time >= 3s);
  auto down = server::teardown(*sb.host, *server, config, reporter);
  REQUIRE(down);
  CHECK(remote::find_tagged(*sb.host, "ssh-ready").value().empty());
}

TEST_CASE("lifecycle over SSH: a crash while loading fails fast with the log") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 3s, sim_fault: [crash-load]");
  util::RecordingReporter reporter;
  auto server = server::launch(*sb.host, config, server::render_launch(config, {k_bindir}), "ssh-crash",
                               (sb.dir / "state").string());
  REQUIRE(server);
  auto loaded = server::wait_ready(*sb.host, *server, config, reporter);
  REQUIRE_FALSE(loaded);
  std::string message = loaded.error().what();
  CHECK(message.starts_with("testnode (" + sb.sshd->user() + "@127.0.0.1:"));
  CHECK(message.find("Traceback") != std::string::npos);
  CHECK(server::teardown(*sb.host, *server, config, reporter));
}
