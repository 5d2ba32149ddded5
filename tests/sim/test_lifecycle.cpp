// specsim's life as specctl sees it: refused while loading, the SGLang-like
// log, readiness, argparse errors, and stopping.

#include "../support/specsim.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <regex>
#include <sstream>

using namespace specctl::test;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> k_eagle3_args{
    "--speculative-algorithm",        "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
    "--speculative-num-steps",        "2",      "--speculative-eagle-topk",       "1",
    "--speculative-num-draft-tokens", "3"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

} // namespace

TEST_CASE("specsim refuses connections while loading, then is ready after the load time") {
  constexpr auto k_load_time = std::chrono::milliseconds(2000);
  const auto start = Clock::now();
  Server server(with({"--sim-load-time", "2s", "--sim-speed", "1", "--tp-size", "2"}, k_eagle3_args));
  REQUIRE(server.wait_log("Load weight begin"));
  CHECK(connection_refused(server.port()));
  CHECK(http_get(server.url("/health"), 2s).curl == CURLE_COULDNT_CONNECT);
  REQUIRE(server.wait_ready());
  // The port opens only after the load; the upper bound is wait_ready's deadline.
  CHECK(Clock::now() - start >= k_load_time - 100ms);
  REQUIRE(server.wait_log("The server is fired up and ready to roll!"));

  const std::string log = server.log();
  {
    // The milestones come in SGLang's order.
    const std::vector<std::string> milestones{
        "server_args=ServerArgs(model_path='/models/Kimi-K2.5-INT4'",
        "[TP1]",
        "Init torch distributed begin.",
        "Load weight begin. avail mem=",
        "Multi-thread loading shards:   0% Completed | 0/64 [00:00<?, ?it/s]",
        "Multi-thread loading shards: 100% Completed | 64/64 [",
        "Load weight end. elapsed=",
        "Multi-thread loading shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
        "Multi-thread loading shards: 100% Completed | 1/1 [",
        "KV Cache is allocated. #tokens: ",
        "Capture cuda graph begin. This can take up to several minutes.",
        "Capture cuda graph end. Time elapsed: ",
        "max_total_num_tokens=",
        "Uvicorn running on http://127.0.0.1:" + std::to_string(server.port()),
        "Prefill batch, #new-seq: 1",
        "The server is fired up and ready to roll!",
    };
    std::size_t at = 0;
    for (const auto& milestone : milestones) {
      if (milestone == "[TP1]") {
        CHECK(log.find(" TP1] Load weight begin.") != std::string::npos);
        continue;
      }
      CAPTURE(milestone);
      const auto found = log.find(milestone, at);
      REQUIRE(found != std::string::npos);
      at = found;
    }
  }
  {
    // Log lines carry SGLang's prefix; load progress has tqdm's bar format.
    const std::regex prefixed(R"(^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( TP\d+)?\] .*)");
    const std::regex bar(R"(^Multi-thread loading shards: +\d+% Completed \| \d+/(64|1) )"
                         R"(\[\d\d:\d\d<(\d\d:\d\d|\?), +([\d.]+(it/s|s/it)|\?it/s)\]$)");
    std::istringstream lines(log);
    int bars = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("Multi-thread loading")) {
        CAPTURE(line);
        CHECK(std::regex_match(line, bar));
        ++bars;
      } else if (line.starts_with("[")) {
        CAPTURE(line);
        CHECK(std::regex_match(line, prefixed));
      }
    }
    CHECK(bars == 65 + 2);
  }
}

TEST_CASE("specsim rejects unknown flags the way argparse does") {
  SUBCASE("unrecognized arguments") {
    const auto result = run_command({specsim_binary(), "--model-path", "/m", "--foo", "--tp-size", "8", "bar"});
    CHECK(result.exit_code == 2);
    CHECK(result.out.starts_with("usage: specsim [-h] --model-path MODEL_PATH"));
    CHECK(result.out.find("\nspecsim: error: unrecognized arguments: --foo bar\n") != std::string::npos);
  }
  SUBCASE("a flag without its value") {
    const auto result = run_command({specsim_binary(), "--model-path", "/m", "--tp-size"});
    CHECK(result.exit_code == 2);
    CHECK(result.out.find("specsim: error: argument --tp-size/--tensor-parallel-size: expected one argument") !=
          std::string::npos);
  }
  SUBCASE("a bad fault names the known ones") {
    const auto result = run_command({specsim_binary(), "--model-path", "/m", "--sim-fault", "crash-laod"});
    CHECK(result.exit_code == 2);
    CHECK(result.out.find("unknown fault \"crash-laod\" (did you mean \"crash-load\"?)") != std::string::npos);
  }
  SUBCASE("--help") {
    const auto result = run_command({specsim_binary(), "--help"});
    CHECK(result.exit_code == 0);
    CHECK(result.out.find("--sim-load-time DURATION") != std::string::npos);
  }
}

TEST_CASE("specsim takes --flag=value and SGLang's aliases") {
  Server server({"--model=/models/alias", "--port={port}", "--tensor-parallel-size=2", "--sim-gpu-dir={gpu_dir}",
                 "--sim-load-time=0", "--sim-speed=10", "--cuda-graph-bs", "1", "2", "4", "8", "--enable-nccl-nvls",
                 "--enable-symm-mem"},
                Defaults::no);
  REQUIRE(server.wait_ready());
  const auto info = http_get(server.url("/get_model_info"));
  CHECK(info.body.find("\"model_path\":\"/models/alias\"") != std::string::npos);
  CHECK(server.log().find("tp_size=2") != std::string::npos);
  CHECK(server.log().find("cuda_graph_bs=[1, 2, 4, 8]") != std::string::npos);
}

TEST_CASE("SIGTERM stops the server and its workers") {
  Server server({"--tp-size", "2"});
  REQUIRE(server.wait_ready());
  const std::vector<std::string> apps{"--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                                      "--format=csv,noheader,nounits"};
  CHECK(server.gpus().nvidia_smi(apps).out != "");
  server.process().signal(SIGTERM);
  CHECK(server.process().wait_exit_code(k_exit_timeout) == 0);
  CHECK(wait_until([&] { return server.gpus().nvidia_smi(apps).out.empty(); }, k_exit_timeout));
  CHECK(server.log().find("INFO:     Shutting down") != std::string::npos);
  CHECK(connection_refused(server.port()));
}

TEST_CASE("--log-level warning hides SGLang's info lines but not the load bars") {
  Server server({"--log-level", "warning"});
  REQUIRE(server.wait_ready());
  const std::string log = server.log();
  CHECK(log.find("Load weight begin") == std::string::npos);
  CHECK(log.find("fired up") == std::string::npos);
  CHECK(log.find("Multi-thread loading shards: 100% Completed | 64/64") != std::string::npos);
}
