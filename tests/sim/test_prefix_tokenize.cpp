// POST /tokenize in each engine's shape, the prefix cache (cached_tokens where
// and when each engine reports them, a shorter prefill), and the per-category
// acceptance of specctl's built-in spec-decode prompts.

#include "../support/specsim.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <set>

using namespace specctl::test;
using nlohmann::json;

namespace {

json post_json(const Server& server, const std::string& path, const json& body, long status = 200) {
  const auto result = http_post(server.url(path), body.dump());
  REQUIRE(result.curl == CURLE_OK);
  CAPTURE(result.body);
  REQUIRE(result.status == status);
  return json::parse(result.body);
}

std::set<std::string> keys_in(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) {
    keys.insert(key);
  }
  return keys;
}

int completion_prompt_tokens(const Server& server, const std::string& prompt) {
  return post_json(server, "/v1/completions",
                   {{"model", "m"}, {"prompt", prompt}, {"max_tokens", 1}})["usage"]["prompt_tokens"]
      .get<int>();
}

const json k_messages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                                     {{"role", "user"}, {"content", "Name three prime numbers above 100."}}});

// A long shared prefix (about 6,000 tokens) and two different questions after it.
const std::string k_shared = [] {
  std::string text;
  for (int i = 0; text.size() < 24'000; ++i) {
    text += "Paragraph " + std::to_string(i) + " of the shared system prompt describes the house rules. ";
  }
  return text;
}();
const std::string k_first = k_shared + "Question one: what is the capital of France?";
const std::string k_second = k_shared + "Question two: how many legs does a spider have?";

json completion(const Server& server, const std::string& prompt) {
  return post_json(server, "/v1/completions", {{"model", "m"}, {"prompt", prompt}, {"max_tokens", 4}});
}

// The finished request whose response id is `id`, from /sim/truth.
json truth_of(const Server& server, const std::string& id) {
  const auto truth = json::parse(http_get(server.url("/sim/truth")).body);
  for (const auto& request : truth["requests"]) {
    if (request["id"] == id) {
      return request;
    }
  }
  FAIL("no request " << id << " in /sim/truth");
  return {};
}

double truth_ttft(const json& request) {
  return request["first_token_s"].get<double>() - request["arrival_s"].get<double>();
}

// Two requests sharing k_shared; returns their /sim/truth records.
std::pair<json, json> shared_pair(const Server& server, json& first, json& second) {
  first = completion(server, k_first);
  second = completion(server, k_second);
  return {truth_of(server, first["id"]), truth_of(server, second["id"])};
}

enum class Cached { yes, no };

// Two prompts sharing a prefix on a server that does not report its cache: the
// second's answer says nothing of it, and specsim's truth says whether it cached.
void check_unreported(Server& server, Cached cached) {
  REQUIRE(server.wait_ready());
  json first;
  json second;
  const auto [truth1, truth2] = shared_pair(server, first, second);
  CHECK_FALSE(second["usage"].contains("prompt_tokens_details"));
  if (cached == Cached::yes) {
    CHECK(truth2["cached_tokens"].get<int>() > 0);
  } else {
    CHECK(truth2["cached_tokens"] == 0);
  }
}

} // namespace

TEST_CASE("tokenize: vLLM's shape, count equal to usage.prompt_tokens for a prompt and for messages") {
  Server server({"--sim-engine", "vllm", "serve", "/models/Llama", "--host", "127.0.0.1", "--port", "{port}",
                 "--sim-gpu-dir", "{gpu_dir}", "--sim-load-time", "0.2s", "--sim-speed", "10"},
                Defaults::no);
  REQUIRE(server.wait_ready());
  const std::string text = "Explain the theory of general relativity in detail, with examples.";
  const auto reply = post_json(server, "/tokenize", {{"model", "/models/Llama"}, {"prompt", text}});
  CHECK(keys_in(reply) == std::set<std::string>{"count", "max_model_len", "tokens", "token_strs"});
  CHECK(reply["token_strs"].is_null());
  CHECK(reply["max_model_len"] == 262144);
  CHECK(reply["tokens"].size() == reply["count"].get<std::size_t>());
  CHECK(reply["count"] == completion_prompt_tokens(server, text));
  // The same text gives the same ids.
  CHECK(post_json(server, "/tokenize", {{"prompt", text}})["tokens"] == reply["tokens"]);
  const auto strs = post_json(server, "/tokenize", {{"prompt", text}, {"return_token_strs", true}});
  std::string joined;
  for (const auto& piece : strs["token_strs"]) {
    joined += piece.get<std::string>();
  }
  CHECK(joined == text);

  const auto chat = post_json(server, "/tokenize", {{"model", "/models/Llama"}, {"messages", k_messages}});
  const auto usage = post_json(server, "/v1/chat/completions", {{"messages", k_messages}, {"max_tokens", 1}})["usage"];
  CHECK(chat["count"] == usage["prompt_tokens"]);
  CHECK(chat["tokens"].size() == chat["count"].get<std::size_t>());
  CHECK(http_post(server.url("/tokenize"), R"({"model": "m"})").status == 400);
}

