#include <doctest/doctest.h>

#include <specctl/run/server_metrics.hpp>
#include <specctl/server/server_template.hpp>
#include <specctl/sim/log.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/sim/scheduler.hpp>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <unistd.h>

using namespace specctl;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<const server::ServerTemplate> metrics_template(const std::string& name) {
  util::Diagnostics diag;
  auto tmpl = server::load_template(name, {"templates"}, diag, {});
  REQUIRE(tmpl);
  return tmpl;
}

std::vector<std::string> names_of(const std::vector<run::ServerMetric>& metrics) {
  std::vector<std::string> names;
  for (const auto& m : metrics) {
    names.push_back(m.name);
  }
  return names;
}

// The decode line exactly as src/sim/scheduler.cpp formats it (it keeps the format to itself).
std::string specsim_decode_line(int running, long tokens, double usage, std::optional<double> accept_length,
                                double throughput, int queued) {
  std::string spec;
  if (accept_length) {
    spec = fmt::format("accept len: {:.2f}, accept rate: {:.2f}, ", *accept_length, (*accept_length - 1.0) / 3);
  }
  return specctl::sim::log_prefix(std::chrono::system_clock::now(), 0) +
         fmt::format("Decode batch, #running-req: {}, #token: {}, token usage: {:.2f}, {}cuda graph: {}, "
                     "gen throughput (token/s): {:.2f}, #queue-req: {}, ",
                     running, tokens, usage, spec, "True", throughput, queued);
}

