#include <doctest/doctest.h>

#include "../support/lifecycle_ssh_support.hpp"
#include "../support/specsim.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/local_host.hpp>
#include <specctl/server/gpus.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/unique_fd.hpp>

#include <arpa/inet.h>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace specctl;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string k_bindir = std::string(SPECCTL_TEST_BINARY_DIR) + "/bin";

// A sandbox for one test: fake GPUs, a fake nvidia-smi first on PATH, specctl's
// state directory, and a guard that kills every process the test started.
struct SimSandbox {
  fs::path dir;
  std::string state_dir;
  std::string old_path;
  remote::LocalHost host;
  int port = test::free_port();

  SimSandbox() {
    REQUIRE_MESSAGE(fs::exists(k_bindir + "/specsim"), "specsim is built with the project: " << k_bindir);
    dir = fs::temp_directory_path() /
          fmt::format("specctl-life-{}-{}", getpid(), std::chrono::steady_clock::now().time_since_epoch().count());
    fs::create_directories(dir / "bin");
    fs::create_directories(dir / "gpus");
    fs::create_symlink(k_bindir + "/specsim", dir / "bin" / "nvidia-smi");
    state_dir = (dir / "state").string();
    old_path = std::getenv("PATH");
    setenv("PATH", ((dir / "bin").string() + ":" + old_path).c_str(), 1);
    setenv("SPECSIM_GPU_DIR", (dir / "gpus").c_str(), 1);
    setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  }

  ~SimSandbox() {
    // Everything specsim started registers in the GPU dir or carries our tags: kill it all.
    host.exec(fmt::format("pkill -KILL -f -- '--sim-gpu-dir {0}|{0}' 2>/dev/null; true", (dir / "gpus").string()));
    for (const auto& tag : tags) {
      if (auto pids = remote::find_tagged(host, tag)) {
        remote::signal_pids(host, *pids, SIGKILL);
      }
    }
    kill_registered_workers();
    setenv("PATH", old_path.c_str(), 1);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  void kill_registered_workers() {
    auto snapshot = server::query_gpus(host, std::nullopt);
    if (snapshot) {
      std::vector<int> pids;
      for (const auto& app : snapshot->apps) {
        pids.push_back(app.pid);
      }
      remote::signal_pids(host, pids, SIGKILL);
    }
  }

  // A server configuration through the real experiment loader and the specsim template.
  server::ServerConfig config(const std::string& knobs, const std::string& extra = "") {
    return test::specsim_config(dir, dir / "gpus", port, knobs, extra);
  }

  std::expected<server::RunningServer, Error> start(const server::ServerConfig& config, const std::string& tag) {
    tags.push_back(tag);
    return server::launch(host, config, server::render_launch(config, {k_bindir}), tag, state_dir);
  }

  std::vector<std::string> tags;
};

using test::any_line_contains;

} // namespace

TEST_CASE("lifecycle: launch, ready with progress, teardown frees the GPUs") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 2s");
  util::RecordingReporter reporter;
  auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
  CHECK(cleaned->gpus_checked);
  CHECK(cleaned->actions.empty());

  auto server = sb.start(config, "life-ready");
  REQUIRE_MESSAGE(server, (server ? std::string() : std::string(server.error().what())));
  auto loaded = server::wait_ready(sb.host, *server, config, reporter);
  REQUIRE_MESSAGE(loaded, (loaded ? std::string() : std::string(loaded.error().what())));
  CHECK(loaded->load_time >= 1s);
  CHECK(any_line_contains(reporter.lines(), "loading life-ready: "));
  CHECK(any_line_contains(reporter.lines(), "ready after"));
  std::vector<std::string> names;
  for (const auto& [name, at] : loaded->milestones) {
    names.push_back(name);
  }
  CHECK(std::find(names.begin(), names.end(), "Load weight begin") != names.end());

  // While it runs, its workers hold fake GPU memory.
  auto busy = server::query_gpus(sb.host, std::nullopt);
  REQUIRE(busy);
  CHECK(busy->apps.size() == 2);

  auto down = server::teardown(sb.host, *server, config, reporter);
  REQUIRE_MESSAGE(down, (down ? std::string() : std::string(down.error().what())));
  CHECK(down->gpus_released);
  CHECK(down->escaped.empty());
  CHECK(remote::find_tagged(sb.host, "life-ready").value().empty());
  CHECK(server::query_gpus(sb.host, std::nullopt).value().apps.empty());
}

