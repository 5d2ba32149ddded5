#include "../support/temp_dir.hpp"

#include <specctl/sim/batch_engine.hpp>
#include <specctl/sim/gpu_power.hpp>
#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>
#include <specctl/sim/power_meter.hpp>
#include <specctl/sim/scheduler.hpp>

#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <functional>
#include <memory>

using namespace specctl::sim;
using namespace std::chrono_literals;

namespace {

PerfModel default_model() {
  ServerArgs args;
  args.model_path = "/models/Kimi-K2.5-INT4";
  args.tp_size = 8;
  const Profile& profile = *find_profile("default");
  return PerfModel(profile, make_variant(args, profile).variant);
}

std::chrono::system_clock::time_point at_ms(std::int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

// A folder whose energy counters start at unix ms 1,000,000.
constexpr std::int64_t k_epoch_ms = 1'000'000;
void write_epoch(const specctl::test::TempDir& dir) {
  std::filesystem::create_directories(dir.path() / "power");
  std::ofstream(dir.path() / "power" / "epoch") << k_epoch_ms << "\n";
}

PowerRecord live_record(std::int64_t stamp_ms) {
  return PowerRecord{.pid = ::getpid(),
                     .start_time = *process_start_time(::getpid()),
                     .stamp_unix_ms = stamp_ms,
                     .gpus = {1},
                     .extra_energy_mj = 1000.0,
                     .extra_power_w = 200.0,
                     .extra_power_avg_w = 150.0,
                     .util_pct = 80.0,
                     .sm_mhz = 1980.0,
                     .reasons = 0,
                     .limit_w = 700.0};
}

} // namespace

TEST_CASE("sim power: a pass draws more the more tokens it computes, and a limit slows it") {
  const PowerSpec spec;
  CHECK(pass_power_w(1, spec) == doctest::Approx(75.0 + 625.0 * (0.35 + 0.6 / 49.0)));
  CHECK(pass_power_w(0, spec) == pass_power_w(1, spec));
  double last = 0.0;
  for (long tokens : {1L, 3L, 16L, 32L, 128L, 750L, 8192L, 1000000L}) {
    CAPTURE(tokens);
    const double watts = pass_power_w(tokens, spec);
    CHECK(watts > last);
    CHECK(watts < 0.96 * spec.tdp_w);
    last = watts;
  }
  const auto free = limit_pass(443.75, 700.0, spec);
  CHECK(free.power_w == 443.75);
  CHECK(free.sm_mhz == 1980.0);
  CHECK(free.slowdown == 1.0);
  CHECK_FALSE(free.capped);
  // Half the limit: the draw above idle fits by lowering the clock in proportion.
  const auto capped = limit_pass(443.75, 350.0, spec);
  CHECK(capped.power_w == 350.0);
  CHECK(capped.capped);
  CHECK(capped.slowdown == doctest::Approx(368.75 / 275.0));
  CHECK(capped.sm_mhz == doctest::Approx(1980.0 * 275.0 / 368.75));
  CHECK(gpu_temperature_c(spec.idle_w, spec) == 30.0);
  CHECK(gpu_temperature_c(700.0, spec) == doctest::Approx(73.75));
}

TEST_CASE("sim power: the batch engine prices each step's power, and a lower limit stretches the step") {
  const auto run_decode = [](double limit_w) {
    BatchEngine engine(default_model(), 0);
    PowerSpec spec;
    spec.limit_w = limit_w;
    engine.set_power(spec);
    for (int i = 0; i < 32; ++i) {
      engine.add(static_cast<RequestId>(i + 1), 13, 100, 0.0, 0.0);
    }
    const StepResult prefill = engine.step(0.0);
    REQUIRE(prefill.kind == StepKind::prefill);
    CHECK(engine.forward_tokens(prefill) == 32 * 13);
    const StepResult decode = engine.step(prefill.duration_s);
    REQUIRE(decode.kind == StepKind::decode);
    CHECK(engine.forward_tokens(decode) == 32);
    return decode;
  };
  const StepResult free = run_decode(700.0);
  CHECK(free.power_w == doctest::Approx(pass_power_w(32, PowerSpec{})));
  CHECK(free.sm_mhz == 1980.0);
  CHECK_FALSE(free.power_capped);
  const StepResult capped = run_decode(350.0);
  CHECK(capped.power_w == 350.0);
  CHECK(capped.power_capped);
  CHECK(capped.duration_s == doctest::Approx(free.duration_s * 1980.0 / capped.sm_mhz));
  CHECK(capped.duration_s > 1.3 * free.duration_s);
}

TEST_CASE("sim power: a speculative verify pass computes the draft tokens of every request") {
  ServerArgs args;
  args.model_path = "/models/Kimi-K2.5-INT4";
  args.tp_size = 8;
  args.speculative_algorithm = SpecAlgorithm::eagle3;
  args.speculative_draft_model_path = "/models/eagle3";
  args.speculative_num_steps = 2;
  args.speculative_eagle_topk = 1;
  args.speculative_num_draft_tokens = 3;
  const Profile& profile = *find_profile("default");
  BatchEngine engine(PerfModel(profile, make_variant(args, profile).variant), 0);
  for (int i = 0; i < 4; ++i) {
    engine.add(static_cast<RequestId>(i + 1), 13, 100, 0.0, 0.0);
  }
  const StepResult prefill = engine.step(0.0);
  const StepResult decode = engine.step(prefill.duration_s);
  CHECK(engine.forward_tokens(decode) == 4 * 3);
  CHECK(decode.power_w == doctest::Approx(pass_power_w(12, PowerSpec{})));
}

TEST_CASE("sim power: records round-trip, and the reader adds the idle floor and each live server") {
  specctl::test::TempDir dir{"specsim-power"};
  write_epoch(dir);
  const PowerSpec spec;
  const std::int64_t now = k_epoch_ms + 10'000;
  // No server: 75 W for 10 s on every GPU, idle.
  const auto idle = read_gpu_power(dir.path(), 2, spec, at_ms(now));
  REQUIRE(idle.size() == 2);
  CHECK(idle[0].energy_mj == doctest::Approx(750'000.0));
  CHECK(idle[0].power_w == 75.0);
  CHECK(idle[0].reasons == k_reason_gpu_idle);
  CHECK(idle[0].sm_mhz == spec.idle_sm_mhz);

  write_power_record(dir.path(), live_record(now - 500));
  const auto read_back = read_power_record(dir.path() / "power" / std::to_string(::getpid()));
  REQUIRE(read_back.has_value());
  CHECK(read_back->gpus == std::vector<int>{1});
  CHECK(read_back->extra_power_avg_w == 150.0);
  CHECK(read_back->reasons == 0);
  const auto busy = read_gpu_power(dir.path(), 2, spec, at_ms(now));
  CHECK(busy[0].energy_mj == doctest::Approx(750'000.0));
  // Its energy, plus its draw carried forward since its stamp (half a second).
  CHECK(busy[1].energy_mj == doctest::Approx(750'000.0 + 1000.0 + 200.0 * 500.0));
  CHECK(busy[1].power_w == 225.0);
  CHECK(busy[1].instant_w == 275.0);
  CHECK(busy[1].util_pct == 80.0);
  CHECK(busy[1].memory_util_pct == doctest::Approx(48.0));
  CHECK(busy[1].sm_mhz == 1980.0);
  CHECK(busy[1].reasons == 0);
  CHECK(busy[1].temperature_c == doctest::Approx(gpu_temperature_c(225.0, spec)));

  // A record that has not been renewed for 5 s is carried forward for 1 s only.
  write_power_record(dir.path(), live_record(now - 5000));
  CHECK(read_gpu_power(dir.path(), 2, spec, at_ms(now + 1))[1].energy_mj ==
        doctest::Approx(750'075.0 + 1000.0 + 200.0 * 1000.0));
}

TEST_CASE("sim power: a server gone leaves its energy, and the counter never goes back") {
  specctl::test::TempDir dir{"specsim-power"};
  write_epoch(dir);
  const PowerSpec spec;
  const std::int64_t now = k_epoch_ms + 10'000;
  // A server killed outright (its pid no longer runs): its record is folded into the base.
  PowerRecord killed = live_record(now - 200);
  killed.pid = 4194000;
  killed.start_time = 1;
  write_power_record(dir.path(), killed);
  const double expected = 750'000.0 + 1000.0 + 200.0 * 200.0;
  CHECK(read_gpu_power(dir.path(), 2, spec, at_ms(now))[1].energy_mj == doctest::Approx(expected));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "power" / "4194000"));
  CHECK(read_gpu_power(dir.path(), 2, spec, at_ms(now + 1000))[1].energy_mj == doctest::Approx(expected + 75'000.0));
  // A reader whose clock is behind the last reading's sees the last reading.
  CHECK(read_gpu_power(dir.path(), 2, spec, at_ms(now))[1].energy_mj == doctest::Approx(expected + 75'000.0));

  // A server that ends cleanly retires its record: exactly its energy, no extrapolation.
  PowerRecord ended = live_record(now);
  retire_power_record(dir.path(), ended);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "power" / std::to_string(::getpid())));
  CHECK(read_gpu_power(dir.path(), 2, spec, at_ms(now + 2000))[1].energy_mj ==
        doctest::Approx(expected + 150'000.0 + 1000.0));
}

TEST_CASE("sim power: the server's meter publishes what its steps draw, and retires on exit") {
  specctl::test::TempDir dir{"specsim-power"};
  const auto file = dir.path() / "power" / std::to_string(::getpid());
  {
    boost::asio::io_context io;
    PowerMeter meter(io, dir.path(), {0, 1}, 2, PowerSpec{});
    auto record = read_power_record(file);
    REQUIRE(record.has_value());
    CHECK(record->gpus == std::vector<int>{0, 1});
    CHECK(record->reasons == k_reason_gpu_idle);
    CHECK(record->extra_power_w == 0.0);

    meter.on_step(400.0, 1980.0, false);
    record = read_power_record(file);
    CHECK(record->extra_power_w == 325.0);
    CHECK(record->reasons == 0);
    io.run_for(300ms);
    record = read_power_record(file);
    // Ticks every 100 ms while stepping: the energy above idle grows at 325 W.
    CHECK(record->extra_energy_mj >= 325.0 * 200.0);
    CHECK(record->util_pct > 50.0);

    meter.set_limit(350.0);
    meter.on_step(350.0, 1500.0, true);
    record = read_power_record(file);
    CHECK(record->limit_w == 350.0);
    CHECK(record->reasons == k_reason_sw_power_cap);
    CHECK(record->sm_mhz == 1500.0);

    const auto truth = meter.truth();
    REQUIRE(truth["gpus"].size() == 2);
    CHECK(truth["gpus"][1]["index"] == 1);
    CHECK(truth["gpus"][0]["power_w"] == 350.0);
    CHECK(truth["gpus"][0]["server_energy_mj"].get<double>() >= record->extra_energy_mj);
    CHECK(truth["power_limit_w"] == 350.0);
    CHECK(truth["at_unix_ms"].get<std::int64_t>() >= record->stamp_unix_ms);

    meter.on_idle();
    record = read_power_record(file);
    CHECK(record->reasons == k_reason_gpu_idle);
    CHECK(record->sm_mhz == PowerSpec{}.idle_sm_mhz);
  }
  // Retired: no record left, its energy in the base.
  CHECK_FALSE(std::filesystem::exists(file));
  std::ifstream base(dir.path() / "power" / "base");
  int gpu = -1;
  double mj = 0.0;
  REQUIRE(static_cast<bool>(base >> gpu >> mj));
  CHECK(gpu == 0);
  CHECK(mj >= 325.0 * 200.0);
}

namespace {

// Submits the next request when one finishes, so each runs alone.
struct ChainSink : TokenSink {
  std::function<void()> on_finish;
  void on_tokens(int, bool finished) override {
    if (finished && on_finish) {
      on_finish();
    }
  }
};

} // namespace

TEST_CASE("sim power: the power-cap fault holds from request A's arrival until B have ended") {
  boost::asio::io_context io;
  const Log log(LogLevel::error, -1, -1);
  ServingStats stats;
  Scheduler scheduler(io, default_model(), SchedulerConfig{.speed = 1000.0, .kv_capacity_tokens = 1'000'000}, log,
                      stats);
  // Limit 400 W, capped at 200 W: one request's decode (301 W) is held back.
  PowerSpec spec;
  spec.limit_w = 400.0;
  scheduler.set_power(spec, nullptr, PowerCapWindow{.first = 2, .last = 3});
  CHECK(scheduler.power_cap_truth()["intervals"].empty());
  auto sink = std::make_shared<ChainSink>();
  RequestId next = 1;
  // A warm-up first: not a user request, never counted.
  scheduler.submit(next++, 7, 8, 0ms, sink, RequestKind::warmup);
  sink->on_finish = [&] {
    if (next <= 5) {
      scheduler.submit(next++, 13, 41, 0ms, sink);
    }
  };
  io.run_for(20s);
  REQUIRE(scheduler.recent().size() == 5);
  const auto truth = scheduler.power_cap_truth();
  CHECK(truth["received"] == 4);
  CHECK(truth["ended"] == 4);
  CHECK(truth["capped"] == false);
  CHECK(truth["limit_w"] == 200.0);
  REQUIRE(truth["intervals"].size() == 1);
  CHECK(truth["intervals"][0]["until_unix_ms"].get<std::int64_t>() >=
        truth["intervals"][0]["from_unix_ms"].get<std::int64_t>());
  // Decode time per token, model seconds: user requests 2 and 3 ran capped.
  std::vector<double> per_token;
  for (const auto& done : scheduler.recent()) {
    per_token.push_back((done.finish_s - done.first_token_s) / (done.completion_tokens - 1));
  }
  const PowerSpec reference;
  const double slowdown = (pass_power_w(1, reference) - 75.0) / (200.0 - 75.0);
  CHECK(per_token[2] == doctest::Approx(per_token[1] * slowdown));
  CHECK(per_token[3] == doctest::Approx(per_token[1] * slowdown));
  CHECK(per_token[4] == doctest::Approx(per_token[1]));
}
