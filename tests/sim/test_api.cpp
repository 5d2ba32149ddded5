// The OpenAI-compatible API as a streaming client (libcurl) sees it.

#include "../support/specsim.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <set>

using namespace specctl::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) {
    keys.insert(key);
  }
  return keys;
}

const std::set<std::string> k_chunk_keys{"id", "object", "created", "model", "choices"};

// Checks the frame every event shares and returns the parsed chunks before [DONE].
std::vector<json> parse_stream(const StreamResult& stream, const std::string& object) {
  REQUIRE(stream.curl == CURLE_OK);
  REQUIRE(stream.status == 200);
  CHECK(stream.content_type == "text/event-stream; charset=utf-8");
  CHECK(stream.raw.starts_with("data: {"));
  CHECK(stream.raw.ends_with("data: [DONE]\n\n"));
  REQUIRE(stream.done);
  std::vector<json> chunks;
  for (std::size_t i = 0; i + 1 < stream.events.size(); ++i) {
    CAPTURE(stream.events[i].data);
    REQUIRE(json::accept(stream.events[i].data));
    chunks.push_back(json::parse(stream.events[i].data));
    const auto& chunk = chunks.back();
    CHECK(chunk["object"] == object);
    CHECK(chunk["id"] == chunks.front()["id"]);
    CHECK(chunk["model"] == "kimi");
    CHECK(chunk["created"].is_number_integer());
    const auto keys = keys_of(chunk);
    CHECK((keys == k_chunk_keys ||
           keys == std::set<std::string>{"id", "object", "created", "model", "choices", "usage"}));
  }
  return chunks;
}

std::string chat_body(int max_tokens, Stream stream, Usage usage) {
  return json{{"model", "kimi"},
              {"messages",
               {{{"role", "system"}, {"content", "You are helpful."}},
                {{"role", "user"}, {"content", "Write a guide to B-trees in Rust."}}}},
              {"max_tokens", max_tokens},
              {"ignore_eos", true},
              {"stream", stream == Stream::yes},
              {"stream_options", {{"include_usage", usage == Usage::yes}}}}
      .dump();
}

} // namespace

TEST_CASE("completions stream: one token per event, usage chunk, [DONE]") {
  Server server({});
  REQUIRE(server.wait_ready());
  const auto chunks =
      parse_stream(stream_post(server.url("/v1/completions"), completion_body(20, Stream::yes)), "text_completion");
  REQUIRE(chunks.size() == 21);
  for (std::size_t i = 0; i < 20; ++i) {
    CAPTURE(i);
    const auto& choice = chunks[i]["choices"].at(0);
    CHECK(keys_of(choice) == std::set<std::string>{"index", "text", "logprobs", "finish_reason"});
    CHECK(choice["index"] == 0);
    CHECK(choice["logprobs"].is_null());
    CHECK(count_tokens(choice["text"]) == 1);
    CHECK(choice["finish_reason"] == (i == 19 ? json("length") : json(nullptr)));
  }
  const auto& usage_chunk = chunks.back();
  CHECK(usage_chunk["choices"] == json::array());
  CHECK(usage_chunk["usage"]["completion_tokens"] == 20);
  CHECK(usage_chunk["usage"]["prompt_tokens"].get<int>() > 0);
  CHECK(usage_chunk["usage"]["total_tokens"] ==
        usage_chunk["usage"]["prompt_tokens"].get<int>() + usage_chunk["usage"]["completion_tokens"].get<int>());

  {
    // Without include_usage there is no usage chunk.
    const auto plain = parse_stream(
        stream_post(server.url("/v1/completions"), completion_body(5, Stream::yes, Usage::no)), "text_completion");
    CHECK(plain.size() == 5);
    CHECK(plain.back()["choices"][0]["finish_reason"] == "length");
  }
}

