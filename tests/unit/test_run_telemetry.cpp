#include <specctl/run/telemetry.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace specctl::run;

namespace {

const std::vector<std::string> k_fields = telemetry_fields_wanted();

// One line as `nvidia-smi --query-gpu=<k_fields> --format=csv,noheader,nounits` prints it.
std::string line(int index, double t, double power, double energy_mj, std::uint64_t reasons, double util = 90,
                 double memory = 120000, double sm = 1980) {
  const int whole = static_cast<int>(t);
  const int ms = static_cast<int>((t - whole) * 1000 + 0.5);
  return fmt::format(
      "{}, 2026/12/04 12:{:02d}:{:02d}.{:03d}, {:.2f}, 700.00, {:.0f}, {:.0f}, 143771, 45, {:.0f}, 1980, "
      "{:.0f}, 0x{:016x}\n",
      index, whole / 60, whole % 60, ms, power, util, memory, sm, energy_mj, reasons);
}

} // namespace

TEST_CASE("telemetry: nvidia-smi's timestamps are seconds whose differences hold across midnight and months") {
  auto a = parse_smi_timestamp("2026/12/31 23:59:59.750");
  auto b = parse_smi_timestamp("2027/01/01 00:00:00.250");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*b - *a == doctest::Approx(0.5));
  CHECK(*parse_smi_timestamp("2024/03/01 00:00:00.000") - *parse_smi_timestamp("2024/02/28 00:00:00.000") ==
        doctest::Approx(2 * 86400.0));
  CHECK_FALSE(parse_smi_timestamp("[N/A]"));
  CHECK_FALSE(parse_smi_timestamp("2026/13/01 00:00:00.000"));
  CHECK_FALSE(parse_smi_timestamp("2026/12/04"));
}

TEST_CASE("telemetry: sample lines parse by the query's fields, [N/A] is no value, a cut last line waits") {
  std::string csv = line(0, 0.0, 312.45, 1000000, 0x4);
  csv += "1, 2026/12/04 12:00:00.001, [N/A], [N/A], 88, 1024, 143771, 40, 1400, 1980, [Not Supported], [N/A]\n";
  csv += "garbage that is not a sample\n";
  csv += "2, 2026/12/04 12:00:00.002, 100.00"; // cut while written
  int bad = 0;
  auto samples = parse_samples(csv, k_fields, &bad);
  REQUIRE(samples.size() == 2);
  CHECK(bad == 1);
  CHECK(samples[0].index == 0);
  CHECK(*samples[0].power_w == doctest::Approx(312.45));
  CHECK(*samples[0].power_limit_w == doctest::Approx(700));
  CHECK(*samples[0].energy_mj == doctest::Approx(1e6));
  CHECK(*samples[0].reasons == 0x4);
  CHECK(samples[1].index == 1);
  CHECK_FALSE(samples[1].power_w);
  CHECK_FALSE(samples[1].energy_mj);
  CHECK_FALSE(samples[1].reasons);
  CHECK(*samples[1].sm_mhz == doctest::Approx(1400));
  CHECK(samples[1].t - samples[0].t == doctest::Approx(0.001));
}

