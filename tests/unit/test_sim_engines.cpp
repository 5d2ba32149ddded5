#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>
#include <specctl/sim/openai.hpp>
#include <specctl/sim/options.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

using namespace specctl::sim;

namespace {

std::expected<Options, ArgError> parse_engine_args(std::vector<std::string> args) {
  return parse_args(args);
}

std::vector<nlohmann::json> events_of(const std::string& stream) {
  std::vector<nlohmann::json> events;
  std::size_t at = 0;
  while (at < stream.size()) {
    const auto end = stream.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    const std::string event = stream.substr(at, end - at);
    REQUIRE(event.starts_with("data: "));
    events.push_back(nlohmann::json::parse(event.substr(6)));
    at = end + 2;
  }
  return events;
}

} // namespace

TEST_CASE("sim engines: --sim-engine picks the personality") {
  SUBCASE("default sglang") {
    const auto options = parse_engine_args({"--model-path", "/m"});
    REQUIRE(options.has_value());
    CHECK(options->engine == Engine::sglang);
  }
  SUBCASE("anywhere, either spelling") {
    const auto options = parse_engine_args({"serve", "/m", "--sim-engine=vllm"});
    REQUIRE(options.has_value());
    CHECK(options->engine == Engine::vllm);
  }
  SUBCASE("an unknown engine") {
    const auto options = parse_engine_args({"--sim-engine", "tgi", "--model-path", "/m"});
    REQUIRE_FALSE(options.has_value());
    CHECK(options.error().message ==
          "argument --sim-engine: invalid choice: 'tgi' (choose from 'sglang', 'vllm', 'llamacpp')");
  }
}

TEST_CASE("sim engines: SGLang's new spellings") {
  const auto options = parse_engine_args({"--model-path", "/m", "--tp-size", "8", "--cuda-graph-max-bs-decode", "96",
                                          "--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill",
                                          "disabled", "--flashinfer-allreduce-fusion-backend", "auto"});
  REQUIRE(options.has_value());
  CHECK(options->server.cuda_graph_max_bs == 96);
  CHECK(options->server.disable_cuda_graph);
  CHECK(options->server.enable_flashinfer_allreduce_fusion);
  const auto list = parse_engine_args({"--model-path", "/m", "--cuda-graph-bs-decode", "1", "2", "4"});
  REQUIRE(list.has_value());
  CHECK(list->server.cuda_graph_bs == std::vector<int>{1, 2, 4});
  SUBCASE("the old spellings still parse") {
    const auto old =
        parse_engine_args({"--model-path", "/m", "--cuda-graph-max-bs", "128", "--enable-flashinfer-allreduce-fusion"});
    REQUIRE(old.has_value());
    CHECK(old->server.cuda_graph_max_bs == 128);
  }
}

