// The personalities (--sim-engine) through real sockets: each engine's
// readiness, log, endpoints and stream, and its own accept-length figures held
// against specsim's truth (/sim/truth).

#include "../support/specsim.hpp"
#include "../support/wait.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <sstream>

using namespace specctl::test;
using namespace std::chrono_literals;

namespace {

nlohmann::json get_json(const Server& server, const std::string& path) {
  const auto result = http_get(server.url(path));
  REQUIRE(result.status == 200);
  return nlohmann::json::parse(result.body);
}

// The value of a Prometheus sample whose line starts with `prefix`.
double sample(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(prefix)) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  FAIL("no sample " << prefix);
  return 0.0;
}

std::vector<nlohmann::json> json_events(const StreamResult& stream) {
  std::vector<nlohmann::json> events;
  for (const auto& event : stream.events) {
    if (event.data != "[DONE]") {
      events.push_back(nlohmann::json::parse(event.data));
    }
  }
  return events;
}

std::string chat_body(int max_tokens, bool usage) {
  return nlohmann::json{{"model", "m"},
                        {"messages", {{{"role", "user"}, {"content", "Explain gravity."}}}},
                        {"max_tokens", max_tokens},
                        {"ignore_eos", true},
                        {"stream", true},
                        {"stream_options", {{"include_usage", usage}}}}
      .dump();
}

// One HTTP/1.1 request on a raw socket, read until the server closes or the
// timeout passes: what came back and whether the server closed.
struct RawResult {
  std::string response;
  bool closed_by_server = false;
};

RawResult raw_request(int port, const std::string& request, std::chrono::milliseconds timeout) {
  RawResult result;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  const auto deadline = Clock::now() + timeout;
  char buffer[4096];
  while (Clock::now() < deadline) {
    pollfd poll_fd{fd, POLLIN, 0};
    if (::poll(&poll_fd, 1, static_cast<int>(k_poll_interval.count())) <= 0) {
      continue;
    }
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got <= 0) {
      result.closed_by_server = got == 0;
      break;
    }
    result.response.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return result;
}

std::string post_request(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

} // namespace

TEST_CASE("vllm: refused while loading, then vLLM's log, /health and /metrics counters equal the truth") {
  Server server({"--sim-engine", "vllm", "serve", "/models/Llama", "--host", "127.0.0.1", "--port", "{port}",
                 "--sim-gpu-dir", "{gpu_dir}", "--sim-load-time", "3s", "--sim-speed", "5", "--speculative-config",
                 R"({"method": "eagle3", "model": "/models/eagle3", "num_speculative_tokens": 2})"},
                Defaults::no, "", {{"VLLM_LOG_STATS_INTERVAL", "2"}});
  REQUIRE(server.wait_log("Starting to load model /models/Llama"));
  // Bound early but not listening: refused.
  CHECK(connection_refused(server.port()));
  REQUIRE(server.wait_ready());
  const std::string loaded = server.log();
  for (const char* line : {"Loading safetensors checkpoint shards: 100% Completed | 64/64", "Loading weights took ",
                           "Graph capturing finished in ", "Application startup complete."}) {
    CAPTURE(line);
    CHECK(loaded.find(line) != std::string::npos);
  }
  CHECK(loaded.find("Starting vLLM API server 0 on http://127.0.0.1:" + std::to_string(server.port())) !=
        std::string::npos);
  CHECK(std::regex_search(loaded, std::regex(R"(\(APIServer pid=\d+\) \x1b\[32mINFO\x1b\[0m )")));
  CHECK(http_get(server.url("/health")).body.empty());
  // A process named like vLLM's holds the fake GPU.
  CHECK(server.gpus().nvidia_smi({"--query-compute-apps=process_name", "--format=csv,noheader"}).out ==
        "VLLM::EngineCore\n");

  const auto scrape = [&] { return http_get(server.url("/metrics")).body; };
  const std::string before = scrape();
  const double drafts0 = sample(before, "vllm:spec_decode_num_drafts_total{");
  const double accepted0 = sample(before, "vllm:spec_decode_num_accepted_tokens_total{");
  const auto truth0 = get_json(server, "/sim/truth")["since_boot"];
  std::vector<std::string> bodies(4, completion_body(96, Stream::yes));
  for (const auto& stream : stream_post_many(server.url("/v1/completions"), bodies)) {
    CHECK(stream.done);
  }
  const std::string after = scrape();
  const double drafts = sample(after, "vllm:spec_decode_num_drafts_total{") - drafts0;
  const double accepted = sample(after, "vllm:spec_decode_num_accepted_tokens_total{") - accepted0;
  const auto truth1 = get_json(server, "/sim/truth")["since_boot"];
  const long truth_passes = truth1["verify_passes"].get<long>() - truth0["verify_passes"].get<long>();
  const long truth_accepted = truth1["accepted_tokens"].get<long>() - truth0["accepted_tokens"].get<long>();
  REQUIRE(drafts > 0);
  CHECK(drafts == truth_passes);
  CHECK(accepted == truth_accepted);
  // REFERENCE.md: accept length over a window = 1 + Δaccepted / Δdrafts.
  CHECK(1.0 + accepted / drafts == doctest::Approx(1.0 + static_cast<double>(truth_accepted) / truth_passes));
  CHECK(sample(after, "vllm:spec_decode_num_draft_tokens_total{") == truth1["draft_tokens"].get<double>());
  // The stats lines, every VLLM_LOG_STATS_INTERVAL / speed.
  REQUIRE(server.wait_log("SpecDecoding metrics: Mean acceptance length: "));
  CHECK(server.log().find("Engine 000: Avg prompt throughput: ") != std::string::npos);
}

