// A workload through `specctl run`: the benchmark's requests are the workload's, fitted
// to the server's count, and the result keeps what a colleague needs to send them again.

#include "sweep.hpp"

#include <set>
#include <sstream>

using namespace run_test;

TEST_CASE("a random workload in a run: calibrated lengths, provenance and per-request ids in the result") {
  Sweep sweep;
  sweep.write("  - name: baseline\n    knobs: {cache_report: true}\n  - name: again",
              R"(  - {name: par, kind: concurrency, levels: [2], repeats: 2, requests: 6,
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
  CHECK(workload["calibration"]["counts"].get<int>() > 0);
  CHECK(workload["calibration"]["cached"] == 0);
  // The second variant of the model fits the same prompts from the counts the first kept.
  const auto again = read_json(sweep.out() / "variants/again/result.json")["benchmarks"]["par"]["workload"];
  CHECK(again["calibration"]["prompts"] == 6);
  CHECK(again["calibration"]["counts"] == 0);
  CHECK(again["calibration"]["cached"].get<int>() > 0);
  std::vector<std::filesystem::path> kept;
  for (const auto& file : std::filesystem::directory_iterator(sweep.out() / "calibration")) {
    kept.push_back(file.path());
  }
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].filename().string().starts_with("models-Kimi-K2.5-INT4-"));
  const auto counts = read_json(kept[0]);
  CHECK(counts["completions"]["method"] == "/tokenize");
  // The first draw's counts, and those of the second repeat's own draw.
  CHECK(counts["completions"]["counts"].size() > workload["calibration"]["counts"].get<std::size_t>());

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
  CHECK(count == 12);
  // Verbatim prompts of exact lengths: the second repeat draws its own (seed + 1), so
  // it finds none of the first's in the server's prefix cache.
  const auto& levels = result["benchmarks"]["par"]["levels"];
  REQUIRE(levels.size() == 2);
  CHECK(levels[0]["seed_offset"] == 0);
  CHECK(levels[1]["seed_offset"] == 1);
  // SGLang reports cached tokens only when there are some (specsim does as it does).
  const auto& cached = levels[1]["metrics"]["cached_tokens"];
  CHECK((cached.is_null() || cached.get<double>() < 0.05 * levels[1]["metrics"]["prompt_tokens"].get<double>()));
  for (const auto& flag : result["flags"]) {
    CHECK(flag.get<std::string>().find("prefix cache") == std::string::npos);
  }
  CHECK(stray_servers(sweep.state()) == "");
}

