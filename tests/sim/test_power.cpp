// The fake GPUs as a power instrument: nvidia-smi sampling in a loop (-lms) while a
// server runs load, held against the server's own truth (/sim/truth), and the
// power-cap fault.

#include "../support/specsim.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <numeric>
#include <sstream>

using namespace specctl::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// What specctl samples, plus the instant draw, with a header and without units.
const std::vector<std::string> k_loop_query{
    "--query-gpu=index,timestamp,power.draw,power.draw.instant,power.limit,utilization.gpu,clocks.sm,clocks.max.sm,"
    "total_energy_consumption,clocks_event_reasons.active",
    "--format=csv,nounits", "-i", "0,1"};
const std::string k_loop_header =
    "index, timestamp, power.draw [W], power.draw.instant [W], power.limit [W], utilization.gpu [%], "
    "clocks.current.sm [MHz], clocks.max.sm [MHz], total_energy_consumption [mJ], clocks_event_reasons.active";

constexpr double k_idle_w = 75.0;
// Decode of 32 requests without speculation: 75 + 625 x (0.35 + 0.6 x 32 / 80) W.
constexpr double k_batch32_w = 443.75;
constexpr int k_streams = 32;
// The sampling interval, and how long a test waits for telemetry to show something.
const std::string k_interval_ms = "200";
constexpr std::chrono::seconds k_telemetry_timeout{30};

struct Sample {
  int index = 0;
  std::int64_t unix_ms = 0;
  double power_w = 0.0;
  double instant_w = 0.0;
  double limit_w = 0.0;
  double util_pct = 0.0;
  double sm_mhz = 0.0;
  double max_sm_mhz = 0.0;
  double energy_mj = 0.0;
  std::uint64_t reasons = 0;
};

// "2026/12/04 12:00:00.123", local time.
std::int64_t parse_timestamp(const std::string& text) {
  std::tm local{};
  int millis = 0;
  REQUIRE(std::sscanf(text.c_str(), "%d/%d/%d %d:%d:%d.%d", &local.tm_year, &local.tm_mon, &local.tm_mday,
                      &local.tm_hour, &local.tm_min, &local.tm_sec, &millis) == 7);
  local.tm_year -= 1900;
  local.tm_mon -= 1;
  local.tm_isdst = -1;
  return static_cast<std::int64_t>(std::mktime(&local)) * 1000 + millis;
}

// The complete lines of the loop's output after its header.
std::vector<Sample> samples_of(const std::string& text) {
  std::vector<Sample> samples;
  auto lines = lines_of(text.substr(0, text.rfind('\n') + 1));
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells;
    std::istringstream in(lines[i]);
    for (std::string cell; std::getline(in, cell, ',');) {
      cells.push_back(cell.substr(cell.find_first_not_of(' ')));
    }
    CAPTURE(lines[i]);
    REQUIRE(cells.size() == 10);
    samples.push_back(Sample{.index = std::stoi(cells[0]),
                             .unix_ms = parse_timestamp(cells[1]),
                             .power_w = std::stod(cells[2]),
                             .instant_w = std::stod(cells[3]),
                             .limit_w = std::stod(cells[4]),
                             .util_pct = std::stod(cells[5]),
                             .sm_mhz = std::stod(cells[6]),
                             .max_sm_mhz = std::stod(cells[7]),
                             .energy_mj = std::stod(cells[8]),
                             .reasons = std::stoull(cells[9], nullptr, 16)});
  }
  return samples;
}

// `specsim nvidia-smi ... -lms 200` on a GPU folder, stopped with a signal.
class Sampler {
public:
  explicit Sampler(const GpuDir& gpus)
      : m_process(command(), m_dir / "smi.csv", {{"SPECSIM_GPU_DIR", gpus.path().string()}}) {}

  std::string text() const { return read_file(m_dir / "smi.csv"); }
  std::vector<Sample> samples() const { return samples_of(text()); }
  Process& process() { return m_process; }

