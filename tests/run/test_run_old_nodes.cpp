// The benchmark client on GPU nodes as they are, end to end: a test sshd puts its
// sessions in a debootstrap root (scripts/test-roots.sh), Debian 11 with glibc
// 2.31 or a minimal Debian 12 without fmt, yaml-cpp, libcurl or libssh2, where
// this machine's specctl cannot run. The sweep's server (a specsim made to run
// there) and every benchmark's client run inside the root: the client is
// specctl's bundle, its own loader and libraries (src/run/self_bundle.cpp).

#include "../support/old_root.hpp"
#include "../support/result_folder.hpp"
#include "../support/specsim.hpp"
#include "../support/ssh_testing.hpp"
#include "sweep.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

namespace st = specctl::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::chrono::seconds k_old_node_sweep_timeout{240};

// A folder in the root's /tmp for one test, removed with everything in it.
class RootFolder {
public:
  explicit RootFolder(const fs::path& root) {
    std::string pattern = (root / "tmp" / "specctl-old-node-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    m_path = pattern;
    m_inside = "/" + m_path.lexically_relative(root).string();
  }
  RootFolder(const RootFolder&) = delete;
  RootFolder& operator=(const RootFolder&) = delete;
  ~RootFolder() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  // Outside the root, and as its sessions see it.
  const fs::path& path() const { return m_path; }
  std::string inside(const std::string& name) const { return m_inside + "/" + name; }

private:
  fs::path m_path;
  std::string m_inside;
};

void sweep_on(const std::string& suite, const std::string& libc_says) {
  if (auto why = st::old_root_unavailable(suite)) {
    st::skip(*why);
    return;
  }
  const fs::path root = st::old_root(suite);
  RootFolder node(root);
  auto specsim = st::install_specsim(root, node.path() / "opt");
  REQUIRE_MESSAGE(specsim, (specsim ? "" : specsim.error()));
  fs::create_directories(node.path() / "gpus");
  auto started =
      st::TestSshd::start({.listen_address = "127.0.0.1",
                           .session_env = {"PATH=" + node.inside("opt/fake-gpu") + ":/usr/local/bin:/usr/bin:/bin",
                                           "SPECSIM_GPU_DIR=" + node.inside("gpus")},
                           .chroot = root.string()});
  REQUIRE_MESSAGE(started, (started ? "" : started.error()));
  auto& sshd = *started;

  // This machine's specctl does not run there: the root is what the issue says it is.
  {
    auto host = specctl::remote::connect_ssh(sshd->target());
    REQUIRE(host);
    auto said = (*host)->exec("ldd --version 2>&1 | head -n 1; ls /usr/lib/x86_64-linux-gnu/libfmt.so.* 2>&1",
                              std::chrono::seconds{30});
    REQUIRE(said);
    INFO(said->out);
    CHECK(said->out.find(libc_says) != std::string::npos);
    CHECK(said->out.find("No such file") != std::string::npos);
  }

  st::TempDir here("old-node");
  const int port = st::free_port();
  st::write_file(here.path() / "specsim-here.yaml", fmt::format(R"(name: specsim-in-root
extends: specsim
description: specsim as the root runs it (tests/support/old_root.hpp)
command: ["{0}", --model-path, "{{model}}", --host, "{{listen}}", --port, "{{port}}"]
telemetry_command: ["{0}", nvidia-smi]
)",
                                                                *specsim));
  st::write_file(here.path() / "sweep.yaml",
                 fmt::format(R"(name: old-node
hosts:
  node: {{ssh: "{user}@127.0.0.1:{ssh_port}", identity: "{key}", known_hosts: "{known}"}}
server:
  template: ./specsim-here.yaml
  host: node
  model: /models/Kimi-K2.5-INT4
  port: {port}
  knobs: {{tp: 2, sim_load_time: 1s, sim_speed: 20}}
  health: {{timeout: 2m, interval: 200ms, stall: 1m}}
  cleanup: {{policy: kill, grace: 3s, timeout: 30s}}
variants:
  - name: baseline
benchmarks:
  - {{name: closed, kind: concurrency, repeats: 1, levels: [1, 2], requests: 6, max_tokens: 32, warmup: 0}}
  - {{name: open, kind: rate, repeats: 1, rates: [4], duration: 2s, max_tokens: 32, warmup: 0}}
)",
                             fmt::arg("user", sshd->user()), fmt::arg("ssh_port", sshd->port()),
                             fmt::arg("key", sshd->user_key().string()),
                             fmt::arg("known", sshd->known_hosts().string()), fmt::arg("port", port)));
  const auto out = here.path() / "out";
  const auto log = here.path() / "specctl.log";
  st::Process run({SPECCTL_BINARY, "run", (here.path() / "sweep.yaml").string(), "--state-dir", node.inside("state"),
                   "--out", out.string()},
                  log, {{"HOME", here.home().string()}, {"PATH", "/usr/local/bin:/usr/bin:/bin"}});
  auto code = run.wait_exit_code(k_old_node_sweep_timeout);
  INFO(st::read_file(log));
  REQUIRE(code == 0);

  auto result = st::read_json(out / "variants/baseline/result.json");
  CHECK(result["status"] == "ok");
  REQUIRE(result["benchmarks"].size() == 2);
  for (const auto& [name, benchmark] : result["benchmarks"].items()) {
    CAPTURE(name);
    const auto& client = benchmark["client"];
    CHECK(client["ran_on"] == "host");
    CHECK(client["why"].get<std::string>().find("own libraries and loader") != std::string::npos);
    CHECK(client["binary"].get<std::string>().starts_with(node.inside("state/bin/specctl-")));
    for (const auto& level : benchmark["levels"]) {
      CHECK(level["metrics"]["output_tok_s"].get<double>() > 0);
      CHECK_FALSE(level["metrics"].contains("tunnel_rtt_ms"));
    }
  }
  // Uploaded once, unpacked in the root's state folder; no part of an upload is left.
  int bundles = 0;
  for (const auto& entry : fs::directory_iterator(node.path() / "state/bin")) {
    CHECK_MESSAGE(entry.path().filename().string().find(".part") == std::string::npos, entry.path());
    bundles += entry.is_directory() ? 1 : 0;
  }
  CHECK(bundles == 1);
  CHECK(run_test::stray_servers(node.path() / "state") == "");
}

} // namespace

TEST_CASE("on a Debian 11 node (glibc 2.31, none of specctl's libraries) every benchmark runs on the host") {
  sweep_on("bullseye", "GLIBC 2.31");
}

TEST_CASE("on a minimal Debian 12 node without specctl's libraries every benchmark runs on the host") {
  sweep_on("bookworm", "GLIBC 2.36");
}
