#include "../support/temp_dir.hpp"

#include <specctl/sim/gpu_state.hpp>
#include <specctl/sim/nvidia_smi.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
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

// 2026/12/04 12:00:00.123 local time, as nvidia-smi prints its timestamps.
std::chrono::system_clock::time_point noon() {
  std::tm local{};
  local.tm_year = 2026 - 1900;
  local.tm_mon = 11;
  local.tm_mday = 4;
  local.tm_hour = 12;
  local.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&local)) + std::chrono::milliseconds(123);
}

// GPU 0 busy, GPU 1 held back by a power cap, GPUs 2 and 3 beyond the readings (idle).
SmiSnapshot powered() {
  auto snapshot = two_workers();
  snapshot.now = noon();
  snapshot.gpus = {GpuReading{.power_w = 312.454,
                              .instant_w = 320.0,
                              .limit_w = 700.0,
                              .energy_mj = 123456789.4,
                              .util_pct = 87.4,
                              .memory_util_pct = 52.44,
                              .sm_mhz = 1980.0,
                              .reasons = 0,
                              .temperature_c = 46.2},
                   GpuReading{.power_w = 349.996,
                              .instant_w = 350.0,
                              .limit_w = 350.0,
                              .energy_mj = 98765432.0,
                              .util_pct = 100.0,
                              .memory_util_pct = 60.0,
                              .sm_mhz = 1476.61,
                              .reasons = k_reason_sw_power_cap,
                              .temperature_c = 49.0}};
  return snapshot;
}

// The fields specctl samples through a benchmark.
const std::string k_telemetry_fields =
    "--query-gpu=index,timestamp,power.draw,power.limit,utilization.gpu,memory.used,memory.total,temperature.gpu,"
    "clocks.sm,clocks.max.sm,total_energy_consumption,clocks_event_reasons.active";

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
  specctl::test::TempDir dir{"specsim-unit"};
  CHECK(load_gpu_config(dir.path())->count == 8);
  std::ofstream(dir.path() / "config")
      << "# a workstation\ncount = 2\nmemory_total_mib=97887\nname=NVIDIA RTX PRO 6000\n"
         "uuid_seed=42\n";
  const auto config = load_gpu_config(dir.path());
  REQUIRE(config.has_value());
  CHECK(config->count == 2);
  CHECK(config->memory_total_mib == 97887);
  CHECK(config->name == "NVIDIA RTX PRO 6000");
  CHECK(gpu_uuid(*config, 0) == gpu_uuid(*config, 0));
  CHECK(gpu_uuid(*config, 0) != gpu_uuid(*config, 1));
  CHECK(gpu_uuid(*config, 0) != gpu_uuid(GpuConfig{}, 0));
  CHECK(gpu_uuid(GpuConfig{}, 0).size() == 40);
  CHECK(gpu_bus_id(0) == "00000000:18:00.0");
  std::ofstream(dir.path() / "config") << "cuont=2\n";
  CHECK(load_gpu_config(dir.path()).error().find("unknown key \"cuont\"") != std::string::npos);
  std::ofstream(dir.path() / "config") << "count=zero\n";
  CHECK(load_gpu_config(dir.path()).error().find("invalid value \"zero\" for \"count\"") != std::string::npos);
}

TEST_CASE("sim gpu state: only live processes count") {
  specctl::test::TempDir dir{"specsim-unit"};
  const pid_t self = ::getpid();
  const auto start = process_start_time(self);
  REQUIRE(start.has_value());
  REQUIRE(
      write_app_entry(dir.path(), AppEntry{.pid = self, .name = "me", .gpu = 1, .used_mib = 5, .start_time = *start}));
  // A pid that is surely not running, and this pid with a different start time (a reused pid).
  REQUIRE(
      write_app_entry(dir.path(), AppEntry{.pid = 4194000, .name = "gone", .gpu = 0, .used_mib = 5, .start_time = 1}));
  REQUIRE(write_app_entry(dir.path(), AppEntry{.pid = 1, .name = "reused", .gpu = 0, .used_mib = 5, .start_time = 1}));
  const auto live = live_app_entries(dir.path());
  REQUIRE(live.size() == 1);
  CHECK(live[0].name == "me");
  CHECK(live[0].gpu == 1);
  remove_app_entry(dir.path(), self);
  CHECK(live_app_entries(dir.path()).empty());
}

TEST_CASE("sim gpu state: where the state lives") {
  CHECK(resolve_gpu_dir("/x") == "/x");
  ::setenv("SPECSIM_GPU_DIR", "/from/env", 1);
  CHECK(resolve_gpu_dir("") == "/from/env");
  ::unsetenv("SPECSIM_GPU_DIR");
  CHECK(resolve_gpu_dir("").filename().string().starts_with("specsim-gpus-"));
}