TEST_CASE("llamacpp: 503 while loading, llama.cpp's stream, connection closed, accept length equals the truth") {
  Server server({"--sim-engine", "llamacpp", "-m", "/models/target", "-md", "/models/draft", "--spec-type",
                 "draft-simple", "--spec-draft-n-max", "3", "--port", "{port}", "--sim-gpu-dir", "{gpu_dir}",
                 "--sim-load-time", "2s", "--sim-speed", "1"},
                Defaults::no);
  REQUIRE(server.wait_health(503));
  CHECK(http_get(server.url("/health")).body ==
        R"({"error":{"message":"Loading model","type":"unavailable_error","code":503}})");
  REQUIRE(server.wait_health(200));
  CHECK(http_get(server.url("/health")).body == R"({"status":"ok"})");
  const std::string loaded = server.log();
  for (const char* line : {"I srv    load_model: loading model '/models/target'",
                           "I common_speculative_init_result: loading draft model '/models/draft'",
                           "I srv    load_model: initializing, n_slots = 4, ", "I srv  llama_server: model loaded",
                           "I srv  llama_server: listening on http://127.0.0.1:"}) {
    CAPTURE(line);
    CHECK(loaded.find(line) != std::string::npos);
  }
  CHECK(std::regex_search(loaded, std::regex(R"((^|\n)\d+\.\d\d\.\d\d\d\.\d\d\d I srv  llama_server: model loaded)")));

  SUBCASE("completions: one event per token, the last with finish_reason, usage and timings") {
    const auto stream = stream_post(server.url("/v1/completions"), completion_body(40, Stream::yes, Usage::no));
    REQUIRE(stream.done);
    const auto events = json_events(stream);
    REQUIRE(events.size() == 41);
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
      CHECK(count_tokens(events[i]["choices"][0]["text"].get<std::string>()) == 1);
      CHECK(events[i]["choices"][0]["finish_reason"].is_null());
    }
    const auto& last = events.back();
    CHECK(last["choices"][0]["finish_reason"] == "length");
    CHECK(last["usage"]["completion_tokens"] == 40);
    CHECK(last["usage"]["prompt_tokens_details"].contains("cached_tokens"));
    const auto& timings = last["timings"];
    CHECK(timings["predicted_n"] == 40);
    CHECK(timings["predicted_per_second"].get<double>() > 0.0);
    // The request's own drafted/accepted counts are the sim's truth for it.
    const auto truth = get_json(server, "/sim/truth")["requests"].back();
    CHECK(timings["draft_n"] == truth["draft_tokens"]);
    CHECK(timings["draft_n_accepted"] == truth["accepted_tokens"]);
    // print_timing's line: mean len = 1 + accepted / verify steps.
    REQUIRE(server.wait_log("draft acceptance = "));
    std::smatch match;
    const std::string log = server.log();
    REQUIRE(std::regex_search(
        log, match,
        std::regex(
            R"(draft acceptance = ([0-9.]+) \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([0-9.]+))")));
    CHECK(std::stol(match[2]) == truth["accepted_tokens"].get<long>());
    CHECK(std::stol(match[3]) == truth["draft_tokens"].get<long>());
    CHECK(std::stod(match[4]) == doctest::Approx(truth["accept_length"].get<double>()).epsilon(0.006));
  }
  SUBCASE("chat: role, tokens, finish, then usage with timings") {
    const auto stream = stream_post(server.url("/v1/chat/completions"), chat_body(5, true));
    REQUIRE(stream.done);
    const auto events = json_events(stream);
    REQUIRE(events.size() == 1 + 5 + 1 + 1);
    CHECK(events[0]["choices"][0]["delta"] == nlohmann::json{{"role", "assistant"}, {"content", nullptr}});
    CHECK(events[6]["choices"][0]["finish_reason"] == "length");
    CHECK(events[7]["choices"] == nlohmann::json::array());
    CHECK(events[7]["usage"]["completion_tokens"] == 5);
    CHECK(events[7]["timings"].contains("draft_n"));
  }
  SUBCASE("Keep-Alive is answered, yet the connection closes after a stream") {
    const auto result =
        raw_request(server.port(), post_request("/v1/completions", completion_body(8, Stream::yes)), 10s);
    CHECK(result.closed_by_server);
    CHECK(result.response.find("Keep-Alive: timeout=5, max=100\r\n") != std::string::npos);
    CHECK(result.response.find("Connection: close") == std::string::npos);
    CHECK(result.response.find("data: [DONE]") != std::string::npos);
  }
  SUBCASE("TERM: cleaning up, exit 0") {
    server.process().signal(SIGTERM);
    CHECK(server.process().wait_exit_code(k_exit_timeout) == 0);
    CHECK(server.log().find("srv    operator(): operator(): cleaning up before exit...") != std::string::npos);
  }
}

