// specsim's `dcgmi dmon`: DCGM's header and row shape (dcgmi/DeviceMonitor.cpp), its
// fields' names and formats (dcgmlib/src/dcgm_fields.cpp), and the same readings as
// specsim's nvidia-smi.

#include <specctl/sim/dcgmi.hpp>

#include <doctest/doctest.h>

using namespace specctl::sim;

namespace {

// GPU 0 busy, GPU 1 held at a 350 W cap; 4 GPUs, two of them with a worker.
SmiSnapshot powered_pair() {
  SmiSnapshot snapshot;
  snapshot.config.count = 4;
  snapshot.apps = {AppEntry{.pid = 20528, .name = "sglang::scheduler_TP0", .gpu = 0, .used_mib = 22394},
                   AppEntry{.pid = 20529, .name = "sglang::scheduler_TP1", .gpu = 1, .used_mib = 22394}};
  snapshot.gpus = {GpuReading{.power_w = 443.75,
                              .instant_w = 443.75,
                              .limit_w = 700.0,
                              .energy_mj = 123456789.4,
                              .util_pct = 98.0,
                              .memory_util_pct = 50.0,
                              .sm_mhz = 1980.0,
                              .reasons = 0,
                              .temperature_c = 46.2},
                   GpuReading{.power_w = 350.0,
                              .instant_w = 350.0,
                              .limit_w = 350.0,
                              .energy_mj = 98765432.0,
                              .util_pct = 100.0,
                              .memory_util_pct = 60.0,
                              .sm_mhz = 1341.0,
                              .reasons = k_reason_sw_power_cap,
                              .temperature_c = 49.0}};
  return snapshot;
}

} // namespace

TEST_CASE("sim dcgmi: dmon's arguments, and what it refuses") {
  const std::vector<std::string> args{"dmon", "-e", "155,156", "-d", "500", "-c", "3", "-i", "0,1"};
  auto request = parse_dmon(args);
  REQUIRE(request.has_value());
  CHECK(request->fields == std::vector<int>{155, 156});
  CHECK(request->delay == std::chrono::milliseconds(500));
  CHECK(request->count == 3);
  CHECK(request->entities == "0,1");
  CHECK(parse_dmon(std::vector<std::string>{"dmon", "--field-id", "203", "--delay", "100"})->delay ==
        std::chrono::milliseconds(100));
  CHECK(parse_dmon(std::vector<std::string>{"discovery", "-l"}).error() == "only `dcgmi dmon` is simulated");
  CHECK(parse_dmon(std::vector<std::string>{"dmon"}).error().starts_with("Either field group ID or a list"));
  CHECK(parse_dmon(std::vector<std::string>{"dmon", "-e", "155,1611"}).error() == "field id 1611 is not simulated");
  CHECK_FALSE(parse_dmon(std::vector<std::string>{"dmon", "-e", "155", "-d", "0"}));
  CHECK_FALSE(parse_dmon(std::vector<std::string>{"dmon", "-e"}));
}

TEST_CASE("sim dcgmi: the header and rows in DCGM's columns, values from the same readings as nvidia-smi") {
  const std::vector<std::string> args{"dmon", "-e", "155,156,112,252", "-i", "0,1,3"};
  const auto request = *parse_dmon(args);
  // "#Entity"/"ID" in 10 columns; POWER/W: width 10 + 6 + 2; TOTEC/mJ: 16 + 8; DVCCTR: 20 + 8; FBUSD: 10 + 8.
  CHECK(dmon_header(request) == "#Entity   POWER             TOTEC                   DVCCTR                      "
                                "FBUSD             \n"
                                "ID        W                 mJ                                                  "
                                "                  \n");
  const auto block = dmon_block(request, powered_pair());
  CHECK(block.exit_code == 0);
  CHECK(block.out == "GPU 0     443.750           123456789               0                           "
                     "22394             \n"
                     "GPU 1     350.000           98765432                4                           "
                     "22394             \n"
                     "GPU 3     75.000            0                       1                           "
                     "0                 \n");
}

TEST_CASE("sim dcgmi: a GPU without the energy counter prints N/A, an old driver's reasons still read") {
  auto snapshot = powered_pair();
  snapshot.config.energy_counter = false;
  snapshot.config.driver_version = "525.147.05";
  const std::vector<std::string> args{"dmon", "-e", "156,112", "-i", "1"};
  const auto block = dmon_block(*parse_dmon(args), snapshot);
  CHECK(block.exit_code == 0);
  CHECK(block.out == "GPU 1     N/A                     4                           \n");
}