TEST_CASE("chat stream: the role chunk first, then content deltas, usage and [DONE]") {
  Server server({});
  REQUIRE(server.wait_ready());
  const auto chunks = parse_stream(
      stream_post(server.url("/v1/chat/completions"), chat_body(12, Stream::yes, Usage::yes)), "chat.completion.chunk");
  REQUIRE(chunks.size() == 1 + 12 + 1);
  CHECK(chunks.front()["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  int tokens = 0;
  for (std::size_t i = 1; i <= 12; ++i) {
    const auto& choice = chunks[i]["choices"].at(0);
    CHECK(keys_of(choice) == std::set<std::string>{"index", "delta", "logprobs", "finish_reason"});
    CHECK(keys_of(choice["delta"]) == std::set<std::string>{"content"});
    tokens += count_tokens(choice["delta"]["content"]);
  }
  CHECK(tokens == 12);
  CHECK(chunks[12]["choices"][0]["finish_reason"] == "length");
  CHECK(chunks.back()["choices"] == json::array());
  CHECK(chunks.back()["usage"]["completion_tokens"] == 12);
}

TEST_CASE("non-streaming answers carry the whole text and the usage") {
  Server server({});
  REQUIRE(server.wait_ready());
  {
    const auto result = http_post(server.url("/v1/completions"), completion_body(9, Stream::no, Usage::no));
    REQUIRE(result.status == 200);
    const auto body = json::parse(result.body);
    CHECK(keys_of(body) == std::set<std::string>{"id", "object", "created", "model", "choices", "usage"});
    CHECK(body["object"] == "text_completion");
    CHECK(count_tokens(body["choices"][0]["text"]) == 9);
    CHECK(body["choices"][0]["finish_reason"] == "length");
    CHECK(body["usage"]["completion_tokens"] == 9);
  }
  {
    const auto result = http_post(server.url("/v1/chat/completions"), chat_body(7, Stream::no, Usage::no));
    REQUIRE(result.status == 200);
    const auto body = json::parse(result.body);
    CHECK(body["object"] == "chat.completion");
    CHECK(body["choices"][0]["message"]["role"] == "assistant");
    CHECK(count_tokens(body["choices"][0]["message"]["content"]) == 7);
    CHECK(body["usage"]["completion_tokens"] == 7);
  }
}

TEST_CASE("ignore_eos decides whether the simulated model may stop early") {
  Server server({"--sim-speed", "100"});
  REQUIRE(server.wait_ready());
  const std::string prompt = R"({"prompt":"Analyze the economics of AI.","max_tokens":2000,"stream":false)";
  const auto natural = json::parse(http_post(server.url("/v1/completions"), prompt + "}").body);
  CHECK(natural["choices"][0]["finish_reason"] == "stop");
  CHECK(natural["usage"]["completion_tokens"].get<int>() < 2000);
  const auto fixed = json::parse(http_post(server.url("/v1/completions"), prompt + R"(,"ignore_eos":true})").body);
  CHECK(fixed["choices"][0]["finish_reason"] == "length");
  CHECK(fixed["usage"]["completion_tokens"] == 2000);
}

TEST_CASE("EAGLE-3 sends one chunk per verify step with all its accepted tokens") {
  Server server({"--tp-size", "8", "--enable-flashinfer-allreduce-fusion", "--speculative-algorithm", "EAGLE3",
                 "--speculative-draft-model-path", "/models/eagle3", "--speculative-num-steps", "2",
                 "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3", "--sim-speed", "50",
                 "--decode-log-interval", "10"});
  REQUIRE(server.wait_ready());
  const auto chunks =
      parse_stream(stream_post(server.url("/v1/completions"), completion_body(300, Stream::yes)), "text_completion");
  int tokens = 0;
  int verify_chunks = 0;
  std::set<int> sizes;
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    const int n = count_tokens(chunks[i]["choices"][0]["text"]);
    CHECK(n >= 1);
    CHECK(n <= 3);
    tokens += n;
    if (i > 0) {
      sizes.insert(n);
      ++verify_chunks;
    }
  }
  CHECK(tokens == 300);
  CHECK(chunks.back()["usage"]["completion_tokens"] == 300);
  // Accept lengths vary step to step around a mean of about 2.
  CHECK(sizes.size() >= 2);
  const double mean = 299.0 / verify_chunks;
  CHECK(mean > 1.85);
  CHECK(mean < 2.1);
  CHECK(server.wait_log("accept len: "));
}

TEST_CASE("health, model and metrics endpoints, and errors in SGLang's shapes") {
  Server server({"--enable-metrics"});
  REQUIRE(server.wait_ready());
  CHECK(http_get(server.url("/health")).status == 200);
  CHECK(http_get(server.url("/health_generate")).status == 200);
  const auto models = json::parse(http_get(server.url("/v1/models")).body);
  CHECK(models["object"] == "list");
  CHECK(models["data"][0]["id"] == "/models/Kimi-K2.5-INT4");
  const auto info = json::parse(http_get(server.url("/get_model_info")).body);
  CHECK(info["model_path"] == "/models/Kimi-K2.5-INT4");
  CHECK(info["is_generation"] == true);

  const auto metric = [&](const std::string& name) {
    const auto text = http_get(server.url("/metrics")).body;
    const std::string key = name + "{model_name=\"/models/Kimi-K2.5-INT4\"} ";
    const auto at = text.find(key);
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + key.size()));
  };
  const double before = metric("sglang:generation_tokens_total");
  REQUIRE(http_post(server.url("/v1/completions"), completion_body(17, Stream::no, Usage::no)).status == 200);
  CHECK(metric("sglang:generation_tokens_total") == before + 17);
  CHECK(metric("sglang:num_running_reqs") == 0);
  CHECK(http_get(server.url("/metrics")).body.find("# TYPE sglang:time_to_first_token_seconds histogram") !=
        std::string::npos);

  const auto missing = http_get(server.url("/nope"));
  CHECK(missing.status == 404);
  CHECK(missing.body == R"({"detail":"Not Found"})");
  CHECK(http_get(server.url("/v1/completions")).status == 405);
  const auto bad = http_post(server.url("/v1/completions"), "{not json");
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["object"] == "error");
  const auto too_long = http_post(server.url("/v1/completions"), completion_body(300000, Stream::no));
  CHECK(too_long.status == 400);
}

TEST_CASE("metrics are off without --enable-metrics") {
  Server server({});
  REQUIRE(server.wait_ready());
  CHECK(http_get(server.url("/metrics")).status == 404);
}

TEST_CASE("keep-alive: one connection serves request after request") {
  Server server({});
  REQUIRE(server.wait_ready());
  HttpClient client;
  CHECK(client.get(server.url("/health")).new_connections == 1);
  const auto second = client.post(server.url("/v1/completions"), completion_body(3, Stream::no, Usage::no));
  CHECK(second.status == 200);
  CHECK(second.new_connections == 0);
  CHECK(client.get(server.url("/v1/models")).new_connections == 0);
}

TEST_CASE("a thousand concurrent streams on one event-loop thread") {
  raise_descriptor_limit();
  Server server({"--sim-speed", "100"});
  REQUIRE(server.wait_ready());
  constexpr int k_streams = 1000;
  const std::vector<std::string> bodies(k_streams, completion_body(16, Stream::yes));
  const auto results = stream_post_many(server.url("/v1/completions"), bodies);
  int complete = 0;
  for (const auto& result : results) {
    if (result.curl == CURLE_OK && result.done && result.events.size() == 16 + 2) {
      ++complete;
    }
  }
  CHECK(complete == k_streams);
  CHECK(thread_count(server.process().pid()) == 1);
}