TEST_CASE("sim engines: vLLM's serve command line") {
  const auto options =
      parse_engine_args({"--sim-engine",
                         "vllm",
                         "serve",
                         "/models/Llama",
                         "--host",
                         "127.0.0.1",
                         "--port",
                         "8123",
                         "-tp",
                         "2",
                         "--speculative-config",
                         R"({"method": "eagle3", "model": "/models/eagle3", "num_speculative_tokens": 3})",
                         "--compilation-config",
                         R"({"cudagraph_mode": "FULL", "pass_config": {"fuse_allreduce_rms": true}})",
                         "--attention-backend",
                         "FLASHINFER",
                         "--gpu-memory-utilization",
                         "0.8",
                         "--disable-custom-all-reduce",
                         "--max-cudagraph-capture-size",
                         "64",
                         "--max_num_seqs",
                         "32",
                         "--sim-load-time",
                         "1s"});
  REQUIRE_MESSAGE(options.has_value(), options.error().message);
  const auto& s = options->server;
  CHECK(s.model_path == "/models/Llama");
  CHECK(s.port == 8123);
  CHECK(s.tp_size == 2);
  CHECK(s.speculative_algorithm == SpecAlgorithm::eagle3);
  CHECK(s.speculative_draft_model_path == "/models/eagle3");
  CHECK(s.speculative_num_steps == 3);
  CHECK(s.speculative_eagle_topk == 1);
  CHECK(s.speculative_num_draft_tokens == 4);
  CHECK_FALSE(s.disable_cuda_graph);
  CHECK(s.enable_flashinfer_allreduce_fusion);
  CHECK(s.attention_backend == "flashinfer");
  CHECK(s.mem_fraction_static == 0.8);
  CHECK(s.disable_custom_all_reduce);
  CHECK(s.cuda_graph_max_bs == 64);
  CHECK(options->vllm.max_num_seqs == 32);
  CHECK(options->sim.load_time == std::chrono::seconds{1});

  SUBCASE("defaults: every interface, port 8000") {
    const auto plain = parse_engine_args({"--sim-engine", "vllm", "serve", "/m"});
    REQUIRE(plain.has_value());
    CHECK(plain->server.host == "0.0.0.0");
    CHECK(plain->server.port == 8000);
    CHECK(plain->server.speculative_algorithm == SpecAlgorithm::none);
  }
  SUBCASE("graphs off") {
    CHECK(parse_engine_args({"--sim-engine", "vllm", "serve", "/m", "--enforce-eager"})->server.disable_cuda_graph);
    CHECK(parse_engine_args(
              {"--sim-engine", "vllm", "serve", "/m", "--compilation-config", R"({"cudagraph_mode":"NONE"})"})
              ->server.disable_cuda_graph);
  }
  SUBCASE("mistakes") {
    CHECK(parse_engine_args({"--sim-engine", "vllm", "/m"}).error().message.find("must be serve") != std::string::npos);
    CHECK(parse_engine_args({"--sim-engine", "vllm", "serve"}).error().message ==
          "the following arguments are required: model_tag");
    CHECK(parse_engine_args({"--sim-engine", "vllm", "serve", "/m", "--tp-size", "2"}).error().message ==
          "unrecognized arguments: --tp-size 2");
    CHECK(parse_engine_args({"--sim-engine", "vllm", "serve", "/m", "--speculative-config", "{\"method\":\"eagle3\"}"})
              .error()
              .message == "argument --speculative-config: num_speculative_tokens must be a positive integer");
  }
}