  // The newest block (both GPUs of one instant) satisfies `holds`, within the timeout.
  bool wait_block(const std::function<bool(const Sample&)>& holds) const {
    return wait_until(
        [&] {
          const auto all = samples();
          return all.size() >= 2 && all.size() % 2 == 0 && holds(all[all.size() - 1]) && holds(all[all.size() - 2]);
        },
        k_telemetry_timeout);
  }

private:
  static std::vector<std::string> command() {
    std::vector<std::string> argv{specsim_binary(), "nvidia-smi"};
    argv.insert(argv.end(), k_loop_query.begin(), k_loop_query.end());
    argv.insert(argv.end(), {"-lms", k_interval_ms});
    return argv;
  }

  TempDir m_dir{"specsim-test"};
  Process m_process;
};

bool idle(const Sample& s) {
  return s.power_w == k_idle_w && s.instant_w == k_idle_w && s.util_pct == 0.0 && s.reasons == 0x1 && s.sm_mhz == 345.0;
}

json truth(Server& server) {
  const auto answer = http_get(server.url("/sim/truth"));
  REQUIRE(answer.status == 200);
  return json::parse(answer.body);
}

std::vector<std::string> stream_bodies(int count, int max_tokens) {
  return std::vector<std::string>(static_cast<std::size_t>(count), completion_body(max_tokens, Stream::yes));
}

// The mean model-time decode seconds per token of the user requests in [from, to) of the truth.
double decode_s_per_token(const json& requests, std::size_t from, std::size_t to) {
  double sum = 0.0;
  for (std::size_t i = from; i < to; ++i) {
    const auto& r = requests.at(i);
    sum += (r["finish_s"].get<double>() - r["first_token_s"].get<double>()) / (r["completion_tokens"].get<int>() - 1);
  }
  return sum / static_cast<double>(to - from);
}

} // namespace

TEST_CASE("nvidia-smi -lms: power rises with load and falls back, and the energy counter agrees with it") {
  Server server({"--tp-size", "2", "--sim-speed", "8"});
  REQUIRE(server.wait_ready());
  Sampler sampler(server.gpus());
  // The warm-up's steps drain out of the one-second means.
  REQUIRE(sampler.wait_block(idle));

  std::atomic<bool> load_done{false};
  auto load = std::async(std::launch::async, [&] {
    auto results = stream_post_many(server.url("/v1/completions"), stream_bodies(k_streams, 240), k_request_timeout);
    load_done = true;
    return results;
  });
  REQUIRE(sampler.wait_block([](const Sample& s) { return s.power_w > 0.95 * k_batch32_w; }));

  // A window of two seconds in the middle of the load, between two readings of the truth.
  const json before = truth(server);
  const std::int64_t t0 = before["energy"]["at_unix_ms"];
  REQUIRE(wait_until([&] { return sampler.samples().back().unix_ms > t0 + 2000; }, k_telemetry_timeout));
  const json after = truth(server);
  const std::int64_t t1 = after["energy"]["at_unix_ms"];
  CHECK_FALSE(load_done.load());
  const auto samples = sampler.samples();
  for (int gpu = 0; gpu < 2; ++gpu) {
    CAPTURE(gpu);
    std::vector<Sample> window;
    std::ranges::copy_if(samples, std::back_inserter(window),
                         [&](const Sample& s) { return s.index == gpu && s.unix_ms >= t0 && s.unix_ms <= t1; });
    REQUIRE(window.size() >= 5);
    const double mean_w = std::accumulate(window.begin(), window.end(), 0.0,
                                          [](double sum, const Sample& s) { return sum + s.power_w; }) /
                          static_cast<double>(window.size());
    CHECK(mean_w == doctest::Approx(k_batch32_w).epsilon(0.05));
    // The counter's difference over the window against the mean power times its length...
    const double counter_w = (window.back().energy_mj - window.front().energy_mj) /
                             static_cast<double>(window.back().unix_ms - window.front().unix_ms);
    CHECK(counter_w == doctest::Approx(mean_w).epsilon(0.05));
    // ...and the truth's exact energy over [t0, t1].
    const auto& gpu_before = before["energy"]["gpus"][static_cast<std::size_t>(gpu)];
    const auto& gpu_after = after["energy"]["gpus"][static_cast<std::size_t>(gpu)];
    CHECK(gpu_before["index"] == gpu);
    const double truth_w =
        (gpu_after["energy_mj"].get<double>() - gpu_before["energy_mj"].get<double>()) / static_cast<double>(t1 - t0);
    CHECK(truth_w == doctest::Approx(mean_w).epsilon(0.05));
    for (const auto& s : window) {
      CHECK(s.util_pct >= 95.0);
      CHECK(s.sm_mhz == 1980.0);
      CHECK(s.max_sm_mhz == 1980.0);
      CHECK(s.limit_w == 700.0);
      CHECK(s.reasons == 0x0);
    }
  }

  const auto results = load.get();
  for (const auto& stream : results) {
    CHECK(stream.done);
  }
  // Idle again once the load is over.
  CHECK(sampler.wait_block(idle));

  // TERM ends the loop cleanly; the header came once, every block is whole and newer than the last.
  sampler.process().signal(SIGTERM);
  CHECK(sampler.process().wait_exit_code(k_exit_timeout) == 0);
  const auto text = sampler.text();
  CHECK(text.starts_with(k_loop_header + "\n"));
  CHECK(text.find("index,", 1) == std::string::npos);
  CHECK(text.ends_with("\n"));
  const auto all = samples_of(text);
  REQUIRE(all.size() % 2 == 0);
  for (std::size_t i = 2; i < all.size(); i += 2) {
    CHECK(all[i].index == 0);
    CHECK(all[i + 1].index == 1);
    CHECK(all[i].unix_ms > all[i - 2].unix_ms);
    CHECK(all[i].energy_mj > all[i - 2].energy_mj);
    CHECK(all[i + 1].energy_mj > all[i - 1].energy_mj);
  }
}

