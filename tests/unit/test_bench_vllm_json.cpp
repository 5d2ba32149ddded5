#include <doctest/doctest.h>

#include <specctl/bench/vllm_json.hpp>

#include <string>
#include <vector>

using namespace specctl::bench;

namespace {

// Two successful requests and one failed, with hand-checked figures below.
VllmLevel fixture() {
  VllmLevel level;
  level.date = "20250102-030405";
  level.backend = "openai-chat";
  level.model_id = "meta-llama/Llama-3.1-8B-Instruct";
  level.num_prompts = 3;
  level.max_concurrency = 2;
  level.duration_s = 2.0;
  level.requests = {
      {.ok = true,
       .input_tokens = 10,
       .output_tokens = 4,
       .ttft_ms = 100,
       .itl_ms = {20, 30, 40},
       .e2e_ms = 190,
       .start_ms = 0,
       .generated_text = "one two three four",
       .error = ""},
      {.ok = true,
       .input_tokens = 20,
       .output_tokens = 2,
       .ttft_ms = 200,
       .itl_ms = {50},
       .e2e_ms = 250,
       .start_ms = 100,
       .generated_text = "five six",
       .error = ""},
      {.ok = false,
       .input_tokens = 30,
       .output_tokens = 0,
       .ttft_ms = 0,
       .itl_ms = {},
       .e2e_ms = 0,
       .start_ms = 1000,
       .generated_text = "",
       .error = "HTTP 500"},
  };
  return level;
}

std::vector<std::string> keys_of(const nlohmann::ordered_json& json) {
  std::vector<std::string> keys;
  for (const auto& item : json.items()) {
    keys.push_back(item.key());
  }
  return keys;
}

} // namespace

TEST_CASE("bench::vllm_result_json writes vLLM's --save-result fields in vLLM's order") {
  const nlohmann::ordered_json json = vllm_result_json(fixture());
  // One line per group of vLLM's result_json.
  // clang-format off
  const std::vector<std::string> expected = {
      "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
      "request_rate", "burstiness", "max_concurrency",
      "duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
      "request_goodput", "output_throughput", "total_token_throughput",
      "input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "generated_texts", "errors",
      "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
      "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
      "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
      "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms",
      "mean_e2el_ms", "median_e2el_ms", "std_e2el_ms", "p99_e2el_ms"};
  // clang-format on
  CHECK(keys_of(json) == expected);

  SUBCASE("the level's facts") {
    CHECK(json["date"] == "20250102-030405");
    CHECK(json["endpoint_type"] == "openai-chat");
    CHECK(json["backend"] == "openai-chat");
    CHECK(json["label"].is_null());
    CHECK(json["tokenizer_id"].is_null());
    CHECK(json["num_prompts"] == 3);
    CHECK(json["request_rate"] == "inf");
    CHECK(json["burstiness"] == 1.0);
    CHECK(json["max_concurrency"] == 2);
    CHECK(json["duration"] == 2.0);
  }
  SUBCASE("totals count successful requests only") {
    CHECK(json["completed"] == 2);
    CHECK(json["failed"] == 1);
    CHECK(json["total_input_tokens"] == 30);
    CHECK(json["total_output_tokens"] == 6);
    CHECK(json["request_throughput"].get<double>() == doctest::Approx(1.0));
    CHECK(json["request_goodput"].is_null());
    CHECK(json["output_throughput"].get<double>() == doctest::Approx(3.0));
    CHECK(json["total_token_throughput"].get<double>() == doctest::Approx(18.0));
  }
  SUBCASE("per-request lists, in seconds, a failed request's output length 0") {
    CHECK(json["input_lens"] == nlohmann::ordered_json({10, 20, 30}));
    CHECK(json["output_lens"] == nlohmann::ordered_json({4, 2, 0}));
    CHECK(json["ttfts"][0].get<double>() == doctest::Approx(0.1));
    CHECK(json["ttfts"][1].get<double>() == doctest::Approx(0.2));
    CHECK(json["ttfts"][2].get<double>() == 0.0);
    REQUIRE(json["itls"].size() == 3);
    CHECK(json["itls"][0].size() == 3);
    CHECK(json["itls"][0][2].get<double>() == doctest::Approx(0.04));
    CHECK(json["itls"][2].empty());
    CHECK(json["latencies"][1].get<double>() == doctest::Approx(0.25));
    CHECK(json["start_times"][2].get<double>() == doctest::Approx(1.0));
    CHECK(json["generated_texts"][1] == "five six");
    CHECK(json["errors"] == nlohmann::ordered_json({"", "", "HTTP 500"}));
  }
  SUBCASE("peaks: 6 token arrivals in the first second, 2 requests in flight") {
    CHECK(json["max_output_tokens_per_s"].get<double>() == doctest::Approx(6.0));
    CHECK(json["max_concurrent_requests"] == 2);
    CHECK(json["rtfx"] == 0.0);
  }
  SUBCASE("TTFT of 100 and 200 ms") {
    CHECK(json["mean_ttft_ms"].get<double>() == doctest::Approx(150.0));
    CHECK(json["median_ttft_ms"].get<double>() == doctest::Approx(150.0));
    CHECK(json["std_ttft_ms"].get<double>() == doctest::Approx(50.0));
    // Linear interpolation at rank 0.99 of [100, 200].
    CHECK(json["p99_ttft_ms"].get<double>() == doctest::Approx(199.0));
  }
  SUBCASE("TPOT: (190 - 100) / 3 = 30 and (250 - 200) / 1 = 50") {
    CHECK(json["mean_tpot_ms"].get<double>() == doctest::Approx(40.0));
    CHECK(json["median_tpot_ms"].get<double>() == doctest::Approx(40.0));
    CHECK(json["std_tpot_ms"].get<double>() == doctest::Approx(10.0));
    CHECK(json["p99_tpot_ms"].get<double>() == doctest::Approx(49.8));
  }
  SUBCASE("ITL pools 20, 30, 40 and 50 ms") {
    CHECK(json["mean_itl_ms"].get<double>() == doctest::Approx(35.0));
    CHECK(json["median_itl_ms"].get<double>() == doctest::Approx(35.0));
    // sqrt((15^2 + 5^2 + 5^2 + 15^2) / 4) = sqrt(125)
    CHECK(json["std_itl_ms"].get<double>() == doctest::Approx(11.180339887498949));
    // Rank 0.99 * 3 = 2.97: between 40 and 50.
    CHECK(json["p99_itl_ms"].get<double>() == doctest::Approx(49.7));
  }
  SUBCASE("E2EL of 190 and 250 ms") {
    CHECK(json["mean_e2el_ms"].get<double>() == doctest::Approx(220.0));
    CHECK(json["median_e2el_ms"].get<double>() == doctest::Approx(220.0));
    CHECK(json["std_e2el_ms"].get<double>() == doctest::Approx(30.0));
    CHECK(json["p99_e2el_ms"].get<double>() == doctest::Approx(249.4));
  }
}

