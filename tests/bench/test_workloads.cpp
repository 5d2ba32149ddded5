// `specctl bench --dataset` against specsim: the exact requests a workload sends
// (ids, categories, target and served lengths, output lengths), as the per-request
// records of --requests-jsonl show them, and the same requests for the same seed.

#include <doctest/doctest.h>

#include "../support/child.hpp"
#include "../support/skip.hpp"

#include <specctl/bench/workload.hpp>

#include <nlohmann/json.hpp>

#include <sstream>

using namespace specctl;
using namespace specctl::bench;
using namespace specctl::test;

namespace {

bool specsim_built() {
  if (specctl::test::pretend_missing("specsim") || specsim_binary().empty()) {
    specctl::test::skip("no specsim (this build has no specsim target: src/main/specsim.cpp is missing)");
    return false;
  }
  return true;
}

struct BenchRun {
  ChildResult child;
  std::vector<nlohmann::json> records;
};

// One closed-loop level of `requests` requests at concurrency 1 (in workload order),
// no warmup, records kept.
BenchRun bench_dataset(const Specsim& sim, const TempDir& dir, const std::string& dataset, int requests,
                       std::vector<std::string> extra = {}) {
  const auto lines = dir.path() / "requests.jsonl";
  std::filesystem::remove(lines);
  std::vector<std::string> argv = {specctl_binary(), "bench",
                                   "--url",          sim.url(),
                                   "--dataset",      dataset,
                                   "--concurrency",  "1",
                                   "--requests",     std::to_string(requests),
                                   "--warmup",       "0",
                                   "--no-progress",  "--requests-jsonl",
                                   lines.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  BenchRun run{run_child(argv), {}};
  if (std::filesystem::exists(lines)) {
    std::istringstream in(read_file(lines));
    for (std::string line; std::getline(in, line);) {
      run.records.push_back(nlohmann::json::parse(line));
    }
  }
  return run;
}

nlohmann::json conversation(const std::string& id, const std::string& human, const std::string& gpt) {
  return {{"id", id}, {"conversations", {{{"from", "human"}, {"value", human}}, {{"from", "gpt"}, {"value", gpt}}}}};
}

std::string words(int count, const std::string& word) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    out += (i == 0 ? "" : " ") + word;
  }
  return out;
}

} // namespace

TEST_CASE("workloads: a ShareGPT file sends its drawn conversations with their own output lengths") {
  if (!specsim_built()) {
    return;
  }
  const TempDir dir("workload-sharegpt-e2e");
  nlohmann::json items = nlohmann::json::array();
  for (int i = 0; i < 6; ++i) {
    items.push_back(conversation("c" + std::to_string(i),
                                 "Question number " + std::to_string(i) + ": " + words(8 + i, "explain"),
                                 words(5 + 3 * i, "answer")));
  }
  items.push_back(conversation("short", "Hi", "Hello there, how are you today?")); // prompt too short
  items.push_back(conversation("long", words(1500, "word"), "fine answer here"));  // prompt too long
  items.push_back(nlohmann::json("not a conversation"));                           // malformed
  items.push_back({{"id", "one-turn"}, {"conversations", {{{"from", "human"}, {"value", "alone here"}}}}});
  const std::string file = dir.write("sg.json", items.dump(1));
  const ShareGptSpec spec{.file = file, .num_prompts = 4, .seed = 7};
  const auto expected = make_workload(spec);
  REQUIRE(expected.has_value());
  REQUIRE(expected->requests.size() == 4);

  Specsim sim({"--sim-speed", "50"});
  const std::string dataset = "{sharegpt: {file: " + file + ", num_prompts: 4, seed: 7}}";
  const auto run = bench_dataset(sim, dir, dataset, 4);
  CAPTURE(run.child.out);
  CAPTURE(run.child.err);
  REQUIRE(run.child.code == 0);
  // The malformed item (the ninth; items count from 0) is named on stderr, before anything is sent.
  CHECK(run.child.err.find(file + ": item 8 is not an object") != std::string::npos);
  REQUIRE(run.records.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    const auto& r = run.records[i];
    const auto& want = expected->requests[i];
    CHECK(r["prompt_id"] == want.id);
    CHECK(r["category"].is_null());
    CHECK(r["input_tokens"].is_null());
    CHECK(r["max_tokens"] == want.output_tokens);
    // ignore_eos: the server generates exactly what the dataset's answer length asks for.
    CHECK(r["output_tokens"] == want.output_tokens);
    CHECK(r["ok"] == true);
  }

  SUBCASE("the same seed sends the same requests, another seed others") {
    const auto again = bench_dataset(sim, dir, dataset, 4);
    REQUIRE(again.records.size() == 4);
    const auto other = bench_dataset(sim, dir, "{sharegpt: {file: " + file + ", num_prompts: 4, seed: 8}}", 4);
    REQUIRE(other.records.size() == 4);
    bool differs = false;
    for (std::size_t i = 0; i < 4; ++i) {
      CHECK(again.records[i]["prompt_id"] == run.records[i]["prompt_id"]);
      CHECK(again.records[i]["prompt_tokens"] == run.records[i]["prompt_tokens"]);
      differs = differs || other.records[i]["prompt_id"] != run.records[i]["prompt_id"];
    }
    CHECK(differs);
  }
  SUBCASE("more prompts than the file holds after filtering: one line, exit 2, nothing sent") {
    const auto too_many = bench_dataset(sim, dir, "{sharegpt: {file: " + file + ", num_prompts: 9}}", 4);
    CHECK(too_many.child.code == 2);
    CHECK(too_many.records.empty());
    CHECK(too_many.child.err.find("9") != std::string::npos);
  }
}

