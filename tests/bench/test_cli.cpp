// `specctl bench` as a user runs it: exit codes, files, output.

#include <doctest/doctest.h>

#include "../support/child.hpp"
#include "../support/script_server.hpp"

#include <nlohmann/json.hpp>
#include <sstream>

using namespace specctl::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> bench(const std::string& url, std::vector<std::string> args) {
  std::vector<std::string> argv = {specctl_binary(), "bench", "--url", url};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

void check_summary(const nlohmann::json& s) {
  for (const char* key : {"mean", "p50", "p90", "p99", "stdev"}) {
    CAPTURE(key);
    CHECK(s.contains(key));
  }
}

} // namespace

TEST_CASE("cli: every mode into JSON, JSON lines and a table") {
  ScriptServer server([](int, const std::string&, const std::string&) {
    Behavior b;
    b.itl = 1ms;
    return b;
  });
  TempDir dir;
  const auto json_path = dir.path() / "bench.json";
  const auto lines_path = dir.path() / "requests.jsonl";
  const auto result =
      run_child(bench(server.url(), {"--single-stream", "--runs", "2", "--concurrency", "1,3", "--requests", "6",
                                     "--rate", "50", "--duration", "400ms", "--max-tokens", "8", "--json",
                                     json_path.string(), "--requests-jsonl", lines_path.string()}));
  CAPTURE(result.out);
  CAPTURE(result.err);
  REQUIRE(result.code == 0);
  const auto doc = nlohmann::json::parse(read_file(json_path));
  CHECK(doc["format"] == "specctl-bench");
  CHECK(doc["version"] == 1);
  CHECK(doc["target"]["model"] == "script-model");
  CHECK(doc["target"]["endpoint"] == "completions");
  CHECK(doc["request"]["max_tokens"] == 8);
  CHECK(doc["prompts"] == "seeds");
  const auto& single = doc["single_stream"];
  REQUIRE(single["runs"].size() == 2);
  CHECK(single["runs"][0]["tok_s"].get<double>() > 0);
  CHECK(single["mean"].get<double>() > 0);
  CHECK(single.contains("median"));
  CHECK(single.contains("stdev"));
  REQUIRE(doc["levels"].size() == 2);
  for (const auto& level : doc["levels"]) {
    CHECK(level["completed"] == 6);
    CHECK(level["failed"] == 0);
    CHECK(level["output_tok_s"].get<double>() > 0);
    CHECK(level["request_s"].get<double>() > 0);
    CHECK(level["token_source"] == "usage");
    for (const char* metric : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
      check_summary(level[metric]);
    }
  }
  CHECK(doc["levels"][0]["concurrency"] == 1);
  CHECK(doc["levels"][1]["concurrency"] == 3);
  REQUIRE(doc["rates"].size() == 1);
  CHECK(doc["rates"][0]["rate"] == 50.0);
  const int rate_requests = doc["rates"][0]["requests"];

  std::istringstream lines(read_file(lines_path));
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    const auto record = nlohmann::json::parse(line);
    CHECK(record["ok"] == true);
    CHECK(record["output_tokens"] == 8);
    CHECK(record["chunks"].size() == 8);
    ++count;
  }
  CHECK(count == 2 + 6 + 6 + rate_requests);

  CHECK(result.out.find("specctl bench: " + server.url() +
                        " model \"script-model\", completions, max_tokens 8, "
                        "prompts seeds\n") == 0);
  CHECK(result.out.find("Single stream: 2 of 2 runs,") != std::string::npos);
  CHECK(result.out.find("Concurrency (latencies p50 / p99)\n") != std::string::npos);
  CHECK(result.out.find("  conc  done  failed  out tok/s") != std::string::npos);
  CHECK(result.out.find("Request rate (open loop") != std::string::npos);
  CHECK(result.out.find("Problems") == std::string::npos);
  // Not a terminal: plain progress lines, one per phase at least.
  CHECK(result.err.find("single-stream: 2/2 requests") != std::string::npos);
  CHECK(result.err.find("concurrency 3: 6/6 requests") != std::string::npos);
  CHECK(result.err.find('\r') == std::string::npos);
}