TEST_CASE("fault power-cap: the capped requests' GPUs draw at most half the limit, flag sw_power_cap, and slow down") {
  Server server({"--tp-size", "2", "--sim-speed", "8", "--sim-fault", "power-cap:33-64"});
  REQUIRE(server.wait_ready());
  Sampler sampler(server.gpus());
  const auto url = server.url("/v1/completions");

  // Requests 1-32: uncapped.
  for (const auto& stream : stream_post_many(url, stream_bodies(k_streams, 100))) {
    REQUIRE(stream.done);
  }
  const json uncapped = truth(server);
  CHECK(uncapped["power_cap"]["received"] == 32);
  CHECK(uncapped["power_cap"]["intervals"].empty());

  // Requests 33-64: capped from the first one's arrival until all 64 have ended.
  auto load = std::async(std::launch::async, [&] { return stream_post_many(url, stream_bodies(k_streams, 100)); });
  CHECK(sampler.wait_block([](const Sample& s) { return (s.reasons & 0x4) != 0; }));
  for (const auto& stream : load.get()) {
    CHECK(stream.done);
  }
  const json capped = truth(server);
  const auto& cap = capped["power_cap"];
  CHECK(cap["received"] == 64);
  CHECK(cap["ended"] == 64);
  CHECK(cap["capped"] == false);
  CHECK(cap["limit_w"] == 350.0);
  REQUIRE(cap["intervals"].size() == 1);
  const std::int64_t from = cap["intervals"][0]["from_unix_ms"];
  const std::int64_t until = cap["intervals"][0]["until_unix_ms"];
  CHECK(until > from);

  // Idle again, and the limit back to 700 W.
  REQUIRE(sampler.wait_block(idle));
  int flagged = 0;
  for (const auto& s : sampler.samples()) {
    CAPTURE(s.unix_ms);
    if ((s.reasons & 0x4) != 0) {
      flagged += 1;
      CHECK(s.instant_w <= 350.0);
      CHECK(s.limit_w == 350.0);
      // The clock drops in proportion (at 32 requests a decode step's 1980 x 275 / 368.75 MHz).
      CHECK(s.sm_mhz < 1980.0);
      CHECK(s.sm_mhz >= 900.0);
      // Stamped within the cap's interval (a sample's instant may trail its record by a tick).
      CHECK(s.unix_ms >= from);
      CHECK(s.unix_ms <= until + 1000);
    }
    // Well outside it (a sample's instant is taken just before it reads the records).
    if (s.unix_ms < from - 500 || s.unix_ms > until + 1000) {
      CHECK(s.limit_w == 700.0);
    }
  }
  CHECK(flagged >= 1);

  // Throughput follows the clock: the capped batch's decode steps take (443.75 - 75) / (350 - 75) as long.
  std::vector<json> users;
  for (const auto& r : capped["requests"]) {
    if (r["kind"] == "user") {
      users.push_back(r);
    }
  }
  REQUIRE(users.size() == 64);
  const json requests = users;
  const double ratio = decode_s_per_token(requests, 32, 64) / decode_s_per_token(requests, 0, 32);
  CHECK(ratio == doctest::Approx((k_batch32_w - k_idle_w) / 275.0).epsilon(0.05));

  sampler.process().signal(SIGINT);
  CHECK(sampler.process().wait_exit_code(k_exit_timeout) == 0);
}