TEST_CASE("sim engines: llama-server's command line") {
  const auto options = parse_engine_args({"--sim-engine",
                                          "llamacpp",
                                          "-m",
                                          "/m/target.gguf",
                                          "--host",
                                          "127.0.0.1",
                                          "--port",
                                          "8090",
                                          "-md",
                                          "/m/draft.gguf",
                                          "--spec-type",
                                          "draft-simple",
                                          "--spec-draft-n-max",
                                          "8",
                                          "-c",
                                          "8192",
                                          "-np",
                                          "2",
                                          "-t",
                                          "4",
                                          "-ngl",
                                          "all",
                                          "--sim-speed",
                                          "10"});
  REQUIRE_MESSAGE(options.has_value(), options.error().message);
  CHECK(options->engine == Engine::llamacpp);
  CHECK(options->server.model_path == "/m/target.gguf");
  CHECK(options->server.port == 8090);
  CHECK(options->llama.draft_model == "/m/draft.gguf");
  CHECK(options->llama.draft_n_max == 8);
  CHECK(options->llama.ctx_size == 8192);
  CHECK(options->llama.parallel == 2);
  CHECK(options->llama.threads == 4);
  CHECK(options->sim.speed == 10.0);
  CHECK(options->llama.speculates());
  CHECK(options->server.speculative_algorithm == SpecAlgorithm::standalone);
  CHECK(options->server.speculative_num_steps == 8);
  CHECK(options->server.speculative_num_draft_tokens == 9);

  SUBCASE("defaults: 127.0.0.1:8080, 4 slots, no speculation") {
    const auto plain = parse_engine_args({"--sim-engine", "llamacpp", "-m", "/m"});
    REQUIRE(plain.has_value());
    CHECK(plain->server.host == "127.0.0.1");
    CHECK(plain->server.port == 8080);
    CHECK(plain->llama.parallel == 4);
    CHECK(plain->llama.draft_n_max == 3);
    CHECK(plain->server.speculative_algorithm == SpecAlgorithm::none);
  }
  SUBCASE("-md alone loads the draft but does not speculate") {
    const auto draft_only = parse_engine_args({"--sim-engine", "llamacpp", "-m", "/m", "-md", "/d"});
    REQUIRE(draft_only.has_value());
    CHECK_FALSE(draft_only->llama.speculates());
    CHECK(draft_only->server.speculative_algorithm == SpecAlgorithm::none);
  }
  SUBCASE("--draft-max was removed: exit 1 naming --spec-draft-n-max") {
    for (const char* removed : {"--draft-max", "--draft", "--draft-n"}) {
      CAPTURE(removed);
      const auto result = parse_engine_args({"--sim-engine", "llamacpp", "-m", "/m", removed, "8"});
      REQUIRE_FALSE(result.has_value());
      CHECK(result.error().style == ArgStyle::llamacpp);
      CHECK(result.error().message.starts_with(
          std::string("error while handling argument \"") + removed +
          "\": the argument has been removed. use --spec-draft-n-max or --spec-ngram-mod-n-max\n\nusage:\n"));
      CHECK(result.error().message.ends_with("\n\nto show complete usage, run with -h"));
    }
  }
  SUBCASE("an unknown argument") {
    const auto result = parse_engine_args({"--sim-engine", "llamacpp", "-m", "/m", "--tp-size", "2"});
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().style == ArgStyle::llamacpp);
    CHECK(result.error().message == "error: invalid argument: --tp-size");
  }
  SUBCASE("underscores read as dashes") {
    CHECK(parse_engine_args({"--sim-engine", "llamacpp", "-m", "/m", "--spec_draft_n_max", "5"})->llama.draft_n_max ==
          5);
  }
  SUBCASE("a missing value") {
    CHECK(parse_engine_args({"--sim-engine", "llamacpp", "-m", "/m", "--port"})
              .error()
              .message.starts_with("error while handling argument \"--port\": expected value for argument"));
  }
}

TEST_CASE("sim engines: log prefixes") {
  SUBCASE("vLLM: process, coloured level, grey time and file") {
    const auto when = std::chrono::system_clock::from_time_t(0);
    const std::string prefix = vllm_prefix(when, "APIServer", 42, LogLevel::info, "launcher.py:29");
    CHECK(prefix.starts_with("(APIServer pid=42) \x1b[32mINFO\x1b[0m \x1b[90m"));
    CHECK(prefix.ends_with("\x1b[0m \x1b[90m[launcher.py:29]\x1b[0m "));
  }
  SUBCASE("llama.cpp: minutes.seconds.millis.micros and the level letter") {
    CHECK(llama_prefix(std::chrono::microseconds{0}, LogLevel::info) == "0.00.000.000 I ");
    CHECK(llama_prefix(std::chrono::microseconds{61'234'567}, LogLevel::error) == "1.01.234.567 E ");
  }
}