TEST_CASE("workloads: JSONL prompts and chats go out as written, with their ids, categories and lengths") {
  if (!specsim_built()) {
    return;
  }
  const TempDir dir("workload-jsonl-e2e");
  const std::string prompts =
      dir.write("p.jsonl", "{\"prompt\": \"What is two plus two?\", \"n\": 5, \"cat\": \"math\", "
                           "\"id\": \"m1\"}\n"
                           "{\"prompt\": \"Write a haiku about rain.\", \"n\": 9, \"cat\": "
                           "\"writing\", \"id\": \"w1\"}\n"
                           "{\"prompt\": \"Name a prime.\", \"cat\": \"math\", \"id\": \"m2\"}\n");
  Specsim sim({"--sim-speed", "50"});
  const auto run = bench_dataset(
      sim, dir, "{jsonl: {file: " + prompts + ", output_field: n, category_field: cat, id_field: id, shuffle: false}}",
      3, {"--max-tokens", "3"});
  CAPTURE(run.child.err);
  REQUIRE(run.child.code == 0);
  REQUIRE(run.records.size() == 3);
  const std::vector<std::tuple<std::string, std::string, int>> want = {
      {"m1", "math", 5}, {"w1", "writing", 9}, {"m2", "math", 3}};
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(run.records[i]["prompt_id"] == std::get<0>(want[i]));
    CHECK(run.records[i]["category"] == std::get<1>(want[i]));
    CHECK(run.records[i]["max_tokens"] == std::get<2>(want[i]));
    CHECK(run.records[i]["output_tokens"] == std::get<2>(want[i]));
  }

  const std::string chats =
      dir.write("c.jsonl", "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
                           "\"content\": \"Name a colour.\"}], \"id\": \"c1\"}\n");
  SUBCASE("chats need the chat endpoint: said before anything is sent") {
    const auto refused = bench_dataset(sim, dir, "{jsonl: {file: " + chats + ", id_field: id}}", 1);
    CHECK(refused.child.code == 2);
    CHECK(refused.records.empty());
    CHECK(refused.child.err.find("prompt c1 is a chat (messages): it needs the chat endpoint") != std::string::npos);
  }
  SUBCASE("on the chat endpoint the messages are sent") {
    const auto chat = bench_dataset(sim, dir, "{jsonl: {file: " + chats + ", id_field: id}}", 1,
                                    {"--endpoint", "chat", "--max-tokens", "4"});
    CAPTURE(chat.child.err);
    REQUIRE(chat.child.code == 0);
    REQUIRE(chat.records.size() == 1);
    CHECK(chat.records[0]["prompt_id"] == "c1");
    CHECK(chat.records[0]["output_tokens"] == 4);
    CHECK(chat.records[0]["prompt_tokens"].get<int>() > 0);
  }
}