TEST_CASE("lifecycle: a crash while loading fails in seconds with the log") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 3s, sim_fault: [crash-load]");
  util::RecordingReporter reporter;
  auto server = sb.start(config, "life-crash");
  REQUIRE(server);
  auto started = std::chrono::steady_clock::now();
  auto loaded = server::wait_ready(sb.host, *server, config, reporter);
  REQUIRE_FALSE(loaded);
  CHECK(std::chrono::steady_clock::now() - started < 20s);
  std::string message = loaded.error().what();
  CHECK(loaded.error().kind() == ErrorKind::failed);
  CHECK(message.find("last log lines:") != std::string::npos);
  CHECK(message.find("the server failed while loading (exited with code 1): ") != std::string::npos);
  CHECK(message.find("Traceback") != std::string::npos);
  CHECK(server::teardown(sb.host, *server, config, reporter));
}

TEST_CASE("lifecycle: the OOM line fails the load and is quoted") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 3s, sim_fault: [oom]");
  util::RecordingReporter reporter;
  auto server = sb.start(config, "life-oom");
  REQUIRE(server);
  auto loaded = server::wait_ready(sb.host, *server, config, reporter);
  REQUIRE_FALSE(loaded);
  std::string message = loaded.error().what();
  // The specific line (the exception) is quoted with the exit code, not the traceback's first line.
  CHECK(message.find("the server failed while loading (exited with code 1): torch.OutOfMemoryError: CUDA out of "
                     "memory") != std::string::npos);
  CHECK(server::teardown(sb.host, *server, config, reporter));
  CHECK(remote::find_tagged(sb.host, "life-oom").value().empty());
}

TEST_CASE("lifecycle: a hung load trips the stall timeout") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 60s, sim_fault: ['hang:0.05']");
  config.health.stall = 2s;
  util::RecordingReporter reporter;
  auto server = sb.start(config, "life-hang");
  REQUIRE(server);
  auto loaded = server::wait_ready(sb.host, *server, config, reporter);
  REQUIRE_FALSE(loaded);
  CHECK(loaded.error().kind() == ErrorKind::timed_out);
  CHECK(std::string(loaded.error().what()).find("no progress for 2s") != std::string::npos);
  CHECK(server::teardown(sb.host, *server, config, reporter));
}

TEST_CASE("lifecycle: a port taken by someone else is refused, naming the holder") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 1s");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(config.port));
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  util::RecordingReporter reporter;
  auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  ::close(fd);
  REQUIRE_FALSE(cleaned);
  std::string message = cleaned.error().what();
  CHECK(message.starts_with(fmt::format("local: port {} is already in use by pid {} (", config.port, getpid())));
  CHECK(message.find("specctl_unit_tests") != std::string::npos);
  CHECK(message.ends_with("), which specctl did not start"));
}

TEST_CASE("lifecycle: a socket bound beside our server's (SO_REUSEPORT, as vLLM binds) is named before a benchmark") {
  SimSandbox sb;
  auto config = test::specsim_config(sb.dir, sb.dir / "gpus", sb.port, "sim_load_time: 0.5s", "", "specsim-vllm");
  auto server = sb.start(config, "reuse-ours");
  REQUIRE(server);
  util::RecordingReporter reporter;
  REQUIRE(server::wait_ready(sb.host, *server, config, reporter));
  auto alone = server::check_port_is_ours(sb.host, *server, config.port);
  REQUIRE_MESSAGE(alone, alone.error().what());
  CHECK_MESSAGE(alone->empty(), *alone);

  // This process binds the same address and port with SO_REUSEPORT: the kernel now
  // hands a connection to either of the two.
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  REQUIRE(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(config.port));
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd.get(), 1) == 0);
  auto shared = server::check_port_is_ours(sb.host, *server, config.port);
  REQUIRE_FALSE(shared);
  std::string message = shared.error().what();
  CHECK(message.starts_with(fmt::format("local: port {} is also held by pid {} (", config.port, getpid())));
  CHECK(message.find("not by this run's server reuse-ours") != std::string::npos);

  // Without our server on it, the port's holder cannot be told from a proxy: said, not failed.
  CHECK(server::teardown(sb.host, *server, config, reporter));
  auto other = server::check_port_is_ours(sb.host, *server, config.port);
  REQUIRE(other);
  CHECK(other->find(fmt::format("cannot tell that port {} is this run's server reuse-ours: it is held by pid {}",
                                config.port, getpid())) != std::string::npos);
}

