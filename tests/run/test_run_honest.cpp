// Honest numbers end to end: a sweep whose requests fail refuses its verdicts
// and exits 1; a sweep with repeats and the A/A repeat shows intervals per
// level and the noise.

#include "sweep.hpp"

using namespace run_test;

TEST_CASE("garbled streams: the report shows the error rate, refuses the verdicts and the run exits 1") {
  Sweep sweep;
  // 1 in 100 content events is cut in half (specsim picks them exactly): with 32
  // tokens a request, about a third of the requests fail as malformed; the others complete.
  sweep.write(R"(  - name: baseline
  - name: garbled
    knobs: {sim_fault: ["garbled:0.01"]})",
              R"(  - {name: single, kind: single_stream, runs: 6, max_tokens: 32}
  - {name: parallel, kind: concurrency, levels: [2], repeats: 2, max_tokens: 32, requests: 10})",
              "1s", 20);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 1);
  auto result = read_json(sweep.out() / "variants/garbled/result.json");
  // The run measured everything, then failed the variant by the failure share.
  CHECK(result["status"] == "failed");
  CHECK(result["reason"].get<std::string>().find("requests failed (") != std::string::npos);
  CHECK(result["reason"].get<std::string>().find("more than 5%): not measured") != std::string::npos);
  int failed = result["benchmarks"]["single"]["metrics"]["failed"].get<int>();
  CHECK(failed > 0);
  CHECK(failed < 6);

  auto report = read_json(sweep.out() / "report.json");
  CHECK(report["passed"] == false);
  const auto& single = report["single_stream"][0]["rows"][1];
  CHECK(single["variant"] == "garbled");
  CHECK(single["verdict"] == "not measured");
  CHECK(single["speedup"].is_null());
  CHECK(single["requests"]["failed"] == failed);
  CHECK(single["why"].get<std::string>().find(fmt::format("{} of 6 requests failed", failed)) == 0);
  const auto& level = report["levels"][0]["rows"][1]["levels"][0];
  CHECK(level["verdict"] == "not measured");
  CHECK(level["requests"]["failed"].get<int>() > 0);
  auto md = st::read_file(sweep.out() / "report.md");
  CHECK(md.find(fmt::format(" {}/6 |", failed)) != std::string::npos);
  CHECK(md.find("not measured: ") != std::string::npos);
  CHECK(md.find("**FAILED: 1/2 variants ok") != std::string::npos);
  // The terminal says what report.md says: the variant failed, and by how many requests.
  CHECK(sweep.output().find(fmt::format("- garbled: bench single: {} of 6 requests failed", failed)) !=
        std::string::npos);
  CHECK(sweep.output().find("FAILED: 1/2 variants ok") != std::string::npos);
  CHECK(stray_servers(sweep.state()) == "");
}

TEST_CASE("repeats and the A/A repeat: intervals per level, the noise table, the baseline run last") {
  Sweep sweep;
  sweep.write(R"(  - name: baseline
  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 2, spec_topk: 1, spec_draft_tokens: 3})",
              // 24 requests a level: a window long enough for the GPU sampler's readings even
              // under AddressSanitizer (at 8, a c4 window of ~0.1 s had none and no tok/J).
              R"(  - {name: parallel, kind: concurrency, levels: [1, 4], max_tokens: 32, requests: 24})", "1s", 20,
              R"(report:
  noise: true)");
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 0);
  auto run = read_json(sweep.out() / "run.json");
  CHECK(run["variants"] == json::array({"baseline", "eagle3", "baseline-again"}));
  // Three repeats a level by default, interleaved: c1 c4 c1 c4 c1 c4.
  auto levels = read_json(sweep.out() / "variants/eagle3/result.json")["benchmarks"]["parallel"]["levels"];
  REQUIRE(levels.size() == 6);
  for (std::size_t i = 0; i < levels.size(); ++i) {
    CHECK(levels[i]["concurrency"] == (i % 2 == 0 ? 1 : 4));
    CHECK(levels[i]["repeat"] == static_cast<int>(i / 2) + 1);
  }
  // The baseline ran first and its repeat last.
  std::vector<std::string> order;
  for (const auto& e : journal(sweep.out())) {
    if (e.value("event", "") == "variant_finished") {
      order.push_back(e.value("variant", ""));
    }
  }
  CHECK(order == std::vector<std::string>{"baseline", "eagle3", "baseline-again"});

  auto report = read_json(sweep.out() / "report.json");
  CHECK(report["repeat"] == "baseline-again");
  const auto& cell = report["levels"][0]["rows"][1]["levels"][0];
  CHECK(cell["output_tok_s"]["n"] == 3);
  CHECK(cell["speedup"]["ci95_low"].is_number());
  CHECK(report["levels"][0]["rows"][2]["levels"][0]["verdict"] == "A/A");
  // Per level (c1, c4): output tok/s, TTFT and TPOT p50/p99, and tok/J (GPU telemetry).
  CHECK(report["noise"].size() == 12);
  CHECK(std::ranges::count_if(report["noise"], [](const json& n) { return n.value("metric", "") == "tok_per_j"; }) ==
        2);
  auto md = st::read_file(sweep.out() / "report.md");
  CHECK(md.find("## Noise (A/A)") != std::string::npos);
  CHECK(md.find("each level measured 3 times, interleaved") != std::string::npos);
  CHECK(md.find("× [") != std::string::npos);
  CHECK(md.find("## Glossary") != std::string::npos);
  CHECK(stray_servers(sweep.state()) == "");
}
