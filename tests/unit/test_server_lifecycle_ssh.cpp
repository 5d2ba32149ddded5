#include <doctest/doctest.h>

#include "../support/lifecycle_ssh_support.hpp"
#include "../support/ssh_testing.hpp"

#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/ssh_host.hpp>
#include <specctl/server/gpus.hpp>
#include <specctl/server/lifecycle.hpp>

#include <filesystem>
#include <fmt/format.h>
#include <thread>

#include <unistd.h>

// The lifecycle of test_server_lifecycle.cpp again, with the node reached through
// a real sshd on 127.0.0.1: every shell line, the log follower and the health
// checks go over SSH (the health checks through the tunnel). ctest runs it twice:
// "unit: lifecycle over SSH" on specctl's own client, "lifecycle openssh: ..."
// through the system ssh (ssh_transport.hpp).

using namespace specctl;
using namespace std::chrono_literals;
using test::any_line_contains;
using test::error_text;
using test::k_lifecycle_bindir;
namespace fs = std::filesystem;

namespace {

// Failures come back in a few polls; this only bounds a broken build on a loaded machine.
constexpr auto k_fails_within = 20s;

// The node is this machine reached through a real sshd on 127.0.0.1; the server is specsim.
// `gpu_node` is the same host with nvidia-smi (specsim's fake) on PATH, for the tests that
// need GPUs. Whatever a test started is killed when it ends, also when it fails.
struct SshSandbox {
  std::unique_ptr<test::TestSshd> sshd = test::require_sshd();
  std::unique_ptr<remote::Host> host;
  fs::path dir;
  std::unique_ptr<test::NodeWithFakeGpus> gpu_node;
  std::vector<std::string> tags;

  SshSandbox() {
    // Before the host's I/O thread exists: setenv races with a getenv on another thread.
    setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
    host = test::require_host_under_test(*sshd);
    // The pass is the one its name says.
    REQUIRE((host->describe().find("(openssh: ") != std::string::npos) == test::testing_openssh());
    dir = sshd->dir() / "node";
    fs::create_directories(gpus());
    test::link_fake_nvidia_smi(dir);
    gpu_node = std::make_unique<test::NodeWithFakeGpus>(*host, dir / "bin", gpus());
  }

  SshSandbox(const SshSandbox&) = delete;
  SshSandbox& operator=(const SshSandbox&) = delete;

  // Servers detach from the SSH session, so stopping sshd would not stop them.
  ~SshSandbox() { test::kill_sandbox_processes(dir, gpus(), tags); }

  fs::path gpus() const { return dir / "gpus"; }
  std::string state_dir() const { return (dir / "state").string(); }

  server::ServerConfig config(const std::string& knobs) {
    return test::specsim_config(dir, gpus(), test::free_port(), knobs);
  }

  // Tags name processes machine-wide: this process's pid keeps them apart from a
  // concurrent run of the same test.
  std::string tag(const std::string& name) {
    tags.push_back(fmt::format("{}-{}", name, ::getpid()));
    return tags.back();
  }

  std::expected<server::RunningServer, Error> start(remote::Host& on, const server::ServerConfig& config,
                                                    const std::string& name) {
    return server::launch(on, config, server::render_launch(config, {k_lifecycle_bindir}), tag(name), state_dir());
  }

  std::string where() const { return host->describe() + ": "; }
};

} // namespace

TEST_CASE("lifecycle over SSH: ready through the tunnel, surviving a dropped connection mid-load") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 4s");
  util::RecordingReporter reporter;
  auto server = sb.start(*sb.host, config, "ssh-ready");
  REQUIRE_MESSAGE(server, error_text(server));
  CHECK(server->local_port != config.port);
  std::thread cutter([&] {
    std::this_thread::sleep_for(1500ms);
    sb.sshd->kill_sessions();
  });
  auto loaded = server::wait_ready(*sb.host, *server, config, reporter);
  cutter.join();
  REQUIRE_MESSAGE(loaded, error_text(loaded));
  CHECK(sb.host->reconnect_count() >= 1);
  CHECK(loaded->load_time >= 3s);
  auto down = server::teardown(*sb.host, *server, config, reporter);
  REQUIRE(down);
  CHECK(remote::find_tagged(*sb.host, server->tag).value().empty());
}