TEST_CASE("nvidia-smi energy: a server killed outright leaves its energy in the counter, never less") {
  Server server({"--tp-size", "2", "--sim-speed", "8"});
  REQUIRE(server.wait_ready());
  const std::vector<std::string> energy_query{"--query-gpu=total_energy_consumption,power.draw.instant",
                                              "--format=csv,noheader,nounits", "-i", "0"};
  const auto energy = [&] {
    const auto answer = server.gpus().nvidia_smi(energy_query);
    REQUIRE(answer.exit_code == 0);
    return std::stod(answer.out);
  };
  auto load = std::async(std::launch::async, [&] {
    return stream_post_many(server.url("/v1/completions"), stream_bodies(k_streams, 400), k_request_timeout);
  });
  REQUIRE(wait_until([&] { return server.gpus().nvidia_smi(energy_query).out.ends_with(", 443.75\n"); },
                     k_telemetry_timeout));
  const double busy = energy();
  server.process().signal(SIGKILL);
  REQUIRE(server.process().wait_exit(k_exit_timeout));
  load.get();
  const auto after = server.gpus().nvidia_smi(energy_query);
  CHECK(std::stod(after.out) >= busy);
  CHECK(after.out.ends_with(", 75.00\n"));
  // The killed server's record was folded into the base: no live record is left.
  CHECK_FALSE(std::filesystem::exists(server.gpus().path() / "power" / std::to_string(server.process().pid())));
  CHECK(energy() > busy);
}