TEST_CASE("sim nvidia-smi: power, clocks and energy, with and without units and header") {
  const auto snapshot = powered();
  CHECK(smi({k_telemetry_fields, "--format=csv", "-i", "0,1,3"}, snapshot).out ==
        "index, timestamp, power.draw [W], power.limit [W], utilization.gpu [%], memory.used [MiB], "
        "memory.total [MiB], temperature.gpu, clocks.current.sm [MHz], clocks.max.sm [MHz], "
        "total_energy_consumption [mJ], clocks_event_reasons.active\n"
        "0, 2026/12/04 12:00:00.123, 312.45 W, 700.00 W, 87 %, 22394 MiB, 143771 MiB, 46, 1980 MHz, 1980 MHz, "
        "123456789 mJ, 0x0000000000000000\n"
        "1, 2026/12/04 12:00:00.123, 350.00 W, 350.00 W, 100 %, 22394 MiB, 143771 MiB, 49, 1477 MHz, 1980 MHz, "
        "98765432 mJ, 0x0000000000000004\n"
        "3, 2026/12/04 12:00:00.123, 75.00 W, 700.00 W, 0 %, 0 MiB, 143771 MiB, 30, 345 MHz, 1980 MHz, 0 mJ, "
        "0x0000000000000001\n");
  CHECK(smi({k_telemetry_fields, "--format=csv,noheader,nounits", "-i", "0,1"}, snapshot).out ==
        "0, 2026/12/04 12:00:00.123, 312.45, 700.00, 87, 22394, 143771, 46, 1980, 1980, 123456789, "
        "0x0000000000000000\n"
        "1, 2026/12/04 12:00:00.123, 350.00, 350.00, 100, 22394, 143771, 49, 1477, 1980, 98765432, "
        "0x0000000000000004\n");
  CHECK(smi({k_telemetry_fields, "--format=csv,nounits", "-i", "1"}, snapshot).out ==
        "index, timestamp, power.draw [W], power.limit [W], utilization.gpu [%], memory.used [MiB], "
        "memory.total [MiB], temperature.gpu, clocks.current.sm [MHz], clocks.max.sm [MHz], "
        "total_energy_consumption [mJ], clocks_event_reasons.active\n"
        "1, 2026/12/04 12:00:00.123, 350.00, 350.00, 100, 22394, 143771, 49, 1477, 1980, 98765432, "
        "0x0000000000000004\n");
}

TEST_CASE("sim nvidia-smi: the other power fields, aliases under their canonical names, reasons by name") {
  const auto snapshot = powered();
  CHECK(smi({"--query-gpu=power.draw.instant,power.draw.average,enforced.power.limit,utilization.memory,"
             "clocks.current.sm,clocks.gr,clocks.max.graphics,clocks.max.gr",
             "--format=csv", "-i", "1"},
            snapshot)
            .out == "power.draw.instant [W], power.draw.average [W], enforced.power.limit [W], "
                    "utilization.memory [%], clocks.current.sm [MHz], clocks.current.graphics [MHz], "
                    "clocks.max.graphics [MHz], clocks.max.graphics [MHz]\n"
                    "350.00 W, 350.00 W, 350.00 W, 60 %, 1477 MHz, 1477 MHz, 1980 MHz, 1980 MHz\n");
  CHECK(smi({"--query-gpu=clocks_event_reasons.sw_power_cap,clocks_event_reasons.gpu_idle,"
             "clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,"
             "clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,"
             "clocks_event_reasons.supported",
             "--format=csv", "-i", "1,2"},
            snapshot)
            .out == "clocks_event_reasons.sw_power_cap, clocks_event_reasons.gpu_idle, "
                    "clocks_event_reasons.hw_slowdown, clocks_event_reasons.sw_thermal_slowdown, "
                    "clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown, "
                    "clocks_event_reasons.supported\n"
                    "Active, Not Active, Not Active, Not Active, Not Active, Not Active, 0x00000000000001ff\n"
                    "Not Active, Active, Not Active, Not Active, Not Active, Not Active, 0x00000000000001ff\n");
  // A current driver takes the old name too and prints the new one.
  CHECK(smi({"--query-gpu=clocks_throttle_reasons.active,clocks_throttle_reasons.sw_power_cap", "--format=csv", "-i",
             "1"},
            snapshot)
            .out == "clocks_event_reasons.active, clocks_event_reasons.sw_power_cap\n0x0000000000000004, Active\n");
  CHECK(smi({"--query-gpu=clocks_event_reasons.bogus", "--format=csv"}, snapshot).exit_code == 2);
}