TEST_CASE("bench::vllm_result_json options: rate, label, goodput, percentiles, summary") {
  VllmLevel level = fixture();
  level.request_rate = 4.0;
  level.label = "eagle3";
  level.tokenizer_id = "meta-llama/Llama-3.1-8B-Instruct";
  level.goodput_ttft_ms = 150;
  level.percentiles = {50, 99.9};
  level.detail = VllmLevel::Detail::summary;
  const nlohmann::ordered_json json = vllm_result_json(level);
  CHECK(json["request_rate"] == 4.0);
  CHECK(json["label"] == "eagle3");
  CHECK(json["tokenizer_id"] == "meta-llama/Llama-3.1-8B-Instruct");
  // Only the first request's TTFT (100 ms) meets 150 ms: 1 good request in 2 s.
  CHECK(json["request_goodput"].get<double>() == doctest::Approx(0.5));
  CHECK(json["p50_ttft_ms"].get<double>() == doctest::Approx(150.0));
  CHECK(json["p99.9_ttft_ms"].get<double>() == doctest::Approx(199.9));
  CHECK_FALSE(json.contains("p99_ttft_ms"));
  // vLLM without --save-detailed keeps latencies but drops the other lists.
  CHECK(json.contains("latencies"));
  for (const char* key : {"input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"}) {
    CAPTURE(key);
    CHECK_FALSE(json.contains(key));
  }
}

TEST_CASE("bench::vllm_result_json with no successful request writes zeros, as numpy of an empty list") {
  VllmLevel level;
  level.duration_s = 0;
  level.requests = {{.ok = false, .input_tokens = 5, .error = "connection refused"}};
  const nlohmann::ordered_json json = vllm_result_json(level);
  CHECK(json["completed"] == 0);
  CHECK(json["failed"] == 1);
  CHECK(json["request_throughput"] == 0.0);
  CHECK(json["mean_ttft_ms"] == 0.0);
  CHECK(json["p99_itl_ms"] == 0.0);
  CHECK(json["max_concurrent_requests"] == 0);
}

TEST_CASE("bench::numpy_percentile and numpy_std follow numpy's defaults") {
  CHECK(numpy_percentile({}, 99) == 0.0);
  CHECK(numpy_percentile({7}, 99) == 7.0);
  CHECK(numpy_percentile({1, 2, 3, 4}, 50) == doctest::Approx(2.5));
  CHECK(numpy_percentile({4, 1, 3, 2}, 25) == doctest::Approx(1.75));
  CHECK(numpy_percentile({1, 2, 3, 4}, 100) == 4.0);
  CHECK(numpy_percentile({1, 2, 3, 4}, 0) == 1.0);
  CHECK(numpy_std({}) == 0.0);
  CHECK(numpy_std({2, 4, 4, 4, 5, 5, 7, 9}) == doctest::Approx(2.0));
}

TEST_CASE("bench::vllm_date is vLLM's %Y%m%d-%H%M%S") {
  const std::string date = vllm_date(std::chrono::system_clock::now());
  REQUIRE(date.size() == 15);
  CHECK(date[8] == '-');
  CHECK(date.find_first_not_of("0123456789-") == std::string::npos);
}