TEST_CASE("workloads: random prompts land within one token of their drawn lengths, the same for the same seed") {
  if (!specsim_built()) {
    return;
  }
  const TempDir dir("workload-random-e2e");
  Specsim sim({"--sim-speed", "50"});
  const std::string dataset =
      "{random: {input_tokens: 60, output_tokens: 12, range_ratio: 0.5, num_prompts: 6, seed: 3}}";
  const auto run = bench_dataset(sim, dir, dataset, 6);
  CAPTURE(run.child.err);
  REQUIRE(run.child.code == 0);
  REQUIRE(run.records.size() == 6);
  const auto expected = make_workload(
      RandomSpec{.input_tokens = 60, .output_tokens = 12, .range_ratio = 0.5, .num_prompts = 6, .seed = 3});
  REQUIRE(expected.has_value());
  for (std::size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    const auto& r = run.records[i];
    CHECK(r["prompt_id"] == expected->requests[i].id);
    CHECK(r["input_tokens"] == expected->requests[i].input_tokens);
    CHECK(r["max_tokens"] == expected->requests[i].output_tokens);
    CHECK(r["output_tokens"] == expected->requests[i].output_tokens);
    // Fitted to the server's count before the level, and sent without a unique prefix:
    // what the server counts is the target (uncalibrated, specsim counted 16 to 41 away from 60).
    CHECK(std::abs(r["prompt_tokens"].get<int>() - expected->requests[i].input_tokens) <= 1);
  }
  CHECK(run.child.err.find("6 prompts fitted to their lengths by the server's count (/tokenize,") != std::string::npos);
  const auto again = bench_dataset(sim, dir, dataset, 6);
  REQUIRE(again.records.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(again.records[i]["prompt_tokens"] == run.records[i]["prompt_tokens"]);
  }
}

TEST_CASE("workloads: the built-in spec-decode set carries its categories") {
  if (!specsim_built()) {
    return;
  }
  const TempDir dir("workload-specdec-e2e");
  Specsim sim({"--sim-speed", "50"});
  const auto run =
      bench_dataset(sim, dir, "{specdec: {categories: [code, math], num_prompts: 4}}", 4, {"--max-tokens", "4"});
  CAPTURE(run.child.err);
  REQUIRE(run.child.code == 0);
  REQUIRE(run.records.size() == 4);
  // Requests alternate between the categories.
  CHECK(run.records[0]["category"] == "code");
  CHECK(run.records[1]["category"] == "math");
  CHECK(run.records[2]["category"] == "code");
  CHECK(run.records[3]["category"] == "math");

  SUBCASE("an unknown category is one line naming it") {
    const auto bad = bench_dataset(sim, dir, "{specdec: {categories: [cod]}}", 1);
    CHECK(bad.child.code == 2);
    CHECK(bad.child.err.find("unknown category \"cod\"") != std::string::npos);
  }
}

TEST_CASE("workloads: shared-prefix groups are served from the prefix cache after their first request") {
  if (!specsim_built()) {
    return;
  }
  const TempDir dir("workload-shared-e2e");
  // SGLang reports cached tokens with --enable-cache-report, and only when there are some.
  Specsim sim({"--sim-speed", "50", "--enable-cache-report"});
  const auto run = bench_dataset(sim, dir,
                                 "{shared_prefix: {groups: 2, per_group: 3, system_tokens: 300, question_tokens: 20, "
                                 "output_tokens: 4, order: grouped}}",
                                 6);
  CAPTURE(run.child.err);
  REQUIRE(run.child.code == 0);
  REQUIRE(run.records.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    const auto& r = run.records[i];
    CHECK(std::abs(r["prompt_tokens"].get<int>() - 320) <= 1);
    if (i % 3 == 0) {
      CHECK(r["cached_tokens"].is_null());
    } else {
      CHECK(r["cached_tokens"].get<int>() >= 290);
    }
  }
}