TEST_CASE("tokenize: llama.cpp's {content} -> {tokens}, with_pieces, count equal to usage.prompt_tokens") {
  Server server({"--sim-engine", "llamacpp", "-m", "/models/target", "--port", "{port}", "--sim-gpu-dir", "{gpu_dir}",
                 "--sim-load-time", "0.2s", "--sim-speed", "10"},
                Defaults::no);
  REQUIRE(server.wait_ready());
  const std::string text = "The quick brown fox jumps over the lazy dog.";
  const auto reply = post_json(server, "/tokenize", {{"content", text}});
  CHECK(keys_in(reply) == std::set<std::string>{"tokens"});
  REQUIRE(reply["tokens"].is_array());
  CHECK(reply["tokens"].front().is_number_integer());
  CHECK(static_cast<int>(reply["tokens"].size()) == completion_prompt_tokens(server, text));
  // specsim's tokenizer has no BOS: add_special changes nothing.
  CHECK(post_json(server, "/tokenize", {{"content", text}, {"add_special", true}})["tokens"] == reply["tokens"]);
  const auto pieces = post_json(server, "/tokenize", {{"content", text}, {"with_pieces", true}})["tokens"];
  REQUIRE(pieces.size() == reply["tokens"].size());
  std::string joined;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    CHECK(keys_in(pieces[i]) == std::set<std::string>{"id", "piece"});
    CHECK(pieces[i]["id"] == reply["tokens"][i]);
    joined += pieces[i]["piece"].get<std::string>();
  }
  CHECK(joined == text);
  CHECK(post_json(server, "/tokenize", json::object()) == json{{"tokens", json::array()}});
}

TEST_CASE("tokenize: SGLang's /tokenize and /v1/tokenize, exactly one of prompt and messages") {
  Server server({});
  REQUIRE(server.wait_ready());
  const std::string text = "Write a haiku about the sea.";
  for (const char* path : {"/tokenize", "/v1/tokenize"}) {
    CAPTURE(path);
    const auto reply = post_json(server, path, {{"model", "m"}, {"prompt", text}});
    CHECK(keys_in(reply) == std::set<std::string>{"tokens", "count", "max_model_len"});
    CHECK(reply["count"] == completion_prompt_tokens(server, text));
    CHECK(reply["tokens"].size() == reply["count"].get<std::size_t>());
  }
  const auto chat = post_json(server, "/tokenize", {{"messages", k_messages}});
  CHECK(chat["count"] == post_json(server, "/v1/chat/completions",
                                   {{"messages", k_messages}, {"max_tokens", 1}})["usage"]["prompt_tokens"]);
  const auto both = post_json(server, "/tokenize", {{"prompt", text}, {"messages", k_messages}}, 400);
  CHECK(both["message"] == "Exactly one of 'prompt' or 'messages' must be provided.");
  const auto list = post_json(server, "/tokenize", {{"prompt", {text, text + text}}});
  CHECK(list["count"].is_array());
  CHECK(list["tokens"].size() == 2);
}

TEST_CASE("prefix cache: SGLang reports cached_tokens only with --enable-cache-report, the hit prefills faster") {
  SUBCASE("reported") {
    Server server({"--enable-cache-report"});
    REQUIRE(server.wait_ready());
    json first;
    json second;
    const auto [truth1, truth2] = shared_pair(server, first, second);
    CHECK_FALSE(first["usage"].contains("prompt_tokens_details"));
    const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    const int shared = static_cast<int>(k_shared.size() / 4);
    CHECK(cached >= shared - 1);
    CHECK(cached < second["usage"]["prompt_tokens"].get<int>());
    CHECK(truth2["cached_tokens"] == cached);
    CHECK(truth_ttft(truth2) < truth_ttft(truth1) / 2);
    CHECK(server.log().find("#cached-token: " + std::to_string(cached)) != std::string::npos);
  }
  SUBCASE("cached but not reported by default") {
    Server server({});
    check_unreported(server, Cached::yes);
  }
  SUBCASE("--disable-radix-cache") {
    Server server({"--enable-cache-report", "--disable-radix-cache"});
    check_unreported(server, Cached::no);
  }
}