TEST_CASE("lifecycle over SSH: a crash while loading fails fast with the log") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 3s, sim_fault: [crash-load]");
  util::RecordingReporter reporter;
  auto server = sb.start(*sb.host, config, "ssh-crash");
  REQUIRE_MESSAGE(server, error_text(server));
  auto started = std::chrono::steady_clock::now();
  auto loaded = server::wait_ready(*sb.host, *server, config, reporter);
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(loaded);
  std::string message = loaded.error().what();
  INFO(message);
  CHECK(took < k_fails_within);
  CHECK(loaded.error().kind() == ErrorKind::failed);
  CHECK(message.starts_with(sb.where()));
  // It waits for the server to end and names its exit code.
  CHECK(message.find("the server failed while loading (exited with code 1): ") != std::string::npos);
  CHECK(message.find("last log lines:") != std::string::npos);
  CHECK(message.find("Traceback") != std::string::npos);
  // The excerpt shows the load up to the crash.
  CHECK(message.find("  | Multi-thread loading shards: ") != std::string::npos);
  // The server did end, with exit code 1; the error quotes the fatal line, which comes first.
  CHECK(test::wait_until([&] {
    auto code = remote::read_exit_code(*sb.host, server->files);
    return code && *code == std::optional<int>(1);
  }));
  CHECK(server::teardown(*sb.host, *server, config, reporter));
  CHECK(remote::find_tagged(*sb.host, server->tag).value().empty());
}

TEST_CASE("lifecycle over SSH: the OOM line fails the load and is quoted") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 3s, sim_fault: [oom]");
  util::RecordingReporter reporter;
  auto server = sb.start(*sb.host, config, "ssh-oom");
  REQUIRE_MESSAGE(server, error_text(server));
  auto started = std::chrono::steady_clock::now();
  auto loaded = server::wait_ready(*sb.host, *server, config, reporter);
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(loaded);
  std::string message = loaded.error().what();
  INFO(message);
  CHECK(took < k_fails_within);
  CHECK(loaded.error().kind() == ErrorKind::failed);
  // The specific line is quoted, not the traceback's first line.
  CHECK(message.starts_with(sb.where() +
                            "the server failed while loading (exited with code 1): torch.OutOfMemoryError: "
                            "CUDA out of memory. Tried to allocate 2.00 GiB"));
  CHECK(server::teardown(*sb.host, *server, config, reporter));
  CHECK(remote::find_tagged(*sb.host, server->tag).value().empty());
}

TEST_CASE("lifecycle over SSH: a hung load trips the stall timeout") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 60s, sim_fault: ['hang:0.05']");
  config.health.stall = 2s;
  util::RecordingReporter reporter;
  auto server = sb.start(*sb.host, config, "ssh-hang");
  REQUIRE_MESSAGE(server, error_text(server));
  auto started = std::chrono::steady_clock::now();
  auto loaded = server::wait_ready(*sb.host, *server, config, reporter);
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(loaded);
  std::string message = loaded.error().what();
  INFO(message);
  // The log stops 3 s in; the stall is 2 s.
  CHECK(took >= 2s);
  CHECK(took < k_fails_within + 5s);
  CHECK(loaded.error().kind() == ErrorKind::timed_out);
  CHECK(message.starts_with(sb.where()));
  CHECK(message.find("the load made no progress for 2s (health.stall)") != std::string::npos);
  CHECK(message.find("last log lines:") != std::string::npos);
  // Still hanging, not dead: stopping it is teardown's job.
  CHECK(remote::is_alive(*sb.host, server->pid).value());
  auto down = server::teardown(*sb.host, *server, config, reporter);
  REQUIRE_MESSAGE(down, error_text(down));
  CHECK(remote::find_tagged(*sb.host, server->tag).value().empty());
}