TEST_CASE("cli: failures are reported, counted and set the exit code") {
  ScriptServer server([](int index, const std::string&, const std::string&) {
    Behavior b;
    b.status = index % 2 == 0 ? 503 : 200;
    return b;
  });
  const auto result = run_child(bench(
      server.url(), {"--concurrency", "2", "--requests", "4", "--max-tokens", "4", "--warmup", "0", "--no-progress"}));
  CAPTURE(result.err);
  CHECK(result.code == 1);
  CHECK(result.out.find("Problems:\n  concurrency 2: 2 failed with http_status, first: HTTP 503: ") !=
        std::string::npos);
  CHECK(result.err == "specctl: error: 2 of 4 requests failed (see Problems above)\n");
  CHECK(result.out.find("Single stream") == std::string::npos);
}

TEST_CASE("cli: bad input and unreachable servers end clearly") {
  SUBCASE("bad URL") {
    const auto result = run_child(bench("localhost:30000", {"--no-progress"}));
    CHECK(result.code == 2);
    CHECK(result.err ==
          "specctl: error: invalid URL \"localhost:30000\": give the scheme and host, like http://127.0.0.1:30000\n");
  }
  SUBCASE("nothing listens") {
    const std::string url = "http://127.0.0.1:" + std::to_string(free_port());
    const auto result = run_child(bench(url, {"--no-progress"}));
    CHECK(result.code == 1);
    CHECK(result.err.starts_with("specctl: error: cannot ask the server for its model: GET " + url + "/v1/models: "));
    const auto counted = run_child(bench(url, {"--model", "m", "--runs", "2", "--warmup", "0", "--no-progress"}));
    CHECK(counted.code == 1);
    CHECK(counted.out.find("2 failed with connect") != std::string::npos);
    CHECK(counted.err == "specctl: error: 2 of 2 requests failed (see Problems above)\n");
  }
  SUBCASE("bad options") {
    const std::string url = "http://127.0.0.1:1";
    CHECK(run_child(bench(url, {"--endpoint", "embeddings"})).code == 2);
    CHECK(run_child(bench(url, {"--concurrency", "0"})).code == 2);
    CHECK(run_child(bench(url, {"--duration", "soon", "--rate", "1"})).code == 2);
    const auto prompts = run_child(bench(url, {"--prompts", "/nonexistent/prompts.txt"}));
    CHECK(prompts.code == 2);
    CHECK(prompts.err ==
          "specctl: error: /nonexistent/prompts.txt: cannot read the prompt file: No such file or directory\n");
  }
}

TEST_CASE("cli: --save-vllm-json writes each level in vLLM's result format") {
  ScriptServer server([](int, const std::string&, const std::string&) {
    Behavior b;
    b.itl = 1ms;
    return b;
  });
  TempDir dir;
  const auto file = dir.path() / "vllm.json";
  SUBCASE("two levels: a file each, named by the level") {
    const auto result = run_child(bench(server.url(), {"--concurrency", "1,3", "--requests", "6", "--max-tokens", "8",
                                                       "--warmup", "0", "--save-vllm-json", file.string()}));
    CAPTURE(result.err);
    REQUIRE(result.code == 0);
    CHECK_FALSE(std::filesystem::exists(file));
    for (int level : {1, 3}) {
      CAPTURE(level);
      const auto doc = nlohmann::json::parse(read_file(dir.path() / ("vllm-c" + std::to_string(level) + ".json")));
      CHECK(doc["backend"] == "openai");
      CHECK(doc["model_id"] == "script-model");
      CHECK(doc["num_prompts"] == 6);
      CHECK(doc["completed"] == 6);
      CHECK(doc["failed"] == 0);
      CHECK(doc["max_concurrency"] == level);
      CHECK(doc["request_rate"] == "inf");
      CHECK(doc["total_output_tokens"] == 6 * 8);
      REQUIRE(doc["output_lens"].size() == 6);
      CHECK(doc["output_lens"][0] == 8);
      REQUIRE(doc["ttfts"].size() == 6);
      REQUIRE(doc["itls"].size() == 6);
      // 8 tokens in 8 chunks: 7 gaps each, in seconds.
      CHECK(doc["itls"][0].size() == 7);
      CHECK(doc["mean_ttft_ms"].get<double>() > 0);
      CHECK(doc["output_throughput"].get<double>() > 0);
    }
  }
  SUBCASE("one level: the file itself") {
    const auto result = run_child(bench(server.url(), {"--concurrency", "2", "--requests", "4", "--max-tokens", "4",
                                                       "--warmup", "0", "--save-vllm-json", file.string()}));
    REQUIRE(result.code == 0);
    const auto doc = nlohmann::json::parse(read_file(file));
    CHECK(doc["completed"] == 4);
    CHECK(doc["max_concurrency"] == 2);
  }
}