TEST_CASE("llamacpp: a second TERM while a request runs terminates at once, exit 1") {
  Server server({"--sim-engine", "llamacpp", "-m", "/models/target", "--port", "{port}", "--sim-gpu-dir", "{gpu_dir}",
                 "--sim-load-time", "0.1s", "--sim-speed", "0.2"},
                Defaults::no);
  REQUIRE(server.wait_ready());
  std::thread client([&] { (void)stream_post(server.url("/v1/completions"), completion_body(500, Stream::yes), 20s); });
  REQUIRE(wait_until([&] { return get_json(server, "/sim/truth")["since_boot"]["generation_tokens"] > 0; }, 10s));
  server.process().signal(SIGTERM);
  REQUIRE(server.wait_log("cleaning up before exit..."));
  CHECK(server.process().running());
  server.process().signal(SIGTERM);
  CHECK(server.process().wait_exit_code(k_exit_timeout) == 1);
  CHECK(server.log().find("Received second interrupt, terminating immediately.") != std::string::npos);
  client.join();
}

TEST_CASE("llamacpp: a missing GGUF and a removed flag exit 1 at once") {
  SUBCASE("missing model") {
    TempDir dir;
    const std::string model = (dir.path() / "absent.gguf").string();
    Server server({"--sim-engine", "llamacpp", "-m", model, "--port", "{port}", "--sim-gpu-dir", "{gpu_dir}"},
                  Defaults::no);
    CHECK(server.process().wait_exit_code(5s) == 1);
    const std::string log = server.log();
    CHECK(log.find("failed to open GGUF file '" + model + "' (No such file or directory)") != std::string::npos);
    CHECK(log.find("exiting due to model loading error") != std::string::npos);
  }
  SUBCASE("--draft-max") {
    const auto result = run_command({specsim_binary(), "--sim-engine", "llamacpp", "-m", "/m", "--draft-max", "8"});
    CHECK(result.exit_code == 1);
    CHECK(result.out.starts_with("error while handling argument \"--draft-max\": the argument has been removed. use "
                                 "--spec-draft-n-max or --spec-ngram-mod-n-max\n"));
  }
}

TEST_CASE("sglang: /health generates after warm-up, /server_info's accept length is the truth since boot") {
  Server server({"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
                 "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                 "3"});
  REQUIRE(server.wait_ready());
  const auto count = [&](const std::string& text) {
    const std::string log = server.log();
    std::size_t n = 0;
    for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) {
      ++n;
    }
    return n;
  };
  const std::size_t prefills = count("Prefill batch, ");
  CHECK(http_get(server.url("/health")).status == 200);
  // The line may reach the log after the answer (SGLang logs prefill stats before the
  // forward in some versions, after streaming in others): wait for it, bounded.
  CHECK(specctl::test::wait_until([&] { return count("Prefill batch, ") >= prefills + 1; }));
  CHECK(server.log().find("Capture draft cuda graph end. ") != std::string::npos);
  (void)stream_post(server.url("/v1/completions"), completion_body(64, Stream::yes));
  const auto info = get_json(server, "/server_info");
  const auto truth = get_json(server, "/sim/truth");
  const auto& since = truth["since_boot"];
  CHECK(info["internal_states"][0]["avg_spec_accept_length"].get<double>() ==
        doctest::Approx(since["accept_length"].get<double>()));
  CHECK(since["accept_length"].get<double>() ==
        doctest::Approx(static_cast<double>(since["spec_tokens"].get<long>()) / since["verify_passes"].get<long>()));
  // Warm-up and health generations are in the count, as the engine counts them.
  bool warmup = false;
  bool health = false;
  for (const auto& request : truth["requests"]) {
    warmup = warmup || request["kind"] == "warmup";
    health = health || request["kind"] == "health";
  }
  CHECK(warmup);
  CHECK(health);
}

TEST_CASE("sglang: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 answers /health without generating") {
  Server server({}, Defaults::yes, "", {{"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "0"}});
  REQUIRE(server.wait_ready());
  const auto before = get_json(server, "/sim/truth")["since_boot"]["requests"].get<long>();
  CHECK(http_get(server.url("/health")).status == 200);
  CHECK(get_json(server, "/sim/truth")["since_boot"]["requests"].get<long>() == before);
}
