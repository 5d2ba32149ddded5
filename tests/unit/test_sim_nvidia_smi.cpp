#include <specctl/sim/gpu_state.hpp>
#include <specctl/sim/nvidia_smi.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>

using namespace specctl::sim;

namespace {

SmiSnapshot two_workers() {
  SmiSnapshot snapshot;
  snapshot.config.count = 4;
  snapshot.apps = {AppEntry{.pid = 20528, .name = "sglang::scheduler_TP0", .gpu = 0, .used_mib = 22394},
                   AppEntry{.pid = 20529, .name = "sglang::scheduler_TP1", .gpu = 1, .used_mib = 22394}};
  return snapshot;
}

SmiOutput smi(std::vector<std::string> args, const SmiSnapshot& snapshot = two_workers()) {
  return render_nvidia_smi(args, snapshot);
}

// A directory removed with everything in it when the test ends.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "specsim-unit-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

} // namespace

TEST_CASE("sim nvidia-smi: compute apps in the real tool's format") {
  const auto snapshot = two_workers();
  const std::string uuid0 = gpu_uuid(snapshot.config, 0);
  const std::string uuid1 = gpu_uuid(snapshot.config, 1);
  CHECK(smi({"--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,noheader,nounits"}).out ==
        "20528, sglang::scheduler_TP0, 22394, " + uuid0 + "\n20529, sglang::scheduler_TP1, 22394, " + uuid1 + "\n");
  CHECK(smi({"--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv"}).out ==
        "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n20528, sglang::scheduler_TP0, 22394 MiB, " + uuid0 +
            "\n20529, sglang::scheduler_TP1, 22394 MiB, " + uuid1 + "\n");
  CHECK(smi({"--query-compute-apps", "pid", "--format", "csv,noheader", "-i", "1"}).out == "20529\n");
  CHECK(smi({"--query-compute-apps=pid", "--format=csv,noheader"}, SmiSnapshot{}).out.empty());
  CHECK(smi({"--query-compute-apps=pid", "--format=csv"}, SmiSnapshot{}).out == "pid\n");
}

TEST_CASE("sim nvidia-smi: GPUs, memory summed from their processes") {
  const auto snapshot = two_workers();
  CHECK(smi({"--query-gpu=index,uuid,memory.used,memory.total", "--format=csv,noheader,nounits"}).out ==
        "0, " + gpu_uuid(snapshot.config, 0) + ", 22394, 143771\n1, " + gpu_uuid(snapshot.config, 1) +
            ", 22394, 143771\n2, " + gpu_uuid(snapshot.config, 2) + ", 0, 143771\n3, " + gpu_uuid(snapshot.config, 3) +
            ", 0, 143771\n");
  CHECK(smi({"--query-gpu=index,memory.used,memory.free", "--format=csv", "-i", "0,3"}).out ==
        "index, memory.used [MiB], memory.free [MiB]\n0, 22394 MiB, 121377 MiB\n3, 0 MiB, 143771 MiB\n");
  CHECK(smi({"--query-gpu=name,count,pci.bus_id", "--format=csv,noheader", "-i", "1"}).out ==
        "NVIDIA H200, 4, 00000000:2A:00.0\n");
  CHECK(smi({"-i", gpu_uuid(snapshot.config, 2), "--query-gpu=index", "--format=csv,noheader"}).out == "2\n");
  CHECK(smi({"-L"}).out.starts_with("GPU 0: NVIDIA H200 (UUID: GPU-"));
}

TEST_CASE("sim nvidia-smi: errors and exit codes") {
  const auto bad_field = smi({"--query-gpu=index,bogus", "--format=csv"});
  CHECK(bad_field.exit_code == 2);
  CHECK(bad_field.err == "Field \"bogus\" is not a valid field to query.\n\n");
  CHECK(smi({"--query-gpu=index"}).exit_code == 2);
  CHECK(smi({"--format=xml", "--query-gpu=index"}).exit_code == 2);
  CHECK(smi({"--bogus"}).err == "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n");
  const auto missing = smi({"-i", "7", "--query-gpu=index", "--format=csv"});
  CHECK(missing.exit_code == 6);
  CHECK(missing.out == "No devices were found\n");
}

TEST_CASE("sim nvidia-smi: the default table lists the processes") {
  const auto table = smi({}).out;
  CHECK(table.find("| NVIDIA-SMI 570.124.06") != std::string::npos);
  CHECK(table.find("22394MiB / 143771MiB") != std::string::npos);
  CHECK(table.find("sglang::scheduler_TP1") != std::string::npos);
  CHECK(smi({}, SmiSnapshot{}).out.find("No running processes found") != std::string::npos);
}

TEST_CASE("sim gpu state: config, stable UUIDs, bus ids") {
  ScratchDir dir;
  CHECK(load_gpu_config(dir.path)->count == 8);
  std::ofstream(dir.path / "config") << "# a workstation\ncount = 2\nmemory_total_mib=97887\nname=NVIDIA RTX PRO 6000\n"
                                        "uuid_seed=42\n";
  const auto config = load_gpu_config(dir.path);
  REQUIRE(config.has_value());
  CHECK(config->count == 2);
  CHECK(config->memory_total_mib == 97887);
  CHECK(config->name == "NVIDIA RTX PRO 6000");
  CHECK(gpu_uuid(*config, 0) == gpu_uuid(*config, 0));
  CHECK(gpu_uuid(*config, 0) != gpu_uuid(*config, 1));
  CHECK(gpu_uuid(*config, 0) != gpu_uuid(GpuConfig{}, 0));
  CHECK(gpu_uuid(GpuConfig{}, 0).size() == 40);
  CHECK(gpu_bus_id(0) == "00000000:18:00.0");
  std::ofstream(dir.path / "config") << "cuont=2\n";
  CHECK(load_gpu_config(dir.path).error().find("unknown key \"cuont\"") != std::string::npos);
  std::ofstream(dir.path / "config") << "count=zero\n";
  CHECK(load_gpu_config(dir.path).error().find("invalid value \"zero\" for \"count\"") != std::string::npos);
}

TEST_CASE("sim gpu state: only live processes count") {
  ScratchDir dir;
  const pid_t self = ::getpid();
  const auto start = process_start_time(self);
  REQUIRE(start.has_value());
  REQUIRE(
      write_app_entry(dir.path, AppEntry{.pid = self, .name = "me", .gpu = 1, .used_mib = 5, .start_time = *start}));
  // A pid that is surely not running, and this pid with a different start time (a reused pid).
  REQUIRE(
      write_app_entry(dir.path, AppEntry{.pid = 4194000, .name = "gone", .gpu = 0, .used_mib = 5, .start_time = 1}));
  REQUIRE(write_app_entry(dir.path, AppEntry{.pid = 1, .name = "reused", .gpu = 0, .used_mib = 5, .start_time = 1}));
  const auto live = live_app_entries(dir.path);
  REQUIRE(live.size() == 1);
  CHECK(live[0].name == "me");
  CHECK(live[0].gpu == 1);
  remove_app_entry(dir.path, self);
  CHECK(live_app_entries(dir.path).empty());
}

TEST_CASE("sim gpu state: where the state lives") {
  CHECK(resolve_gpu_dir("/x") == "/x");
  ::setenv("SPECSIM_GPU_DIR", "/from/env", 1);
  CHECK(resolve_gpu_dir("") == "/from/env");
  ::unsetenv("SPECSIM_GPU_DIR");
  CHECK(resolve_gpu_dir("").filename().string().starts_with("specsim-gpus-"));
}