TEST_CASE("lifecycle: the port is claimed atomically: another live process's claim makes the host busy") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 0.5s");
  util::RecordingReporter reporter;
  // Another run: a live process of this machine, whose claim is written as a run's would be.
  test::Process other({"/bin/sleep", "60"}, sb.dir / "other.log");
  server::RunOwner owner = server::RunOwner::this_process("other", "/results/other");
  owner.pid = other.pid();
  // /proc/PID/stat's start time: field 22, the 20th after the name's ")".
  auto stat = test::read_file(fmt::format("/proc/{}/stat", other.pid()));
  std::istringstream after(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int k = 3; k <= 22; ++k) {
    after >> field;
  }
  owner.start_ticks = field;
  server::CleanupOptions theirs{sb.state_dir};
  theirs.owner = owner;
  REQUIRE(server::cleanup_before_launch(sb.host, config, theirs, reporter));

  auto mine = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  REQUIRE_FALSE(mine);
  CHECK(std::string(mine.error().what())
            .starts_with(fmt::format("local is busy: specctl run other (pid {} on ", other.pid())));
  CHECK(std::string(mine.error().what()).find(fmt::format(", /results/other) holds port {}", config.port)) !=
        std::string::npos);

  SUBCASE("released, it is free") {
    REQUIRE(server::release_claims(sb.host, config, sb.state_dir, owner));
  }
  SUBCASE("its process gone, the claim lapses at once") {
    other.signal(SIGKILL);
    REQUIRE(other.wait_exit_code(10s));
  }
  auto again = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  CHECK_MESSAGE(again, again.error().what());
}

TEST_CASE("lifecycle: orphaned workers are found through nvidia-smi and killed, others are left alone") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 1s");
  // A server specctl did not start (no tag), whose workers outlive it the way SGLang's schedulers do.
  auto argv = server::render_launch(sb.config("sim_load_time: 0.2s, sim_fault: [orphan-workers]"), {k_bindir}).argv;
  test::orphan_workers(sb.host, argv, sb.dir / "stray.log");
  util::RecordingReporter reporter;

  SUBCASE("outside the policy: reported, never killed") {
    config.cleanup.allow = {"VLLM::*"};
    config.cleanup.timeout = 2s;
    auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
    REQUIRE_FALSE(cleaned);
    CHECK(cleaned.error().kind() == ErrorKind::timed_out);
    CHECK(std::string(cleaned.error().what()).find("sglang::scheduler_TP0") != std::string::npos);
    CHECK(any_line_contains(reporter.lines(), "left alone pid"));
    CHECK(server::query_gpus(sb.host, std::nullopt).value().apps.size() == 2);
  }
  SUBCASE("named by the policy: killed, GPUs freed") {
    auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
    REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
    CHECK(cleaned->actions.size() == 2);
    CHECK(any_line_contains(cleaned->actions, "kill pid"));
    CHECK(any_line_contains(cleaned->actions, "sglang::scheduler_TP1"));
    CHECK(server::query_gpus(sb.host, std::nullopt).value().apps.empty());
  }
  SUBCASE("policy fail refuses, naming them") {
    config.cleanup.policy = server::CleanupPolicy::fail;
    auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
    REQUIRE_FALSE(cleaned);
    CHECK(std::string(cleaned.error().what()).find("are in use (cleanup policy fail): pid") != std::string::npos);
    CHECK(server::query_gpus(sb.host, std::nullopt).value().apps.size() == 2);
  }
}