// A temporary file removed when the test ends; the simulated server logs into it.
struct TempLog {
  std::string path;
  int fd = -1;
  TempLog() {
    path = "/tmp/specctl-test-metrics-XXXXXX";
    fd = ::mkstemp(path.data());
    REQUIRE(fd >= 0);
  }
  ~TempLog() {
    ::close(fd);
    std::remove(path.c_str());
  }
  std::string text() const {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

struct CountingSink : specctl::sim::TokenSink {
  int tokens = 0;
  bool finished = false;
  void on_tokens(int n, bool done) override {
    tokens += n;
    finished = finished || done;
  }
};

} // namespace

TEST_CASE("server metrics from specsim decode lines") {
  const auto tmpl = metrics_template("specsim");
  const std::string window =
      "[2025-01-22 10:00:00] INFO:     127.0.0.1:5000 - \"POST /v1/completions HTTP/1.1\" 200 OK\n" +
      specsim_decode_line(8, 12345, 0.05, 3.21, 1234.56, 0) + "\n" +
      specsim_decode_line(8, 12600, 0.05, 2.50, 1100.00, 2) + "\r\n" +
      specsim_decode_line(6, 12800, 0.05, 2.79, 1300.50, 0) + "\n" +
      // Cut in the middle of a write: "accept len: 3." must not count as 3.
      "[2025-01-22 10:00:01 TP0] Decode batch, #running-req: 6, #token: 12900, token usage: 0.05, "
      "accept len: 3.";
  const auto metrics = run::scan_server_metrics(tmpl->log, window);

  SUBCASE("template order, only metrics that appeared") {
    CHECK(names_of(metrics) ==
          std::vector<std::string>{"accept_length", "gen_throughput", "running_requests", "queued_requests"});
  }
  SUBCASE("accept length") {
    const auto* accept = run::find_server_metric(metrics, "accept_length");
    REQUIRE(accept != nullptr);
    CHECK(accept->samples == 3);
    CHECK(accept->mean == doctest::Approx((3.21 + 2.50 + 2.79) / 3));
    CHECK(accept->min == doctest::Approx(2.50));
    CHECK(accept->max == doctest::Approx(3.21));
    CHECK(accept->last == doctest::Approx(2.79));
    CHECK_FALSE(run::speculation_ineffective(accept->mean));
  }
  SUBCASE("throughput and queue") {
    const auto* throughput = run::find_server_metric(metrics, "gen_throughput");
    REQUIRE(throughput != nullptr);
    CHECK(throughput->samples == 3);
    CHECK(throughput->max == doctest::Approx(1300.50));
    const auto* queued = run::find_server_metric(metrics, "queued_requests");
    REQUIRE(queued != nullptr);
    CHECK(queued->max == 2);
    CHECK(queued->last == 0);
  }
  SUBCASE("without speculation there is no accept length") {
    const auto plain =
        run::scan_server_metrics(tmpl->log, specsim_decode_line(1, 300, 0.01, std::nullopt, 92.6, 0) + "\n");
    CHECK(names_of(plain) == std::vector<std::string>{"gen_throughput", "running_requests", "queued_requests"});
    CHECK(run::find_server_metric(plain, "accept_length") == nullptr);
  }
  SUBCASE("older SGLang decode lines") {
    const auto old = run::scan_server_metrics(
        tmpl->log, "[2024-10-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 500, token usage: 0.00, "
                   "accept len: 1.02, gen throughput (token/s): 80.10, #queue-req: 0\n");
    const auto* accept = run::find_server_metric(old, "accept_length");
    REQUIRE(accept != nullptr);
    CHECK(accept->mean == doctest::Approx(1.02));
    CHECK(run::speculation_ineffective(accept->mean));
  }
}

// The lines a running specsim scheduler really writes, read back through the template.
TEST_CASE("server metrics from a simulated scheduler's log") {
  namespace sim = specctl::sim;
  const sim::Profile* profile = sim::find_profile("default");
  REQUIRE(profile != nullptr);
  sim::ServerArgs args;
  args.speculative_algorithm = sim::SpecAlgorithm::eagle3;
  const sim::PerfModel model(*profile, sim::make_variant(args, *profile).variant);
  REQUIRE(model.speculative());

  TempLog file;
  const sim::Log log(sim::LogLevel::info, file.fd, file.fd);
  sim::ServingStats stats;
  boost::asio::io_context io;
  sim::SchedulerConfig config;
  config.speed = 1000;
  config.decode_log_interval = 5;
  config.kv_capacity_tokens = 1'000'000;
  sim::Scheduler scheduler(io, model, config, log, stats);
  std::vector<std::shared_ptr<CountingSink>> sinks;
  for (sim::RequestId id = 1; id <= 4; ++id) {
    sinks.push_back(std::make_shared<CountingSink>());
    scheduler.submit(id, 32, 400, 0ms, sinks.back());
  }
  io.run_for(20s);
  for (const auto& sink : sinks) {
    REQUIRE(sink->finished);
  }

  const std::string window = file.text();
  const auto metrics = run::scan_server_metrics(metrics_template("specsim")->log, window);
  const auto* accept = run::find_server_metric(metrics, "accept_length");
  REQUIRE(accept != nullptr);
  CHECK(accept->samples >= 5);
  CHECK(accept->min >= 1.0);
  CHECK(accept->max <= model.max_accept_length());
  CHECK(accept->mean == doctest::Approx(model.mean_accept_length()).epsilon(0.05));
  const auto* throughput = run::find_server_metric(metrics, "gen_throughput");
  REQUIRE(throughput != nullptr);
  CHECK(throughput->samples == accept->samples);
  CHECK(throughput->min > 0);
}

TEST_CASE("server metrics from vLLM log lines") {
  const auto tmpl = metrics_template("vllm");
  const std::string window =
      "\x1b[32m(APIServer pid=11980) INFO\x1b[0m 02-12 19:33:44 [loggers.py:123] Engine 000: Avg prompt throughput: "
      "52.0 tokens/s, Avg generation throughput: 123.4 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache "
      "usage: 3.2%, Prefix cache hit rate: 0.0%\n"
      "\x1b[32m(APIServer pid=11980) INFO\x1b[0m 02-12 19:33:44 [metrics.py:111] SpecDecoding metrics: Mean "
      "acceptance length: 2.85, Accepted throughput: 410.22 tokens/s, Drafted throughput: 660.00 tokens/s, Accepted: "
      "4102 tokens, Drafted: 6600 tokens, Per-position acceptance rate: 0.812, 0.601, 0.437, Avg Draft acceptance "
      "rate: 62.2%\r"
      "(APIServer pid=11980) INFO 02-12 19:33:49 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
      "Avg generation throughput: 140.6 tokens/s, Running: 6 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%\n"
      "(APIServer pid=11980) INFO 02-12 19:33:49 [metrics.py:111] SpecDecoding metrics: Mean acceptance length: "
      "3.15, Accepted throughput: 450.00 tokens/s, Drafted throughput: 640.00 tokens/s, Accepted: 4500 tokens, "
      "Drafted: 6400 tokens, Per-position acceptance rate: 0.850, 0.700, 0.600, Avg Draft acceptance rate: 70.3%\n"
      // The older format has no acceptance length, only the rate.
      "INFO 01-10 08:00:00 [metrics.py:90] SpecDecoding metrics: Draft acceptance rate: 55.0%, Accepted: 1100 "
      "tokens, Drafted: 2000 tokens\n";
  const auto metrics = run::scan_server_metrics(tmpl->log, window);

  CHECK(names_of(metrics) == std::vector<std::string>{"accept_length", "draft_acceptance_rate", "gen_throughput",
                                                      "running_requests", "queued_requests", "accepted_tokens",
                                                      "drafted_tokens"});
  const auto* accept = run::find_server_metric(metrics, "accept_length");
  REQUIRE(accept != nullptr);
  CHECK(accept->samples == 2);
  CHECK(accept->mean == doctest::Approx(3.0));
  CHECK(accept->last == doctest::Approx(3.15));
  const auto* rate = run::find_server_metric(metrics, "draft_acceptance_rate");
  REQUIRE(rate != nullptr);
  CHECK(rate->samples == 3);
  CHECK(rate->min == doctest::Approx(55.0));
  CHECK(rate->max == doctest::Approx(70.3));
  const auto* running = run::find_server_metric(metrics, "running_requests");
  REQUIRE(running != nullptr);
  CHECK(running->mean == doctest::Approx(7.0));
}

TEST_CASE("server metrics from an empty or silent window") {
  const auto tmpl = metrics_template("sglang");
  CHECK(run::scan_server_metrics(tmpl->log, "").empty());
  CHECK(run::scan_server_metrics(tmpl->log, "[2025-01-22 10:00:00] INFO:     Started server process [1]\n").empty());
}

TEST_CASE("speculation_ineffective") {
  CHECK(run::speculation_ineffective(1.0));
  CHECK(run::speculation_ineffective(1.04));
  CHECK_FALSE(run::speculation_ineffective(run::k_ineffective_accept_length));
  CHECK_FALSE(run::speculation_ineffective(1.5));
  CHECK_FALSE(run::speculation_ineffective(3.2));
}

TEST_CASE("prometheus_value sums a counter over its label sets, with or without _total") {
  // The text format as vLLM's prometheus_client serves it (v1/spec_decode/metrics.py counters).
  const std::string text = "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
                           "# TYPE vllm:spec_decode_num_drafts_total counter\n"
                           "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 120.0\n"
                           "vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m}\"} 30.0\n"
                           "vllm:spec_decode_num_drafts_created 1.7e9\n"
                           "plain 5\n";
  CHECK(run::prometheus_value(text, "vllm:spec_decode_num_drafts") == doctest::Approx(150.0));
  CHECK(run::prometheus_value(text, "vllm:spec_decode_num_drafts_total") == doctest::Approx(150.0));
  CHECK(run::prometheus_value(text, "plain") == doctest::Approx(5.0));
  CHECK_FALSE(run::prometheus_value(text, "vllm:spec_decode_num_accepted_tokens"));
  CHECK_FALSE(run::prometheus_value("garbage{ x\nvllm:x notanumber\n", "vllm:x"));
}

TEST_CASE("accept length over a window comes from the template's best source and names it") {
  server::LogPatterns patterns;
  patterns.metrics = {{"accept_length", R"(Decode batch.*accept len: ([0-9.]+))"},
                      {"running_requests", R"(Decode batch.*#running-req: (\d+))"}};
  // Two decode lines: 2 requests at accept 3.0 and 6 at accept 1.0. Over verify
  // passes that is (2*3 + 6*1) / 8 = 1.5; the mean of lines would say 2.0.
  const std::string log = "Decode batch, #running-req: 2, #token: 10, accept len: 3.00, gen throughput (token/s): 5\n"
                          "Prefill batch, #running-req: 40, #new-token: 9\n"
                          "Decode batch, #running-req: 6, #token: 10, accept len: 1.00, gen throughput (token/s): 5\n";
  run::AcceptWindow window;
  window.log = log;
  SUBCASE("log lines weighted by the passes they cover") {
    server::AcceptSource source;
    source.kind = server::AcceptSource::Kind::log;
    source.weight = "running_requests";
    auto a = run::accept_length_of({source}, patterns, window);
    REQUIRE(a);
    CHECK(a->value == doctest::Approx(1.5));
    CHECK(a->over == doctest::Approx(8));
    CHECK(a->source == "log: \"accept_length\" weighted by \"running_requests\"");
  }
  SUBCASE("no sources: the mean over lines, as before") {
    auto a = run::accept_length_of({}, patterns, window);
    REQUIRE(a);
    CHECK(a->value == doctest::Approx(2.0));
  }
  SUBCASE("prometheus deltas win over the log, and fall back to it without counters") {
    server::AcceptSource prom;
    prom.kind = server::AcceptSource::Kind::prometheus;
    prom.drafts = "vllm:spec_decode_num_drafts";
    prom.accepted = "vllm:spec_decode_num_accepted_tokens";
    server::AcceptSource log_source;
    log_source.weight = "running_requests";
    // Since boot: 100 drafts and 150 accepted before (warmup), 300 and 550 after.
    window.metrics_before = "vllm:spec_decode_num_drafts_total 100\nvllm:spec_decode_num_accepted_tokens_total 150\n";
    window.metrics_after = "vllm:spec_decode_num_drafts_total 300\nvllm:spec_decode_num_accepted_tokens_total 550\n";
    auto a = run::accept_length_of({prom, log_source}, patterns, window);
    REQUIRE(a);
    CHECK(a->kind == server::AcceptSource::Kind::prometheus);
    CHECK(a->value == doctest::Approx(3.0));
    CHECK(a->over == doctest::Approx(200));
    window.metrics_after = "# the server restarted its counters? nothing to read\n";
    a = run::accept_length_of({prom, log_source}, patterns, window);
    REQUIRE(a);
    CHECK(a->kind == server::AcceptSource::Kind::log);
  }
  SUBCASE("responses: accepted over verify steps of the completed requests") {
    server::AcceptSource responses;
    responses.kind = server::AcceptSource::Kind::responses;
    // 2 requests, 64 tokens each, 84 accepted: steps = 128 - 2 - 84 = 42.
    window.draft_accepted = 84;
    window.predicted_tokens = 128;
    window.completed = 2;
    auto a = run::accept_length_of({responses}, patterns, window);
    REQUIRE(a);
    CHECK(a->value == doctest::Approx(1.0 + 84.0 / 42.0));
    window.draft_accepted = -1;
    CHECK_FALSE(run::accept_length_of({responses}, patterns, window));
  }
}

TEST_CASE("llama.cpp's per-request lines give the window's mean len over its verify passes") {
  // Real lines of llama-server (3f545bec, tools/server/server-context.cpp print_timing), two requests.
  server::LogPatterns patterns;
  patterns.metrics = {
      {"accept_length", R"(draft acceptance = [0-9.]+ \(\s*\d+ accepted /\s*\d+ generated\), mean len =\s*([0-9.]+))"},
      {"accepted_tokens", R"(draft acceptance = [0-9.]+ \(\s*(\d+) accepted /)"}};
  const std::string log =
      "0.06.716.591 I slot print_timing: id  3 | task 0 | draft acceptance = 0.45455 (   40 accepted /    88 "
      "generated), mean len =  2.82\n"
      "0.08.948.326 I slot print_timing: id  2 | task 50 | draft acceptance = 0.55263 (   42 accepted /    76 "
      "generated), mean len =  3.10\n";
  server::AcceptSource source;
  source.accepted = "accepted_tokens";
  run::AcceptWindow window;
  window.log = log;
  auto a = run::accept_length_of({source}, patterns, window);
  REQUIRE(a);
  // 40 / 1.82 = 21.98 -> 22 passes, 42 / 2.10 = 20 passes: 1 + 82 / 42.
  CHECK(a->over == doctest::Approx(42));
  CHECK(a->value == doctest::Approx(1.0 + 82.0 / 42.0));
}
