#include <doctest/doctest.h>

#include <specctl/bench/chunk.hpp>

#include <specctl/bench/sse.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

using specctl::bench::ChunkFields;
using specctl::bench::scan_chunk;

TEST_CASE("chunk scanner: completions, chat, usage, errors") {
  ChunkFields f;
  SUBCASE("completions content chunk") {
    REQUIRE(scan_chunk(R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,)"
                       R"("text":" the","logprobs":null,"finish_reason":null}]})",
                       f));
    CHECK(f.id == "cmpl-1");
    CHECK(f.has_choices);
    CHECK(f.has_content);
    CHECK(f.finish_reason.empty());
    CHECK(f.completion_tokens == -1);
    CHECK_FALSE(f.has_error);
  }
  SUBCASE("chat role-only first chunk carries no content") {
    REQUIRE(scan_chunk(R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":)"
                       R"("assistant","content":""},"finish_reason":null}]})",
                       f));
    CHECK(f.has_choices);
    CHECK_FALSE(f.has_content);
  }
  SUBCASE("chat content with finish reason and usage on the same chunk") {
    REQUIRE(scan_chunk(R"({"choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"length"}],)"
                       R"("usage":{"prompt_tokens":12,"completion_tokens":512,"total_tokens":524}})",
                       f));
    CHECK(f.has_content);
    CHECK(f.finish_reason == "length");
    CHECK(f.completion_tokens == 512);
    CHECK(f.prompt_tokens == 12);
  }
  SUBCASE("reasoning content counts as output") {
    REQUIRE(scan_chunk(R"({"choices":[{"delta":{"content":null,"reasoning_content":"hm"}}]})", f));
    CHECK(f.has_content);
  }
  SUBCASE("usage chunk with empty choices") {
    REQUIRE(scan_chunk(R"({"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,)"
                       R"("total_tokens":10}})",
                       f));
    CHECK_FALSE(f.has_choices);
    CHECK_FALSE(f.has_content);
    CHECK(f.completion_tokens == 7);
  }
  SUBCASE("usage null on every chunk") {
    REQUIRE(scan_chunk(R"({"choices":[{"text":"a"}],"usage":null})", f));
    CHECK(f.completion_tokens == -1);
    CHECK(f.has_content);
  }
  SUBCASE("only the first choice counts; nested keys of the same name do not") {
    REQUIRE(scan_chunk(R"({"choices":[{"text":"","meta":{"text":"x","usage":{"completion_tokens":9}}},)"
                       R"({"text":"other"}],"x":{"usage":{"completion_tokens":5}}})",
                       f));
    CHECK(f.has_choices);
    CHECK_FALSE(f.has_content);
    CHECK(f.completion_tokens == -1);
  }
  SUBCASE("escapes inside strings") {
    REQUIRE(scan_chunk(R"({"choices":[{"text":"\"quoted\" \\ \u00e9 \n"}]})", f));
    CHECK(f.has_content);
  }
  SUBCASE("error object") {
    REQUIRE(scan_chunk(R"({"error":{"message":"out of memory","type":"server_error","code":500}})", f));
    CHECK(f.has_error);
    CHECK(f.error_message == "out of memory");
  }
  SUBCASE("error string") {
    REQUIRE(scan_chunk(R"({"error":"boom"})", f));
    CHECK(f.has_error);
    CHECK(f.error_message == "boom");
  }
  SUBCASE("error null is no error") {
    REQUIRE(scan_chunk(R"({"error":null,"choices":[{"text":"a"}]})", f));
    CHECK_FALSE(f.has_error);
  }
}

TEST_CASE("chunk scanner: refuses what is not one JSON object") {
  ChunkFields f;
  for (const char* bad : {"",
                          "{",
                          "}",
                          "[]",
                          "\"text\"",
                          "42",
                          "{\"a\":}",
                          "{\"a\":1,}",
                          "{\"a\" 1}",
                          "{\"choices\":[{\"text\":\"unterminated}]}",
                          "{\"a\":tru}",
                          "{\"a\":01}",
                          "{\"a\":1.}",
                          "{\"a\":\"\\x\"}",
                          "{\"a\":\"\\u12G4\"}",
                          "{\"a\":1} trailing",
                          "{\"a\":[1,2}",
                          "{'a':1}",
                          "{\"a\":\"tab\there\"}",
                          "{\"a\":-}",
                          "{\"a\":1e}",
                          "{\"a\":nul}"}) {
    CAPTURE(bad);
    CHECK_FALSE(scan_chunk(bad, f));
  }
  std::string deep(200, '[');
  CHECK_FALSE(scan_chunk("{\"a\":" + deep + std::string(200, ']') + "}", f));
}