TEST_CASE("lifecycle: our own server's escaped workers are stopped by tag") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 1s, sim_fault: [orphan-workers]");
  util::RecordingReporter reporter;
  auto server = sb.start(config, "life-escaped");
  REQUIRE(server);
  REQUIRE(server::wait_ready(sb.host, *server, config, reporter));
  auto down = server::teardown(sb.host, *server, config, reporter);
  REQUIRE_MESSAGE(down, (down ? std::string() : std::string(down.error().what())));
  CHECK(down->escaped.size() == 2);
  CHECK(any_line_contains(reporter.lines(), "left the server's process group"));
  CHECK(server::query_gpus(sb.host, std::nullopt).value().apps.empty());
}

TEST_CASE("lifecycle: an earlier server of ours on the same port is stopped before a launch") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 1s");
  util::RecordingReporter reporter;
  auto first = sb.start(config, "life-first");
  REQUIRE(first);
  REQUIRE(server::wait_ready(sb.host, *first, config, reporter));
  auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
  REQUIRE(cleaned->actions.size() == 1);
  CHECK(cleaned->actions[0].starts_with("stopped specctl's earlier server life-first"));
  CHECK(remote::find_tagged(sb.host, "life-first").value().empty());
}

TEST_CASE("lifecycle: interrupting a load, then teardown, leaves nothing running") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 30s");
  util::RecordingReporter reporter;
  auto server = sb.start(config, "life-sigint");
  REQUIRE(server);
  std::atomic<bool> cancel{false};
  std::thread interrupter([&] {
    std::this_thread::sleep_for(1s);
    cancel = true;
  });
  auto loaded = server::wait_ready(sb.host, *server, config, reporter, &cancel);
  interrupter.join();
  REQUIRE_FALSE(loaded);
  CHECK(loaded.error().kind() == ErrorKind::interrupted);
  REQUIRE(server::teardown(sb.host, *server, config, reporter));
  CHECK(remote::find_tagged(sb.host, "life-sigint").value().empty());
  CHECK(server::query_gpus(sb.host, std::nullopt).value().apps.empty());
}

namespace {

// Another specctl run on this machine, as its servers record it: a live process
// of ours (a sleep) stands for its coordinator, so the test can end it.
struct OtherRun {
  pid_t pid = -1;
  server::RunOwner owner;

  OtherRun() {
    pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sleep", "sleep", "120", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    owner = server::RunOwner::this_process("other-sweep", "/results/other-sweep/1");
    owner.pid = pid;
    // The child's start time, as cleanup reads it from /proc (field 22; fields count from the last ')').
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 1));
    std::string field;
    for (int k = 3; k <= 22 && fields >> field; ++k) {
      if (k == 22) {
        owner.start_ticks = field;
      }
    }
  }
  void end() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  ~OtherRun() { end(); }
};

} // namespace