TEST_CASE("nvidia-smi -lms without a server: idle blocks at their own instants until SIGINT") {
  GpuDir gpus;
  std::ofstream(gpus.path() / "config") << "count=2\n";
  TempDir out{"specsim-test"};
  std::vector<std::string> argv{specsim_binary(), "nvidia-smi",
                                "--query-gpu=index,timestamp,power.draw,total_energy_consumption", "--format=csv",
                                "--loop-ms=100"};
  Process smi(argv, out / "smi.csv", {{"SPECSIM_GPU_DIR", gpus.path().string()}});
  REQUIRE(wait_until([&] { return lines_of(read_file(out / "smi.csv")).size() >= 1 + 2 * 6; }, k_telemetry_timeout));
  smi.signal(SIGINT);
  CHECK(smi.wait_exit_code(k_exit_timeout) == 0);
  const auto lines = lines_of(read_file(out / "smi.csv"));
  REQUIRE(lines.size() >= 1 + 2 * 6);
  CHECK(lines[0] == "index, timestamp, power.draw [W], total_energy_consumption [mJ]");
  CHECK((lines.size() - 1) % 2 == 0);
  std::map<int, std::vector<std::pair<std::int64_t, double>>> by_gpu;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    CAPTURE(lines[i]);
    int index = -1;
    char stamp[32] = {};
    char time[32] = {};
    double watts = 0.0;
    double mj = 0.0;
    REQUIRE(std::sscanf(lines[i].c_str(), "%d, %31s %31[^,], %lf W, %lf mJ", &index, stamp, time, &watts, &mj) == 5);
    CHECK(index == static_cast<int>((i - 1) % 2));
    CHECK(watts == k_idle_w);
    by_gpu[index].emplace_back(parse_timestamp(std::string(stamp) + " " + time), mj);
  }
  for (const auto& [index, readings] : by_gpu) {
    for (std::size_t i = 1; i < readings.size(); ++i) {
      CHECK(readings[i].first > readings[i - 1].first);
      // 75 W is 75 mJ a millisecond, to the millijoule of the printed figures.
      CHECK(readings[i].second - readings[i - 1].second ==
            doctest::Approx(k_idle_w * static_cast<double>(readings[i].first - readings[i - 1].first)).epsilon(0.01));
    }
  }
}

TEST_CASE("dcgmi dmon: DCGM's header again after 14 blocks, a row per GPU and block, SIGINT's goodbye, -c counts") {
  GpuDir gpus;
  std::ofstream(gpus.path() / "config") << "count=2\n";
  TempDir out{"specsim-test"};
  const std::map<std::string, std::string> env{{"SPECSIM_GPU_DIR", gpus.path().string()}};
  {
    Process dmon({specsim_binary(), "dcgmi", "dmon", "-e", "155,156", "-d", "50", "-i", "0,1"}, out / "dmon.txt", env);
    // 16 blocks: the header before the first and again before the 16th.
    REQUIRE(wait_until(
        [&] {
          const auto lines = lines_of(read_file(out / "dmon.txt"));
          return std::ranges::count_if(lines, [](const std::string& l) { return l.starts_with("GPU 1 "); }) >= 16;
        },
        k_telemetry_timeout));
    dmon.signal(SIGINT);
    CHECK(dmon.wait_exit_code(k_exit_timeout) == 0);
  }
  const auto text = read_file(out / "dmon.txt");
  CHECK(text.ends_with("\n\ndmon was stopped do to receiving a signal\n"));
  const auto lines = lines_of(text);
  REQUIRE(lines.size() >= 2 + 2 * 15 + 2 + 2);
  CHECK(lines[0] == "#Entity   POWER             TOTEC                   ");
  CHECK(lines[1] == "ID        W                 mJ                      ");
  for (std::size_t block = 0; block < 15; ++block) {
    CAPTURE(block);
    CHECK(lines[2 + 2 * block].starts_with("GPU 0     75.000            "));
    CHECK(lines[3 + 2 * block].starts_with("GPU 1     75.000            "));
  }
  CHECK(lines[2 + 2 * 15] == lines[0]);
  CHECK(lines[3 + 2 * 15] == lines[1]);

  // -c 2: two blocks and done, without a goodbye.
  const auto counted = run_command({specsim_binary(), "dcgmi", "dmon", "-e", "203", "-c", "2", "-d", "10"}, env);
  CHECK(counted.exit_code == 0);
  CHECK(lines_of(counted.out).size() == 2 + 2 * 2);
  // SIGTERM kills it, as it does the real one (no handler).
  Process doomed({specsim_binary(), "dcgmi", "dmon", "-e", "155", "-d", "50"}, out / "doomed.txt", env);
  REQUIRE(wait_until([&] { return lines_of(read_file(out / "doomed.txt")).size() >= 4; }, k_telemetry_timeout));
  doomed.signal(SIGTERM);
  CHECK(doomed.wait_exit_code(k_exit_timeout) == 128 + SIGTERM);
}