TEST_CASE("sim nvidia-smi: a driver before 535 knows the reasons only as clocks_throttle_reasons") {
  auto snapshot = powered();
  snapshot.config.driver_version = "525.147.05";
  const auto rejected = smi({"--query-gpu=index,clocks_event_reasons.active", "--format=csv"}, snapshot);
  CHECK(rejected.exit_code == 2);
  CHECK(rejected.out.empty());
  CHECK(rejected.err == "Field \"clocks_event_reasons.active\" is not a valid field to query.\n\n");
  CHECK(smi({"--query-gpu=clocks_event_reasons.sw_power_cap", "--format=csv"}, snapshot).exit_code == 2);
  CHECK(smi({"--query-gpu=index,clocks_throttle_reasons.active,clocks_throttle_reasons.sw_power_cap", "--format=csv",
             "-i", "1"},
            snapshot)
            .out == "index, clocks_throttle_reasons.active, clocks_throttle_reasons.sw_power_cap\n"
                    "1, 0x0000000000000004, Active\n");
}

TEST_CASE("sim nvidia-smi: a GPU without the energy counter answers [Not Supported]") {
  auto snapshot = powered();
  snapshot.config.energy_counter = false;
  CHECK(smi({"--query-gpu=index,total_energy_consumption,power.draw", "--format=csv", "-i", "0"}, snapshot).out ==
        "index, total_energy_consumption [mJ], power.draw [W]\n0, [Not Supported], 312.45 W\n");
  CHECK(smi({"--query-gpu=total_energy_consumption", "--format=csv,noheader,nounits", "-i", "0"}, snapshot).out ==
        "[Not Supported]\n");
}

TEST_CASE("sim nvidia-smi: the loop flags") {
  using std::chrono::milliseconds;
  const auto interval = [](std::vector<std::string> args) { return smi_loop_interval(args); };
  CHECK(interval({"--query-gpu=index", "--format=csv", "-lms", "500"}) == milliseconds(500));
  CHECK(interval({"--query-gpu=index", "--format=csv", "--loop-ms=250"}) == milliseconds(250));
  CHECK(interval({"-l", "2", "--query-gpu=index", "--format=csv"}) == milliseconds(2000));
  CHECK(interval({"--query-gpu=index", "--format=csv", "--loop=3"}) == milliseconds(3000));
  // -l without a number: every 5 s; the next argument stays an argument.
  CHECK(interval({"-l", "--query-gpu=index", "--format=csv"}) == milliseconds(5000));
  CHECK(interval({"--query-gpu=index", "--format=csv", "-l"}) == milliseconds(5000));
  CHECK(interval({"--query-gpu=index", "--format=csv"}) == std::nullopt);
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--query-gpu=index", "--format=csv", "-lms"},
                                                               {"--query-gpu=index", "--format=csv", "-lms", "0"},
                                                               {"--query-gpu=index", "--format=csv", "-lms", "fast"},
                                                               {"--query-gpu=index", "--format=csv", "--loop-ms=-5"},
                                                               {"--query-gpu=index", "--format=csv", "--loop=1.5"}}) {
    CAPTURE(bad.back());
    CHECK(interval(bad) == std::nullopt);
    CHECK(smi(bad).exit_code == 2);
  }
  // One block here; run_nvidia_smi repeats it.
  CHECK(smi({"--query-gpu=index", "--format=csv", "-lms", "100", "-i", "1"}).out == "index\n1\n");
}

TEST_CASE("sim gpu state: power_limit_w and energy_counter") {
  specctl::test::TempDir dir{"specsim-unit"};
  std::ofstream(dir.path() / "config") << "power_limit_w=500\nenergy_counter=0\n";
  const auto config = load_gpu_config(dir.path());
  REQUIRE(config.has_value());
  CHECK(config->power_limit_w == 500);
  CHECK_FALSE(config->energy_counter);
  CHECK(power_spec(*config).limit_w == 500.0);
  CHECK(load_gpu_config(specctl::test::TempDir("specsim-unit").path())->power_limit_w == 700);
  std::ofstream(dir.path() / "config") << "power_limit_w=50\n";
  CHECK(load_gpu_config(dir.path()).error().find("invalid value \"50\" for \"power_limit_w\"") != std::string::npos);
  std::ofstream(dir.path() / "config") << "energy_counter=maybe\n";
  CHECK(load_gpu_config(dir.path()).error().find("invalid value \"maybe\" for \"energy_counter\"") !=
        std::string::npos);
}