TEST_CASE("lifecycle: a live run's server is never touched: the launch fails naming the run, or waits for it") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 1s");
  util::RecordingReporter reporter;
  OtherRun other;
  sb.tags.push_back("life-theirs");
  auto theirs = server::launch(sb.host, config, server::render_launch(config, {k_bindir}), "life-theirs", sb.state_dir,
                               other.owner);
  REQUIRE_MESSAGE(theirs, (theirs ? std::string() : std::string(theirs.error().what())));
  REQUIRE(server::wait_ready(sb.host, *theirs, config, reporter));
  auto processes = remote::find_tagged(sb.host, "life-theirs").value().size();

  SUBCASE("the same port: busy, fail at once") {
    auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
    REQUIRE_FALSE(cleaned);
    std::string why = cleaned.error().what();
    CHECK(why.find("local is busy: specctl run other-sweep (pid " + std::to_string(other.pid)) != std::string::npos);
    CHECK(why.find("/results/other-sweep/1) holds port " + std::to_string(config.port)) != std::string::npos);
    CHECK(remote::find_tagged(sb.host, "life-theirs").value().size() == processes);
  }
  SUBCASE("plan --probe says the same, touching nothing") {
    auto probed = server::cleanup_before_launch(sb.host, config, {sb.state_dir, true}, reporter);
    REQUIRE(probed);
    CHECK(any_line_contains(probed->left_alone, "holds port " + std::to_string(config.port)));
    CHECK(any_line_contains(probed->left_alone, "the launch would fail (cleanup.busy: fail)"));
    CHECK(probed->actions.empty());
    CHECK(remote::find_tagged(sb.host, "life-theirs").value().size() == processes);
  }
  SUBCASE("another port, no GPU lists: only ports collide, their GPU processes are left alone") {
    auto mine = config;
    mine.port = test::free_port();
    auto cleaned = server::cleanup_before_launch(sb.host, mine, {sb.state_dir}, reporter);
    REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
    CHECK(cleaned->actions.empty());
    CHECK(any_line_contains(cleaned->left_alone, "its run is alive"));
    CHECK(remote::find_tagged(sb.host, "life-theirs").value().size() == processes);
  }
  SUBCASE("busy: wait waits until the run's server is gone") {
    config.cleanup.busy = server::BusyPolicy::wait;
    config.cleanup.timeout = 60s;
    std::thread finisher([&] {
      std::this_thread::sleep_for(2s);
      (void)server::teardown(sb.host, *theirs, config, reporter);
    });
    auto started = std::chrono::steady_clock::now();
    auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
    finisher.join();
    REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
    CHECK(std::chrono::steady_clock::now() - started >= 1s);
    CHECK(any_line_contains(cleaned->actions, "waited: local is busy: specctl run other-sweep"));
  }
  SUBCASE("once its run is gone, its server is a leftover and is stopped") {
    other.end();
    auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
    REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
    CHECK(any_line_contains(cleaned->actions, "stopped specctl's earlier server life-theirs"));
    CHECK(any_line_contains(cleaned->actions, "its run gone: specctl run other-sweep"));
    CHECK(remote::find_tagged(sb.host, "life-theirs").value().empty());
  }
}

TEST_CASE("lifecycle: a run on another machine is alive while its heartbeat is fresh") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 1s");
  util::RecordingReporter reporter;
  auto elsewhere = server::RunOwner::this_process("remote-sweep", "/laptop/results");
  elsewhere.coordinator = "some-laptop";
  sb.tags.push_back("life-remote");
  auto theirs = server::launch(sb.host, config, server::render_launch(config, {k_bindir}), "life-remote", sb.state_dir,
                               elsewhere);
  REQUIRE(theirs);
  REQUIRE(server::wait_ready(sb.host, *theirs, config, reporter));
  auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  REQUIRE_FALSE(cleaned);
  CHECK(std::string(cleaned.error().what()).find("busy: specctl run remote-sweep (pid") != std::string::npos);
  // A heartbeat older than k_owner_heartbeat_stale: the run is gone.
  sb.host.exec(fmt::format("touch -d '-10 minutes' {}", util::shell_quote(theirs->files.heartbeat())));
  cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
  CHECK(any_line_contains(cleaned->actions, "stopped specctl's earlier server life-remote"));
}

TEST_CASE("lifecycle: a record written before runs had owners is read, and its server counts as left") {
  SimSandbox sb;
  auto config = sb.config("sim_load_time: 1s");
  util::RecordingReporter reporter;
  auto first = sb.start(config, "life-old");
  REQUIRE(first);
  REQUIRE(server::wait_ready(sb.host, *first, config, reporter));
  std::ofstream(first->files.dir + "/server.meta") << fmt::format("port={} gpus=all\n", config.port);
  auto cleaned = server::cleanup_before_launch(sb.host, config, {sb.state_dir}, reporter);
  REQUIRE_MESSAGE(cleaned, (cleaned ? std::string() : std::string(cleaned.error().what())));
  CHECK(any_line_contains(cleaned->actions, fmt::format("stopped specctl's earlier server life-old (pid {}, port {}",
                                                        first->pid, config.port)));
}