TEST_CASE("sim engines: llama.cpp's completions stream") {
  const LlamaFormatter format(Endpoint::completions, "chatcmpl-1", 1700000000, "m", 0);
  std::string out;
  format.append_tokens(out, 0, 3);
  const LlamaTimings timings{
      .prompt_n = 7, .prompt_ms = 10.0, .predicted_n = 3, .predicted_ms = 20.0, .draft_n = 6, .draft_n_accepted = 2};
  format.append_final(out, FinishReason::length, 7, 3, timings, false);
  const auto events = events_of(out);
  REQUIRE(events.size() == 4);
  for (int i = 0; i < 3; ++i) {
    CHECK(events[i]["choices"][0]["finish_reason"].is_null());
    CHECK(events[i]["choices"][0]["text"].get<std::string>().size() > 0);
    CHECK_FALSE(events[i].contains("usage"));
  }
  const auto& last = events[3];
  CHECK(last["choices"][0]["text"] == "");
  CHECK(last["choices"][0]["finish_reason"] == "length");
  CHECK(last["usage"]["completion_tokens"] == 3);
  CHECK(last["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
  CHECK(last["timings"]["predicted_n"] == 3);
  CHECK(last["timings"]["predicted_per_second"].get<double>() == doctest::Approx(100.0));
  CHECK(last["timings"]["draft_n"] == 6);
  CHECK(last["timings"]["draft_n_accepted"] == 2);
  CHECK(out.substr(0, out.find("\n\n")) ==
        R"(data: {"choices":[{"text":" the","index":0,"logprobs":null,"finish_reason":null}],"created":1700000000,)"
        R"("model":"m","system_fingerprint":"b0-unknown","object":"text_completion","id":"chatcmpl-1"})");
}

TEST_CASE("sim engines: llama.cpp's chat stream") {
  const LlamaFormatter format(Endpoint::chat, "chatcmpl-2", 1, "m", 0);
  const LlamaTimings timings{.prompt_n = 5, .prompt_ms = 1.0, .predicted_n = 2, .predicted_ms = 2.0};
  SUBCASE("with include_usage: role, tokens, finish, usage + timings") {
    std::string out;
    format.append_role(out);
    format.append_tokens(out, 0, 2);
    format.append_final(out, FinishReason::stop, 5, 2, timings, true);
    const auto events = events_of(out);
    REQUIRE(events.size() == 5);
    CHECK(events[0]["choices"][0]["delta"] == nlohmann::json{{"role", "assistant"}, {"content", nullptr}});
    CHECK(events[1]["choices"][0]["delta"].contains("content"));
    CHECK(events[3]["choices"][0]["finish_reason"] == "stop");
    CHECK(events[3]["choices"][0]["delta"] == nlohmann::json::object());
    CHECK_FALSE(events[3].contains("timings"));
    CHECK(events[4]["choices"] == nlohmann::json::array());
    CHECK(events[4]["usage"]["total_tokens"] == 7);
    CHECK(events[4].contains("timings"));
    CHECK_FALSE(events[4]["timings"].contains("draft_n"));
  }
  SUBCASE("without: timings ride on the finish event") {
    std::string out;
    format.append_final(out, FinishReason::length, 5, 2, timings, false);
    const auto events = events_of(out);
    REQUIRE(events.size() == 1);
    CHECK(events[0]["choices"][0]["finish_reason"] == "length");
    CHECK(events[0].contains("timings"));
  }
}

TEST_CASE("sim engines: vLLM's Prometheus counters") {
  ServingStats stats;
  stats.spec_verify_passes = 10;
  stats.spec_tokens = 25;
  stats.spec_draft_tokens = 30;
  stats.spec_accepted_per_pos = {9, 6};
  const std::string text = render_vllm_metrics(stats, "/m", true, 1700000000.0);
  CHECK(text.find("# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
                  "# TYPE vllm:spec_decode_num_drafts_total counter\n"
                  "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"/m\"} 10.0\n") != std::string::npos);
  CHECK(text.find("vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"/m\"} 30.0\n") !=
        std::string::npos);
  CHECK(text.find("vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"/m\"} 15.0\n") !=
        std::string::npos);
  CHECK(text.find("# TYPE vllm:spec_decode_num_drafts_created gauge\n") != std::string::npos);
  CHECK(text.find("vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"/m\",position=\"1\"} "
                  "6.0\n") != std::string::npos);
  CHECK(render_vllm_metrics(stats, "/m", false, 0.0).find("spec_decode") == std::string::npos);
  // 1 + accepted / drafts, the formula of vLLM's compute_acceptance_len.
  CHECK(stats.spec_accept_length_since_boot() == doctest::Approx(1.0 + 15.0 / 10.0));
}