TEST_CASE("lifecycle over SSH: a port taken by someone else is refused, naming the holder") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 1s");
  // A server on the node that specctl did not start holds the port.
  auto holder_config = test::specsim_config(sb.dir, sb.gpus(), config.port, "sim_load_time: 0.2s");
  auto argv = server::render_launch(holder_config, {k_lifecycle_bindir}).argv;
  int holder = test::start_stray(*sb.host, argv, sb.dir / "holder.log");
  REQUIRE_MESSAGE(test::wait_until([&] { return test::port_accepts(config.port); }, test::k_stray_timeout),
                  "the holder never listened:\n"
                      << test::read_file(sb.dir / "holder.log"));
  util::RecordingReporter reporter;
  auto cleaned = server::cleanup_before_launch(*sb.host, config, {sb.state_dir()}, reporter);
  REQUIRE_FALSE(cleaned);
  std::string message = cleaned.error().what();
  INFO(message);
  CHECK(cleaned.error().kind() == ErrorKind::failed);
  CHECK(message.starts_with(fmt::format("{}port {} is already in use by pid {} ({}/specsim ", sb.where(), config.port,
                                        holder, k_lifecycle_bindir)));
  CHECK(message.ends_with("), which specctl did not start"));
  // Refused, never touched.
  CHECK(remote::is_alive(*sb.host, holder).value());
  CHECK(test::port_accepts(config.port));
}

TEST_CASE("lifecycle over SSH: orphaned workers are found through nvidia-smi, killed or left alone by policy") {
  SshSandbox sb;
  auto& node = *sb.gpu_node;
  auto config = sb.config("sim_load_time: 1s");
  // A server specctl did not start (no tag), whose workers outlive it the way SGLang's schedulers do.
  auto argv =
      server::render_launch(sb.config("sim_load_time: 0.2s, sim_fault: [orphan-workers]"), {k_lifecycle_bindir}).argv;
  auto orphans = test::orphan_workers(node, argv, sb.dir / "stray.log");
  util::RecordingReporter reporter;

  SUBCASE("outside the policy: reported, never killed") {
    config.cleanup.allow = {"VLLM::*"};
    config.cleanup.timeout = 2s;
    auto cleaned = server::cleanup_before_launch(node, config, {sb.state_dir()}, reporter);
    REQUIRE_FALSE(cleaned);
    std::string message = cleaned.error().what();
    INFO(message);
    CHECK(cleaned.error().kind() == ErrorKind::timed_out);
    CHECK(message.starts_with(sb.where() + "GPUs not free after 2s"));
    for (const auto& app : orphans) {
      INFO("pid ", app.pid, " ", app.name);
      CHECK(message.find(fmt::format("pid {} ({}, ", app.pid, app.name)) != std::string::npos);
      CHECK(
          any_line_contains(reporter.lines(), fmt::format("{}left alone pid {} ({}, ", sb.where(), app.pid, app.name)));
      CHECK(any_line_contains(reporter.lines(), "not named by cleanup.allow (VLLM::*)"));
      CHECK(remote::is_alive(node, app.pid).value());
    }
    CHECK(server::query_gpus(node, std::nullopt).value().apps.size() == 2);
  }
  SUBCASE("named by the policy: each killed by pid and name, GPUs freed") {
    auto cleaned = server::cleanup_before_launch(node, config, {sb.state_dir()}, reporter);
    REQUIRE_MESSAGE(cleaned, error_text(cleaned));
    CHECK(cleaned->gpus_checked);
    CHECK(cleaned->left_alone.empty());
    REQUIRE(cleaned->actions.size() == 2);
    for (const auto& app : orphans) {
      INFO("pid ", app.pid, " ", app.name);
      CHECK(any_line_contains(cleaned->actions, fmt::format("kill pid {} ({}, ", app.pid, app.name)));
      CHECK(any_line_contains(reporter.lines(), fmt::format("{}kill pid {} ({}, ", sb.where(), app.pid, app.name)));
      CHECK_FALSE(remote::is_alive(node, app.pid).value());
    }
    CHECK(server::query_gpus(node, std::nullopt).value().apps.empty());
  }
}

