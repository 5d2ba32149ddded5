#include <doctest/doctest.h>

#include <specctl/bench/prompts.hpp>
#include <specctl/bench/request.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

using namespace specctl::bench;

TEST_CASE("request bodies") {
  RequestOptions options;
  SUBCASE("completions") {
    const auto body = nlohmann::json::parse(build_body(options, "m", WorkloadRequest{.prompt = "Hello \"world\""}));
    CHECK(body == nlohmann::json::parse(R"({"model":"m","prompt":"Hello \"world\"","max_tokens":512,
      "temperature":0.0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}})"));
  }
  SUBCASE("chat with continuous usage and eos allowed") {
    options.endpoint = Endpoint::chat;
    options.max_tokens = 64;
    options.ignore_eos = false;
    options.continuous_usage = true;
    const auto body = nlohmann::json::parse(build_body(options, "m", WorkloadRequest{.prompt = "Hi"}));
    CHECK(body == nlohmann::json::parse(R"({"model":"m","messages":[{"role":"user","content":"Hi"}],
      "max_tokens":64,"temperature":0.0,"ignore_eos":false,"stream":true,
      "stream_options":{"include_usage":true,"continuous_usage_stats":true}})"));
  }
  SUBCASE("a request's own output length wins over the benchmark's") {
    const auto body =
        nlohmann::json::parse(build_body(options, "m", WorkloadRequest{.prompt = "Hi", .output_tokens = 7}));
    CHECK(body["max_tokens"] == 7);
  }
  SUBCASE("the unique text goes where the shared prefix ends") {
    const WorkloadRequest shared{.prompt = "SYSTEM PROMPT\n\nquestion", .shared_bytes = 15};
    CHECK(nlohmann::json::parse(build_body(options, "m", shared, "[u] "))["prompt"] == "SYSTEM PROMPT\n\n[u] question");
    const WorkloadRequest none{.prompt = "question"};
    CHECK(nlohmann::json::parse(build_body(options, "m", none, "[u] "))["prompt"] == "[u] question");
    CHECK(nlohmann::json::parse(build_body(options, "m", none))["prompt"] == "question");
  }
  SUBCASE("chat messages: sent as they are, the unique text before the last user turn") {
    options.endpoint = Endpoint::chat;
    const WorkloadRequest chat{
        .messages = {
            {"system", "be brief"}, {"user", "one"}, {"assistant", "two"}, {"user", "three"}, {"assistant", "four"}}};
    const auto body = nlohmann::json::parse(build_body(options, "m", chat, "[u] "));
    CHECK(body["messages"] == nlohmann::json::parse(R"([{"role":"system","content":"be brief"},
      {"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"[u] three"},
      {"role":"assistant","content":"four"}])"));
    CHECK_FALSE(body.contains("prompt"));
  }
  SUBCASE("what cannot be sent is said before anything is") {
    const std::vector<WorkloadRequest> chat{{.id = "q3", .messages = {{"user", "hi"}}}};
    CHECK(check_requests(options, chat) ==
          "prompt q3 is a chat (messages): it needs the chat endpoint (endpoint: chat, --endpoint chat)");
    options.endpoint = Endpoint::chat;
    CHECK(check_requests(options, chat).empty());
    CHECK(check_requests(options, {}) == "the benchmark has no prompts");
    CHECK(check_requests(options, {{.id = "e"}}) == "prompt e is empty");
  }
  CHECK(endpoint_path(Endpoint::completions) == "/v1/completions");
  CHECK(endpoint_path(Endpoint::chat) == "/v1/chat/completions");
}

TEST_CASE("built-in prompts") {
  REQUIRE(seed_prompts().size() == 3);
  CHECK(seed_prompts()[0].starts_with("Explain the theory of general relativity in detail"));
  CHECK(seed_prompts()[1].starts_with("Write a comprehensive guide to implementing a B-tree data structure in Rust"));
  CHECK(seed_prompts()[2].starts_with("Analyze the economic implications of artifi"));
  CHECK(long_prompts().size() >= 10);
  for (const auto& prompt : long_prompts()) {
    CHECK(prompt.size() > 150);
  }
}