TEST_CASE("prefix cache: vLLM caches whole blocks by default, reports them with --enable-prompt-tokens-details") {
  const auto start = [](std::vector<std::string> extra) {
    std::vector<std::string> args{
        "--sim-engine", "vllm",          "serve",     "/models/Llama",   "--host", "127.0.0.1",   "--port",
        "{port}",       "--sim-gpu-dir", "{gpu_dir}", "--sim-load-time", "0.2s",   "--sim-speed", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  SUBCASE("reported") {
    Server server(start({"--enable-prompt-tokens-details"}), Defaults::no);
    REQUIRE(server.wait_ready());
    json first;
    json second;
    const auto [truth1, truth2] = shared_pair(server, first, second);
    CHECK_FALSE(first["usage"].contains("prompt_tokens_details"));
    const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    CHECK(cached % 16 == 0);
    CHECK(cached > static_cast<int>(k_shared.size() / 4) - 16);
    CHECK(truth_ttft(truth2) < truth_ttft(truth1) / 2);
  }
  SUBCASE("on by default, not reported") {
    Server server(start({}), Defaults::no);
    check_unreported(server, Cached::yes);
  }
  SUBCASE("--no-enable-prefix-caching") {
    Server server(start({"--no-enable-prefix-caching", "--enable-prompt-tokens-details"}), Defaults::no);
    check_unreported(server, Cached::no);
  }
}

TEST_CASE("prefix cache: llama.cpp reports cached_tokens and timings.cache_n always, --no-cache-prompt") {
  const auto start = [](const char* extra) {
    std::vector<std::string> args{
        "--sim-engine", "llamacpp",        "-m",   "/models/target", "--port", "{port}", "--sim-gpu-dir",
        "{gpu_dir}",    "--sim-load-time", "0.2s", "--sim-speed",    "10"};
    if (extra != nullptr) {
      args.emplace_back(extra);
    }
    return args;
  };
  SUBCASE("cache_prompt on by default") {
    Server server(start(nullptr), Defaults::no);
    REQUIRE(server.wait_ready());
    json first;
    json second;
    const auto [truth1, truth2] = shared_pair(server, first, second);
    CHECK(first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    CHECK(cached >= static_cast<int>(k_shared.size() / 4) - 1);
    CHECK(second["timings"]["cache_n"] == cached);
    CHECK(second["timings"]["prompt_n"] == second["usage"]["prompt_tokens"].get<int>() - cached);
    CHECK(truth_ttft(truth2) < truth_ttft(truth1) / 2);
    // The same prompt again: all but the last token (llama.cpp re-evaluates one).
    const auto again = completion(server, k_second);
    CHECK(again["timings"]["cache_n"] == again["usage"]["prompt_tokens"].get<int>() - 1);
  }
  SUBCASE("--no-cache-prompt") {
    Server server(start("--no-cache-prompt"), Defaults::no);
    REQUIRE(server.wait_ready());
    json first;
    json second;
    shared_pair(server, first, second);
    CHECK(second["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    CHECK(second["timings"]["cache_n"] == 0);
  }
}

TEST_CASE("speculation: a built-in code prompt is accepted longer than a conversation one, others unchanged") {
  Server server({"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
                 "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                 "3"});
  REQUIRE(server.wait_ready());
  const auto run = [&](const std::string& prompt) {
    const auto reply =
        post_json(server, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 600}, {"ignore_eos", true}});
    return truth_of(server, reply["id"]);
  };
  // As specctl sends them: a unique prefix, then the built-in text.
  const auto code = run("1a2b3c4d [t single-stream #1] Write a Python function that takes a list of integers and "
                        "returns the length of the longest strictly increasing contiguous run. Include a few test "
                        "cases.");
  const auto conversation = run("5e6f7a8b [t single-stream #2] What are some questions I should ask a landlord "
                                "before signing a lease on an apartment?");
  const auto other = run("Tell me about the history of the printing press in Europe.");
  CHECK(code["category"] == "code");
  CHECK(conversation["category"] == "conversation");
  CHECK(other["category"].is_null());
  CHECK(code["accept_length"].get<double>() > conversation["accept_length"].get<double>() + 0.1);
  const double model_mean =
      json::parse(http_get(server.url("/sim/truth")).body)["model_mean_accept_length"].get<double>();
  // The golden-ratio draws keep a request's mean within a few hundredths of the model's.
  CHECK(other["accept_length"].get<double>() == doctest::Approx(model_mean).epsilon(0.03));
  CHECK(conversation["accept_length"].get<double>() == doctest::Approx(model_mean).epsilon(0.03));
}