TEST_CASE("chunk scanner agrees with nlohmann::json on mutated chunks") {
  // Random byte edits of real chunks: the scanner must accept exactly what a
  // full JSON parser accepts (as an object), so garbled events are never counted as tokens.
  const std::string seeds[] = {
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]})",
      R"({"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}})",
      R"({"choices":[{"index":0,"delta":{"content":"a\"b"},"finish_reason":"stop"}],"usage":null,"v":[1.5e3,-0,true,false]})"};
  const std::string alphabet = "{}[]\":,.-+eE0123456789 truefalsnul\\/ux\tA";
  std::mt19937 random(12345);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = seeds[round % 3];
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = random() % text.size();
      const char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
      case 0:
        text[at] = c;
        break;
      case 1:
        text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
        break;
      default:
        text.erase(at, 1);
        break;
      }
    }
    const auto parsed = nlohmann::json::parse(text, nullptr, false);
    const bool expected = !parsed.is_discarded() && parsed.is_object();
    ChunkFields f;
    const bool got = scan_chunk(text, f);
    if (got != expected) {
      CAPTURE(text);
      CHECK(got == expected);
    }
    accepted += got ? 1 : 0;
  }
  // The mutations must exercise both outcomes.
  CHECK(accepted > 100);
  CHECK(accepted < 19000);
}

namespace {

// The events of a recorded stream, its "# " header lines left out.
std::vector<std::string> recorded_events(const std::string& file) {
  // A path, not a string sum: g++ 12 at -O2 warns falsely (-Warray-bounds) on that sum here.
  std::ifstream in(std::filesystem::path(SPECCTL_TEST_SOURCE_DIR) / "tests/data/engine-logs/llamacpp-3f545bec" / file);
  REQUIRE(in);
  std::string bytes;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("# ")) {
      bytes += line + "\n";
    }
  }
  std::vector<std::string> events;
  specctl::bench::SseParser parser;
  REQUIRE(parser.feed(bytes, [&](std::string_view data) { events.emplace_back(data); }));
  return events;
}

} // namespace

TEST_CASE("chunk scanner: llama-server's real streams") {
  SUBCASE("completions: usage and timings ride on the last content event") {
    auto events = recorded_events("completion-stream.sse");
    REQUIRE(events.size() >= 3);
    CHECK(events.back() == "[DONE]");
    int content = 0;
    ChunkFields last;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
      ChunkFields f;
      REQUIRE(scan_chunk(events[i], f));
      content += f.has_content ? 1 : 0;
      if (i + 2 == events.size()) {
        last = f;
      }
    }
    // 48 tokens, one event each, then an event with empty text carrying the figures.
    CHECK(content == 48);
    CHECK(last.finish_reason == "length");
    CHECK(last.completion_tokens == 48);
    CHECK(last.prompt_tokens == 33);
    CHECK(last.cached_tokens == 0);
    CHECK(last.has_timings);
    CHECK(last.timings_predicted_n == 48);
    CHECK(last.timings_predicted_per_second == doctest::Approx(127.74238437955252));
    CHECK(last.timings_draft_n == 60);
    CHECK(last.timings_draft_accepted == 31);
  }
  SUBCASE("chat: a role-only first event, a finish-only event, then choices: [] with usage and timings") {
    auto events = recorded_events("chat-stream.sse");
    REQUIRE(events.size() == 12);
    ChunkFields first;
    REQUIRE(scan_chunk(events[0], first));
    CHECK(first.has_choices);
    CHECK_FALSE(first.has_content);
    int content = 0;
    for (std::size_t i = 1; i < 9; ++i) {
      ChunkFields f;
      REQUIRE(scan_chunk(events[i], f));
      content += f.has_content ? 1 : 0;
    }
    CHECK(content == 8);
    ChunkFields finish;
    REQUIRE(scan_chunk(events[9], finish));
    CHECK_FALSE(finish.has_content);
    CHECK(finish.finish_reason == "length");
    ChunkFields usage;
    REQUIRE(scan_chunk(events[10], usage));
    CHECK_FALSE(usage.has_choices);
    CHECK(usage.completion_tokens == 8);
    CHECK(usage.has_timings);
    CHECK(usage.timings_draft_n == 8);
    CHECK(usage.timings_draft_accepted == 4);
    CHECK(events[11] == "[DONE]");
  }
}
