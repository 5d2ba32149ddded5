// A workload through `specctl run`: the benchmark's requests are the workload's, fitted
// to the server's count, and the result keeps what a colleague needs to send them again.

#include "sweep.hpp"

#include <sstream>

using namespace run_test;

TEST_CASE("a random workload in a run: calibrated lengths, provenance and per-request ids in the result") {
  Sweep sweep;
  sweep.write("  - name: baseline",
              R"(  - {name: par, kind: concurrency, levels: [2], repeats: 1, requests: 6,
     prompts: {random: {input_tokens: 80, output_tokens: 6, range_ratio: 0.25, num_prompts: 6, seed: 9}}})",
              "1s", 20);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  const auto result = read_json(sweep.out() / "variants/baseline/result.json");
  const auto& workload = result["benchmarks"]["par"]["workload"];
  CHECK(workload["source"] == "random");
  CHECK(workload["seed"] == 9);
  REQUIRE(workload["ids"].size() == 6);
  CHECK(workload["ids"][0] == "random:0");
  CHECK(workload["calibration"]["method"] == "/tokenize");
  CHECK(workload["calibration"]["prompts"] == 6);

  std::istringstream lines(st::read_file(sweep.out() / "variants/baseline/requests-par.jsonl"));
  int count = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto r = nlohmann::json::parse(line);
    CAPTURE(line);
    CHECK(r["prompt_id"].get<std::string>().starts_with("random:"));
    CHECK(r["max_tokens"] == r["output_tokens"]);
    CHECK(std::abs(r["prompt_tokens"].get<int>() - r["input_tokens"].get<int>()) <= 1);
    ++count;
  }
  CHECK(count == 6);
  CHECK(stray_servers(sweep.state()) == "");
}