TEST_CASE("spec-decode categories in a run: accept length per category from a window each, lengths and vLLM files") {
  Sweep sweep;
  sweep.write(R"(  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 3, spec_topk: 1, spec_draft_tokens: 4})",
              R"(  - {name: single, kind: single_stream, runs: 8, max_tokens: 48,
     prompts: {specdec: {categories: [code, summarisation], num_prompts: 8}}}
  - {name: par, kind: concurrency, levels: [2], repeats: 1, requests: 4, max_tokens: 16,
     prompts: {specdec: {categories: [code, summarisation], num_prompts: 4}}})",
              "1s", 200);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  const auto result = read_json(sweep.out() / "variants/eagle3/result.json");
  const auto& single = result["benchmarks"]["single"];
  CHECK(single["category_order"] == nlohmann::json::array({"code", "summarisation"}));
  for (const char* category : {"code", "summarisation"}) {
    CAPTURE(category);
    const auto& figures = single["by_category"][category];
    CHECK(figures["completed"] == 4);
    CHECK(figures["failed"] == 0);
    CHECK(figures["tok_s"].get<double>() > 0);
    CHECK(figures["accept_length"].get<double>() > 1.0);
    CHECK(figures["accept_length_source"]["kind"] == "log");
  }
  // specsim accepts more on code than on summarisation (docs/specsim.md): the two
  // windows tell them apart, and the benchmark's own figure lies between.
  const double code_accept = single["by_category"]["code"]["accept_length"].get<double>();
  const double summary_accept = single["by_category"]["summarisation"]["accept_length"].get<double>();
  CHECK(code_accept > summary_accept);
  const double overall = single["metrics"]["accept_length"].get<double>();
  CHECK(overall >= summary_accept - 1e-9);
  CHECK(overall <= code_accept + 1e-9);
  // Eight runs, numbered in the order they ran, prompts named by their place in the workload.
  REQUIRE(single["result"]["runs"].size() == 8);
  CHECK(single["result"]["runs"][7]["run"] == 8);

  // Concurrent requests share the server's windows: per category only what the records say.
  const auto& level = result["benchmarks"]["par"]["levels"][0];
  CHECK(level["by_category"]["code"]["completed"] == 2);
  CHECK(level["by_category"]["code"]["accept_length"].is_null());
  CHECK(level["by_category"]["code"]["tok_s"].get<double>() > 0);

  const auto& lengths = single["lengths"];
  int counted = 0;
  for (const auto& n : lengths["output_tokens"]["counts"]) {
    counted += n.get<int>();
  }
  CHECK(counted == 8);
  CHECK(lengths["input_tokens"]["width"].get<int>() >= 1);

  // The run's report shows them: a table per benchmark and level, the histograms in the page.
  const std::string md = st::read_file(sweep.out() / "report.md");
  CHECK(md.find("### single (single stream)") != std::string::npos);
  const auto code_row = md.find("| code ", md.find("### single (single stream)"));
  REQUIRE(code_row != std::string::npos);
  const std::string row = md.substr(code_row, md.find('\n', code_row) - code_row);
  CHECK(row.find(fmt::format("{:.2f} · ", code_accept)) != std::string::npos);
  const std::string html = st::read_file(sweep.out() / "report.html");
  CHECK(html.find("data-plot=\"output-lengths\"") != std::string::npos);

  const auto vllm_single = read_json(sweep.out() / "variants/eagle3/vllm-single-single.json");
  CHECK(vllm_single["completed"] == 8);
  CHECK(vllm_single["output_lens"].size() == 8);
  const auto vllm_par = read_json(sweep.out() / "variants/eagle3/vllm-par-c2.json");
  CHECK(vllm_par["completed"] == 4);
  CHECK(vllm_par["max_concurrency"] == 2);
  CHECK(stray_servers(sweep.state()) == "");
}

TEST_CASE("shared-prefix groups in a run: a group's first request finds nothing cached, not even from the warmup") {
  Sweep sweep;
  sweep.write("  - name: baseline\n    knobs: {cache_report: true}",
              R"(  - {name: groups, kind: concurrency, levels: [1], repeats: 1, requests: 6, max_tokens: 8,
     prompts: {shared_prefix: {groups: 2, per_group: 3, system_tokens: 120, question_tokens: 10, output_tokens: 4}}})",
              "1s", 50);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  std::istringstream lines(st::read_file(sweep.out() / "variants/baseline/requests-groups.jsonl"));
  std::set<std::string> seen;
  int firsts = 0;
  int laters = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto r = nlohmann::json::parse(line);
    CAPTURE(line);
    const std::string id = r["prompt_id"].get<std::string>();
    const std::string group = id.substr(0, id.rfind(':'));
    const int cached = r["cached_tokens"].is_null() ? 0 : r["cached_tokens"].get<int>();
    if (seen.insert(group).second) {
      // The warmup sent a prompt of the workload with nothing shared: it left no group's prefix behind.
      CHECK(cached < r["prompt_tokens"].get<int>() / 10);
      ++firsts;
    } else {
      CHECK(cached > r["prompt_tokens"].get<int>() / 2);
      ++laters;
    }
  }
  CHECK(firsts == 2);
  CHECK(laters == 4);
  // Hits on a prefix the workload shares on purpose are what it measures: no flag.
  const auto result = read_json(sweep.out() / "variants/baseline/result.json");
  for (const auto& flag : result["flags"]) {
    CHECK(flag.get<std::string>().find("prefix cache") == std::string::npos);
  }
}
