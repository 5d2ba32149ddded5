// The fake GPUs: workers holding memory, the fake nvidia-smi, orphans.

#include "../support/specsim.hpp"

#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

using namespace specctl::test;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> k_gpus_apps_query{"--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                                                 "--format=csv,noheader,nounits"};
const std::vector<std::string> k_gpu_query{"--query-gpu=index,uuid,memory.used,memory.total",
                                           "--format=csv,noheader,nounits"};

struct App {
  pid_t pid = 0;
  std::string name;
  long mib = 0;
  std::string uuid;
};

std::vector<App> parse_apps(const std::string& text) {
  const std::regex line_format(
      R"(^(\d+), (sglang::scheduler_TP\d+), (\d+), (GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$)");
  std::vector<App> apps;
  for (const auto& line : lines_of(text)) {
    std::smatch match;
    CAPTURE(line);
    REQUIRE(std::regex_match(line, match, line_format));
    apps.push_back(App{std::stoi(match[1]), match[2], std::stol(match[3]), match[4]});
  }
  return apps;
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string state;
  pid_t parent = 0;
  fields >> state >> parent;
  return parent;
}

bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) {
    return false;
  }
  const char state = stat.at(stat.rfind(')') + 2);
  return state != 'Z' && state != 'X';
}

} // namespace

