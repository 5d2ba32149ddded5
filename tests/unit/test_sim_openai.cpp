#include <specctl/sim/openai.hpp>

#include <doctest/doctest.h>

using namespace specctl::sim;

namespace {

constexpr int k_context = 262144;

GenerationRequest parse_ok(Endpoint endpoint, std::string_view body) {
  auto request = parse_generation_request(endpoint, body, "/models/served", k_context);
  REQUIRE(request.has_value());
  return *request;
}

std::string parse_error(Endpoint endpoint, std::string_view body) {
  auto request = parse_generation_request(endpoint, body, "/models/served", k_context);
  REQUIRE_FALSE(request.has_value());
  return request.error();
}

} // namespace

TEST_CASE("sim openai: completion events in REFERENCE.md's shapes") {
  const ChunkFormatter format(Endpoint::completions, "abc", 1700000000, "kimi", 0);
  std::string out;
  format.append_tokens(out, 0, 1, std::nullopt);
  CHECK(out == "data: {\"id\":\"abc\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"kimi\","
               "\"choices\":[{\"index\":0,\"text\":\" the\",\"logprobs\":null,\"finish_reason\":null}]}\n\n");
  out.clear();
  format.append_tokens(out, 1, 2, FinishReason::length);
  CHECK(out == "data: {\"id\":\"abc\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"kimi\","
               "\"choices\":[{\"index\":0,\"text\":\" price each\",\"logprobs\":null,\"finish_reason\":\"length\"}]}"
               "\n\n");
  out.clear();
  format.append_usage(out, 30, 512);
  CHECK(out == "data: {\"id\":\"abc\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"kimi\","
               "\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":512,\"total_tokens\":542}}\n\n");
  out.clear();
  ChunkFormatter::append_done(out);
  CHECK(out == "data: [DONE]\n\n");
  CHECK(format.full_response(3, 2, FinishReason::stop) ==
        "{\"id\":\"abc\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"kimi\",\"choices\":[{"
        "\"index\":0,\"text\":\" the price\",\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{"
        "\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}");
}

TEST_CASE("sim openai: chat events, the role chunk first") {
  const ChunkFormatter format(Endpoint::chat, "x", 1, "m\"q", 0);
  std::string out;
  format.append_role(out);
  CHECK(out == "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\\\"q\","
               "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
               "\"finish_reason\":null}]}\n\n");
  out.clear();
  format.append_tokens(out, 0, 1, std::nullopt);
  CHECK(out == "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\\\"q\","
               "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" the\"},\"logprobs\":null,\"finish_reason\":null}]}"
               "\n\n");
  CHECK(format.full_response(1, 1, FinishReason::length) ==
        "{\"id\":\"x\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\\\"q\",\"choices\":[{\"index\":0,"
        "\"message\":{\"role\":\"assistant\",\"content\":\" the\"},\"logprobs\":null,\"finish_reason\":\"length\"}],"
        "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}");
}

TEST_CASE("sim openai: parsing requests") {
  auto request = parse_ok(Endpoint::completions, R"({"model":"kimi","prompt":"Explain B-trees.","max_tokens":512,
      "ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}})");
  CHECK(request.model == "kimi");
  CHECK(request.stream);
  CHECK(request.include_usage);
  CHECK(request.ignore_eos);
  CHECK(request.max_tokens == 512);
  CHECK(request.target_tokens == 512);
  CHECK(request.finish_reason == FinishReason::length);
  CHECK(request.prompt_tokens == 4);

  CHECK(parse_ok(Endpoint::completions, R"({"prompt":"x"})").max_tokens == 16);
  CHECK(parse_ok(Endpoint::completions, R"({"prompt":"x"})").model == "/models/served");
  CHECK(parse_ok(Endpoint::completions, R"({"prompt":[1,2,3,4,5]})").prompt_tokens == 5);
  CHECK(parse_ok(Endpoint::chat, R"({"messages":[{"role":"user","content":"hi there"}],"max_completion_tokens":9})")
            .max_tokens == 9);
  const auto parts = parse_ok(
      Endpoint::chat, R"({"messages":[{"role":"user","content":[{"type":"text","text":"abcdefgh"}]}],"max_tokens":1})");
  CHECK(parts.prompt_tokens == 3 + 4 + 2);
}

TEST_CASE("sim openai: without ignore_eos the model stops by itself, deterministically") {
  const auto a = parse_ok(Endpoint::completions, R"({"prompt":"Tell me a story.","max_tokens":5000})");
  const auto b = parse_ok(Endpoint::completions, R"({"prompt":"Tell me a story.","max_tokens":5000})");
  CHECK(a.finish_reason == FinishReason::stop);
  CHECK(a.target_tokens >= 64);
  CHECK(a.target_tokens < 1024);
  CHECK(a.target_tokens == b.target_tokens);
  CHECK(parse_ok(Endpoint::completions, R"({"prompt":"Tell me a story.","max_tokens":10})").finish_reason ==
        FinishReason::length);
}

TEST_CASE("sim openai: bad requests") {
  CHECK(parse_error(Endpoint::completions, "{oops").starts_with("the body is not valid JSON"));
  CHECK(parse_error(Endpoint::completions, "[]") == "the body must be a JSON object");
  CHECK(parse_error(Endpoint::completions, R"({"max_tokens":3})") == "field \"prompt\" is required");
  CHECK(parse_error(Endpoint::completions, R"({"prompt":"x","max_tokens":0})") ==
        "field \"max_tokens\" must be at least 1, got 0");
  CHECK(parse_error(Endpoint::completions, R"({"prompt":"x","stream":"yes"})") ==
        "field \"stream\" must be true or false");
  CHECK(parse_error(Endpoint::completions, R"({"prompt":"x","n":2})") == "specsim supports n = 1 only");
  CHECK(parse_error(Endpoint::chat, R"({"messages":[]})") == "field \"messages\" must be a non-empty list");
  CHECK(parse_error(Endpoint::completions, R"({"prompt":"x","max_tokens":262144})")
            .starts_with("Requested token count exceeds the model's maximum context length of 262144 tokens."));
}

TEST_CASE("sim openai: ids, token text and error bodies") {
  CHECK(response_id(1).size() == 32);
  CHECK(response_id(1) != response_id(2));
  std::string text;
  append_token_text(text, 5, 0, 64);
  int spaces = 0;
  for (char c : text) {
    spaces += (c == ' ' || c == ',' || c == '.') ? 1 : 0;
  }
  CHECK(spaces == 64);
  CHECK(error_body(400, "BadRequestError", "bad \"x\"") ==
        R"({"object":"error","message":"bad \"x\"","type":"BadRequestError","param":null,"code":400})");
  std::string escaped;
  append_json_string(escaped, "a\nb\x01");
  CHECK(escaped == "\"a\\nb\\u0001\"");
}