TEST_CASE("synthetic prompts have the asked length and differ from the first word") {
  const auto prompts = synthetic_prompts(100, 8);
  REQUIRE(prompts.size() == 8);
  for (const auto& p : prompts) {
    CHECK(std::count(p.begin(), p.end(), ' ') == 99);
  }
  for (std::size_t i = 1; i < prompts.size(); ++i) {
    CHECK(prompts[i].substr(0, prompts[i].find(' ')) + prompts[i].substr(0, 40) !=
          prompts[0].substr(0, prompts[0].find(' ')) + prompts[0].substr(0, 40));
  }
  CHECK(synthetic_prompts(100, 8) == prompts);
}

TEST_CASE("prompt sources") {
  CHECK(parse_prompt_source("seeds")->kind == PromptKind::seeds);
  CHECK(parse_prompt_source("builtin")->kind == PromptKind::seeds);
  CHECK(parse_prompt_source("long")->kind == PromptKind::long_set);
  auto synthetic = parse_prompt_source("synthetic:256");
  REQUIRE(synthetic);
  CHECK(synthetic->kind == PromptKind::synthetic);
  CHECK(synthetic->input_tokens == 256);
  CHECK(synthetic->describe() == "synthetic 256 tokens x 16");
  CHECK_FALSE(parse_prompt_source("synthetic:0"));
  CHECK_FALSE(parse_prompt_source("synthetic:abc"));
  CHECK_FALSE(parse_prompt_source(""));

  const auto dir = std::filesystem::temp_directory_path() / ("specctl-prompts-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  struct Cleanup {
    std::filesystem::path path;
    ~Cleanup() { std::filesystem::remove_all(path); }
  } cleanup{dir};

  SUBCASE("text file: one prompt per non-empty line") {
    std::ofstream(dir / "p.txt") << "first prompt\n\n  second prompt  \r\n";
    auto loaded = load_prompts(*parse_prompt_source((dir / "p.txt").string()));
    REQUIRE(loaded);
    CHECK(*loaded == std::vector<std::string>{"first prompt", "second prompt"});
  }
  SUBCASE("jsonl file") {
    std::ofstream(dir / "p.jsonl") << "\"plain\"\n{\"prompt\":\"with\\nnewline\"}\n{\"text\":\"t\"}\n";
    auto loaded = load_prompts(*parse_prompt_source((dir / "p.jsonl").string()));
    REQUIRE(loaded);
    CHECK(*loaded == std::vector<std::string>{"plain", "with\nnewline", "t"});
  }
  SUBCASE("bad jsonl names file and line") {
    std::ofstream(dir / "bad.jsonl") << "\"ok\"\n{\"prompt\": 3}\n";
    auto loaded = load_prompts(*parse_prompt_source((dir / "bad.jsonl").string()));
    REQUIRE_FALSE(loaded);
    CHECK(std::string(loaded.error().what()) ==
          (dir / "bad.jsonl").string() + ":2: the object has no string \"prompt\" (or \"text\")");
  }
  SUBCASE("missing and empty files") {
    auto missing = load_prompts(*parse_prompt_source((dir / "nope.txt").string()));
    REQUIRE_FALSE(missing);
    CHECK(std::string(missing.error().what())
              .ends_with("nope.txt: cannot read the prompt file: No such file or directory"));
    std::ofstream(dir / "empty.txt") << "\n\n";
    auto empty = load_prompts(*parse_prompt_source((dir / "empty.txt").string()));
    REQUIRE_FALSE(empty);
    CHECK(std::string(empty.error().what()).ends_with("empty.txt: the prompt file holds no prompt"));
  }
}