TEST_CASE("telemetry: a level's energy comes from the counter's difference, scaled to the level's duration") {
  // Two GPUs, 0.5 s apart for 4 s; GPU 0 draws 400 W by its counter, GPU 1 200 W;
  // the instantaneous power.draw readings say otherwise (they are noisy), and the counter wins.
  std::string csv;
  for (int k = 0; k <= 8; ++k) {
    const double t = 0.5 * k;
    csv += line(0, t, k % 2 == 0 ? 350 : 450, 400'000 * t, 0x0);
    csv += line(1, t, 210, 200'000 * t, 0x0, 50, 130000, 990);
  }
  auto samples = parse_samples(csv, k_fields);
  REQUIRE(samples.size() == 18);
  auto figures = level_telemetry(samples, 5.0, 3000);
  CHECK(figures["samples"] == 9);
  CHECK(figures["span_s"].get<double>() == doctest::Approx(4.0));
  CHECK(figures["energy_source"] == "counter");
  // (400 + 200) W for the level's 5 s.
  CHECK(figures["energy_j"].get<double>() == doctest::Approx(3000.0));
  CHECK(figures["tok_per_j"].get<double>() == doctest::Approx(1.0));
  CHECK(figures["j_per_tok"].get<double>() == doctest::Approx(1.0));
  CHECK(figures["power_w"]["mean"].get<double>() == doctest::Approx(600.0));
  CHECK(figures["power_w"]["peak"].get<double>() == doctest::Approx(660.0));
  CHECK(figures["power_w"]["limit"].get<double>() == doctest::Approx(1400.0));
  CHECK(figures["util_mean_pct"].get<double>() == doctest::Approx(70.0));
  CHECK(figures["memory_peak_mib"].get<double>() == doctest::Approx(130000));
  CHECK(figures["sm_clock_share"].get<double>() == doctest::Approx(0.75));
  CHECK(figures["gpus"] == nlohmann::ordered_json::array({0, 1}));
  CHECK(figures["per_gpu"][1]["power_mean_w"].get<double>() == doctest::Approx(200.0));
  CHECK(figures["throttled"].empty());
}

TEST_CASE("telemetry: without the energy counter, energy is integrated power.draw and says so") {
  std::string csv;
  for (int k = 0; k < 4; ++k) {
    csv += line(0, 0.5 * k, 100.0 + 100 * k, 0, 0);
  }
  auto samples = parse_samples(csv, k_fields);
  for (auto& s : samples) {
    s.energy_mj.reset();
  }
  auto figures = level_telemetry(samples, 2.0, 500);
  CHECK(figures["energy_source"] == "integrated power");
  // Mean of 100, 200, 300, 400 W over 2 s.
  CHECK(figures["energy_j"].get<double>() == doctest::Approx(500.0));
  CHECK(figures["tok_per_j"].get<double>() == doctest::Approx(1.0));
}

TEST_CASE("telemetry: a throttle reason is flagged only when it held for more than 5% of the level") {
  auto figures_with = [](int throttled_blocks) {
    std::string csv;
    for (int k = 0; k < 20; ++k) {
      const std::uint64_t reasons = k < throttled_blocks ? 0x4 | 0x1 : 0x0;
      csv += line(0, 0.5 * k, 300, 300'000 * 0.5 * k, reasons);
      csv += line(1, 0.5 * k, 300, 300'000 * 0.5 * k, k < throttled_blocks ? 0x20 : 0x0);
    }
    return level_telemetry(parse_samples(csv, k_fields), 10.0, 100);
  };
  auto one = figures_with(1);
  CHECK(one["throttle"]["sw_power_cap"].get<double>() == doctest::Approx(0.05));
  CHECK(one["throttled"].empty());
  auto two = figures_with(2);
  CHECK(two["throttle"]["sw_power_cap"].get<double>() == doctest::Approx(0.10));
  CHECK(two["throttle"]["sw_thermal"].get<double>() == doctest::Approx(0.10));
  CHECK(two["throttle"]["hw_slowdown"].get<double>() == doctest::Approx(0.0));
  CHECK(two["throttled"] == nlohmann::ordered_json::array({"sw_power_cap", "sw_thermal"}));
  // The idle bit (0x1) alone is no throttle.
  std::string idle;
  for (int k = 0; k < 4; ++k) {
    idle += line(0, 0.5 * k, 70, 70'000 * 0.5 * k, 0x1);
  }
  auto quiet = level_telemetry(parse_samples(idle, k_fields), 2.0, 0);
  CHECK(quiet["throttled"].empty());
  CHECK(quiet["throttle"]["sw_power_cap"].get<double>() == 0.0);
  CHECK(quiet["tok_per_j"].is_null());
}

TEST_CASE("telemetry: the load's peak memory per GPU and the CSV rows carry the window's label") {
  std::string csv = line(0, 0, 80, 0, 0, 0, 1000) + line(1, 0, 80, 0, 0, 0, 2000) + line(0, 2, 90, 0, 0, 0, 90000) +
                    line(1, 2, 90, 0, 0, 0, 50000);
  auto samples = parse_samples(csv, k_fields);
  auto load = load_telemetry(samples);
  CHECK(load["samples"] == 2);
  CHECK(load["memory_peak_mib"] == nlohmann::ordered_json::array({90000.0, 50000.0}));
  CHECK(load["memory_total_mib"].get<double>() == doctest::Approx(143771));
  auto rows = telemetry_csv_rows(samples, "parallel", "c10", 2, samples.front().t - 1.0);
  CHECK(rows.starts_with("parallel,c10,2,1.000,0,80,700,0,1000,143771,45,1980,1980,0,0x0000000000000000\n"));
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 4);
  // Every row has the header's columns.
  const auto columns =
      std::count(std::string_view(k_telemetry_csv_header).begin(), std::string_view(k_telemetry_csv_header).end(), ',');
  CHECK(std::count(rows.begin(), rows.begin() + static_cast<long>(rows.find('\n')), ',') == columns);
}

TEST_CASE("telemetry: nvidia-smi's refusal of a field names the field") {
  CHECK(rejected_field("Field \"clocks_event_reasons.active\" is not a valid field to query.\n\n") ==
        "clocks_event_reasons.active");
  CHECK_FALSE(rejected_field("No devices were found"));
  auto argv = sampler_argv(TelemetryProbe{true, {"nvidia-smi"}, {"index", "timestamp"}, {}, false, {}},
                           std::vector<int>{2, 3}, 500);
  CHECK(argv == std::vector<std::string>{"nvidia-smi", "--query-gpu=index,timestamp", "--format=csv,noheader,nounits",
                                         "-lms", "500", "-i", "2,3"});
  // One reading (the load's last, once ready): no loop.
  CHECK(sampler_argv(TelemetryProbe{true, {"nvidia-smi"}, {"index"}, {}, false, {}}, std::nullopt, 0) ==
        std::vector<std::string>{"nvidia-smi", "--query-gpu=index", "--format=csv,noheader,nounits"});
}

// dmon's output as DCGM's DeviceMonitor prints it (header, rows, the header again,
// the goodbye after SIGINT), each line stamped by the sampler's bash with the host's clock.
TEST_CASE("telemetry: dcgmi dmon rows parse by DCGM's field order, N/A is no value, headers and goodbye are skipped") {
  const std::string text =
      "1764849600.000100 #Entity   SMCLK      DVCCTR                    SMMAX      TMPTR      POWER             "
      "TOTEC                     PMLMT             GPUTL             FBTTL             FBUSD\n"
      "1764849600.000200 ID                                                        C          W                 mJ\n"
      "1764849600.010000 GPU 0     1980       0                         1980       45         443.750           "
      "123456789                 700.000           98                143771            120000\n"
      "1764849600.010100 GPU 1     1341       4                         1980       46         350.000           "
      "N/A                       350.000           100               143771            118000\n"
      "1764849600.500000 GPU 0     1980       0                         1980\n"
      "1764849601.000000 \n"
      "1764849601.000000 dmon was stopped do to receiving a signal\n"
      "1764849601.100000 GPU 1     1341       4";
  int bad = -1;
  const auto samples = parse_dcgmi_samples(text, &bad);
  CHECK(bad == 1); // the short row; the cut last line waits
  REQUIRE(samples.size() == 2);
  CHECK(samples[0].index == 0);
  CHECK(samples[0].t == doctest::Approx(1764849600.01));
  CHECK(samples[0].sm_mhz == 1980.0);
  CHECK(samples[0].reasons == 0u);
  CHECK(samples[0].temperature_c == 45.0);
  CHECK(samples[0].power_w == 443.75);
  CHECK(samples[0].energy_mj == 123456789.0);
  CHECK(samples[0].power_limit_w == 700.0);
  CHECK(samples[0].util_pct == 98.0);
  CHECK(samples[0].memory_total_mib == 143771.0);
  CHECK(samples[0].memory_used_mib == 120000.0);
  CHECK(samples[1].index == 1);
  CHECK(samples[1].reasons == 0x4u);
  CHECK_FALSE(samples[1].energy_mj.has_value());
}

TEST_CASE("telemetry: dcgmi's sampler stamps dmon's lines with bash, -d for a loop and -c 1 for one reading") {
  TelemetryProbe probe;
  probe.available = true;
  probe.tool = TelemetryTool::dcgmi;
  probe.command = {"/opt/dcgm/dcgmi"};
  const auto loop = sampler_argv(probe, std::vector<int>{0, 1}, 500);
  REQUIRE(loop.size() == 12);
  CHECK(loop[0] == "bash");
  CHECK(loop[1] == "-c");
  CHECK(loop[2].find("$EPOCHREALTIME") != std::string::npos);
  CHECK(std::vector<std::string>(loop.begin() + 4, loop.end()) ==
        std::vector<std::string>{"/opt/dcgm/dcgmi", "dmon", "-e", "100,112,113,150,155,156,160,203,250,252", "-d",
                                 "500", "-i", "0,1"});
  const auto once = sampler_argv(probe, std::nullopt, 0);
  CHECK(
      std::vector<std::string>(once.begin() + 4, once.end()) ==
      std::vector<std::string>{"/opt/dcgm/dcgmi", "dmon", "-e", "100,112,113,150,155,156,160,203,250,252", "-c", "1"});
}