TEST_CASE("nvidia-smi before, during and after a server's life") {
  Server server({"--tp-size", "2", "--sim-load-time", "1.5s", "--sim-speed", "1"}, Defaults::yes,
                "count=4\nmemory_total_mib=97887\nname=NVIDIA RTX PRO 6000 Blackwell Server Edition\n");
  auto& gpus = server.gpus();

  // The server is starting in the background; its workers register at once, so
  // "before" is checked on a second, idle directory with the same config.
  GpuDir idle;
  std::ofstream(idle.path() / "config") << "count=4\nmemory_total_mib=97887\n";
  const auto before = idle.nvidia_smi(k_gpus_apps_query);
  CHECK(before.exit_code == 0);
  CHECK(before.out.empty());
  const auto idle_gpus = lines_of(idle.nvidia_smi(k_gpu_query).out);
  REQUIRE(idle_gpus.size() == 4);
  for (std::size_t i = 0; i < idle_gpus.size(); ++i) {
    CHECK(std::regex_match(idle_gpus[i], std::regex(std::to_string(i) + R"(, GPU-[0-9a-f-]{36}, 0, 97887)")));
  }

  // During the load the workers hold memory that grows until the KV cache is allocated.
  // The port refuses first: the 1.5 s load may be over by the time two nvidia-smi have
  // answered on a loaded machine (a sanitized nvidia-smi takes 0.3 s to start).
  REQUIRE(server.wait_log("Load weight begin"));
  CHECK(connection_refused(server.port()));
  REQUIRE(wait_until([&] { return lines_of(gpus.nvidia_smi(k_gpus_apps_query).out).size() == 2; }, k_ready_timeout));
  const auto loading = parse_apps(gpus.nvidia_smi(k_gpus_apps_query).out);
  REQUIRE(server.wait_ready());
  const auto apps = parse_apps(gpus.nvidia_smi(k_gpus_apps_query).out);
  REQUIRE(apps.size() == 2);
  CHECK(loading[0].mib <= apps[0].mib);
  CHECK(apps[0].mib > 80000);
  CHECK(apps[0].mib < 97887);
  CHECK(apps[0].name == "sglang::scheduler_TP0");
  CHECK(apps[1].name == "sglang::scheduler_TP1");
  for (const auto& app : apps) {
    CHECK(parent_of(app.pid) == server.process().pid());
    CHECK(getpgid(app.pid) == server.process().pid());
  }
  // The GPU table agrees with the process list, and -i restricts both.
  const auto gpu_lines = lines_of(gpus.nvidia_smi(k_gpu_query).out);
  REQUIRE(gpu_lines.size() == 4);
  CHECK(gpu_lines[0] == "0, " + apps[0].uuid + ", " + std::to_string(apps[0].mib) + ", 97887");
  CHECK(gpu_lines[1] == "1, " + apps[1].uuid + ", " + std::to_string(apps[1].mib) + ", 97887");
  CHECK(gpu_lines[2].ends_with(", 0, 97887"));
  auto only_one = k_gpus_apps_query;
  only_one.insert(only_one.end(), {"-i", "1"});
  const auto restricted = parse_apps(gpus.nvidia_smi(only_one).out);
  REQUIRE(restricted.size() == 1);
  CHECK(restricted[0].pid == apps[1].pid);
  CHECK(lines_of(gpus.nvidia_smi({"--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "--id=0,3"}).out) ==
        std::vector<std::string>{"0, " + std::to_string(apps[0].mib), "3, 0"});
  const auto with_header = gpus.nvidia_smi({"--query-compute-apps=pid,used_memory", "--format=csv"}).out;
  CHECK(with_header.starts_with("pid, used_gpu_memory [MiB]\n" + std::to_string(apps[0].pid) + ", " +
                                std::to_string(apps[0].mib) + " MiB\n"));

  // Killing only the server (not its group): tied workers follow it.
  server.process().signal(SIGKILL);
  REQUIRE(server.process().wait_exit(k_exit_timeout));
  CHECK(wait_until([&] { return gpus.nvidia_smi(k_gpus_apps_query).out.empty(); }, k_exit_timeout));
  CHECK(lines_of(gpus.nvidia_smi(k_gpu_query).out)[0].ends_with(", 0, 97887"));
}

TEST_CASE("orphaned workers outlive their server, as SGLang's schedulers do") {
  Server server({"--tp-size", "2", "--sim-fault", "orphan-workers"});
  REQUIRE(server.wait_ready());
  auto& gpus = server.gpus();
  const auto apps = parse_apps(gpus.nvidia_smi(k_gpus_apps_query).out);
  REQUIRE(apps.size() == 2);
  for (const auto& app : apps) {
    // Their own session: a kill of the server's process group misses them.
    CHECK(getsid(app.pid) == app.pid);
  }
  server.process().kill_group();
  REQUIRE(server.process().wait_exit(k_exit_timeout));
  std::this_thread::sleep_for(300ms);
  const auto survivors = parse_apps(gpus.nvidia_smi(k_gpus_apps_query).out);
  REQUIRE(survivors.size() == 2);
  for (const auto& app : survivors) {
    CHECK(alive(app.pid));
    CHECK(parent_of(app.pid) != server.process().pid());
    CHECK(app.mib == apps[0].mib);
  }
  // What specctl's cleanup must do: kill what nvidia-smi lists.
  for (const auto& app : survivors) {
    ::kill(app.pid, SIGKILL);
  }
  CHECK(wait_until([&] { return gpus.nvidia_smi(k_gpus_apps_query).out.empty(); }, k_exit_timeout));
}

TEST_CASE("a link named nvidia-smi answers like the real tool") {
  TempDir bin;
  const auto link = bin.path() / "nvidia-smi";
  std::filesystem::create_symlink(specsim_binary(), link);
  GpuDir gpus;
  const std::map<std::string, std::string> env{{"SPECSIM_GPU_DIR", gpus.path().string()}};
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), link.string());
    return run_command(args, env);
  };
  const auto listing = lines_of(run({"-L"}).out);
  REQUIRE(listing.size() == 8);
  CHECK(std::regex_match(listing[0], std::regex(R"(GPU 0: NVIDIA H200 \(UUID: GPU-[0-9a-f-]{36}\))")));
  const auto gpu_lines = lines_of(run(k_gpu_query).out);
  REQUIRE(gpu_lines.size() == 8);
  CHECK(gpu_lines[7].ends_with(", 0, 143771"));
  // UUIDs are stable from call to call.
  CHECK(lines_of(run(k_gpu_query).out) == gpu_lines);
  CHECK(run(k_gpus_apps_query).out.empty());

  const auto bad_field = run({"--query-gpu=index,bogus", "--format=csv"});
  CHECK(bad_field.exit_code == 2);
  CHECK(bad_field.out == "Field \"bogus\" is not a valid field to query.\n\n");
  const auto no_such_gpu = run({"-i", "9", "--query-gpu=index", "--format=csv"});
  CHECK(no_such_gpu.exit_code == 6);
  CHECK(no_such_gpu.out == "No devices were found\n");
  CHECK(run({"--frobnicate"}).exit_code == 2);
  const auto table = run({});
  CHECK(table.exit_code == 0);
  CHECK(table.out.find("No running processes found") != std::string::npos);

  // The build ships the same link, for PATH=build/bin/fake-gpu:$PATH.
  const auto shipped = run_command({std::string(SPECSIM_FAKE_GPU_BIN) + "/nvidia-smi", "-L"}, env);
  CHECK(shipped.exit_code == 0);
  CHECK(lines_of(shipped.out) == listing);
}