TEST_CASE("lifecycle over SSH: our own server's escaped workers are stopped by tag") {
  SshSandbox sb;
  auto& node = *sb.gpu_node;
  auto config = sb.config("sim_load_time: 1s, sim_fault: [orphan-workers]");
  util::RecordingReporter reporter;
  auto server = sb.start(node, config, "ssh-escaped");
  REQUIRE_MESSAGE(server, error_text(server));
  auto loaded = server::wait_ready(node, *server, config, reporter);
  REQUIRE_MESSAGE(loaded, error_text(loaded));
  auto workers = server::query_gpus(node, std::nullopt);
  REQUIRE_MESSAGE(workers, error_text(workers));
  REQUIRE(workers->apps.size() == 2);
  auto down = server::teardown(node, *server, config, reporter);
  REQUIRE_MESSAGE(down, error_text(down));
  CHECK(down->gpus_released);
  REQUIRE(down->escaped.size() == 2);
  for (const auto& app : workers->apps) {
    INFO("pid ", app.pid, " ", app.name);
    auto named = fmt::format("pid {} ({})", app.pid, app.name);
    CHECK(any_line_contains(down->escaped, named));
    CHECK(any_line_contains(reporter.lines(),
                            sb.where() + "stopped a worker that had left the server's process group: " + named));
    CHECK_FALSE(remote::is_alive(node, app.pid).value());
  }
  CHECK(remote::find_tagged(node, server->tag).value().empty());
  CHECK(server::query_gpus(node, std::nullopt).value().apps.empty());
}

// Connecting to a node whose key changed is refused in test_remote_ssh_host.cpp. Here the
// key changes under a running lifecycle: the reconnection after a drop must be refused
// too, and the wait must end with that reason rather than retry on.
TEST_CASE("lifecycle over SSH: a host key that changes across a reconnect is refused") {
  SshSandbox sb;
  auto config = sb.config("sim_load_time: 30s");
  util::RecordingReporter reporter;
  auto server = sb.start(*sb.host, config, "ssh-hostkey");
  REQUIRE_MESSAGE(server, error_text(server));
  auto trusted = test::read_file(sb.sshd->known_hosts());
  auto changed = sb.sshd->change_host_key();
  REQUIRE_MESSAGE(changed, (changed ? "" : changed.error()));
  auto fingerprint = sb.sshd->host_key_fingerprint();
  REQUIRE(fingerprint.starts_with("SHA256:"));
  REQUIRE(sb.sshd->kill_sessions() >= 1);
  auto started = std::chrono::steady_clock::now();
  auto loaded = server::wait_ready(*sb.host, *server, config, reporter);
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(loaded);
  std::string message = loaded.error().what();
  INFO(message);
  CHECK(took < k_fails_within);
  CHECK(loaded.error().kind() == ErrorKind::failed);
  CHECK(message.starts_with(sb.where()));
  const auto address = "[127.0.0.1]:" + std::to_string(sb.sshd->port());
  // Each transport in its own words: libssh2's refusal is specctl's, the other ssh's.
  CHECK(message.find(test::testing_openssh() ? "Host key for " + address + " has changed"
                                             : "HOST KEY CHANGED for " + address) != std::string::npos);
  CHECK(message.find(fingerprint) != std::string::npos);
  CHECK(sb.host->reconnect_count() == 0);
  // Nothing was written to known_hosts; the server on the node is the guard's to stop.
  CHECK(test::read_file(sb.sshd->known_hosts()) == trusted);
}
