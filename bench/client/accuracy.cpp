// How exactly the engine measures: runs a closed-loop level against the
// scripted server, whose every chunk is timestamped when it is written, and
// compares the client's TTFT, ITL, E2E and output tok/s with that truth.
// Usage: specctl_client_accuracy [STREAMS [REQUESTS [TOKENS [ITL_MS]]]]
// (defaults 250 500 64 20). Prints one JSON object. See README.md.

#include "script_server.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/bench/prompts.hpp>
#include <specctl/bench/stats.hpp>

#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

using namespace specctl;
using namespace specctl::bench;
using namespace specctl::test;

namespace {

constexpr std::chrono::milliseconds k_base_ttft{50};
constexpr std::chrono::seconds k_request_timeout{120};

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

nlohmann::json error_summary(std::vector<double> errors) {
  for (double& e : errors) {
    e = std::abs(e);
  }
  const Summary s = summarize(errors);
  return {{"count", s.count}, {"p50_ms", s.p50}, {"p99_ms", s.p99}, {"max_ms", s.max}};
}

} // namespace

int main(int argc, char** argv) {
  const int streams = argc > 1 ? std::atoi(argv[1]) : 250;
  const int requests = argc > 2 ? std::atoi(argv[2]) : 2 * streams;
  const int tokens = argc > 3 ? std::atoi(argv[3]) : 64;
  const auto itl = std::chrono::milliseconds(argc > 4 ? std::atoi(argv[4]) : 20);

  // TTFTs of 50..69 ms: requests differ, and their tokens fall at twenty
  // different phases of the ITL instead of one burst of every stream at once.
  ScriptServer server([&](int index, const std::string&, const std::string&) {
    Behavior b;
    b.tokens = tokens;
    b.ttft = k_base_ttft + std::chrono::milliseconds(index % 20);
    b.itl = itl;
    return b;
  });
  RunOptions options;
  options.prompts = plain_requests(seed_prompts());
  options.request.max_tokens = tokens;
  options.request.timeout = k_request_timeout;
  options.warmup = 0;
  const auto result = run_concurrency(Target{server.url(), "", ""}, ConcurrencyOptions{options, {streams}, requests});
  const LevelResult& level = result.levels.at(0);
  server.wait_idle();
  const auto served = server.served();

  std::vector<double> ttft_error;
  std::vector<double> ttft_error_steady;
  std::vector<double> ttft_error_send;
  std::vector<double> itl_error;
  std::vector<double> e2e_error;
  std::vector<double> arrival_delay;
  auto first_received = Clock::time_point::max();
  auto last_write = Clock::time_point::min();
  std::int64_t true_tokens = 0;
  for (const auto& s : served) {
    if (!s.writes.empty()) {
      first_received = std::min(first_received, s.received);
      last_write = std::max(last_write, s.writes.back());
    }
  }
  for (const auto& r : level.records) {
    if (!r.ok() || !r.response_id.starts_with("req-")) {
      continue;
    }
    const auto& truth = served.at(static_cast<std::size_t>(std::stoi(r.response_id.substr(4))));
    if (truth.writes.size() != r.chunks.size()) {
      continue;
    }
    true_tokens += static_cast<std::int64_t>(truth.writes.size());
    // TTFT and E2E as the server saw them: from reading the request to writing
    // the chunk. The single-threaded server reads the first burst of requests
    // one by one, so the first round also counts its own read delay; later
    // requests ("steady") start one at a time.
    const double strict = r.ttft_ms - ms(truth.writes.front() - truth.received);
    ttft_error.push_back(strict);
    if (r.index >= streams) {
      ttft_error_steady.push_back(strict);
    }
    e2e_error.push_back(r.e2e_ms - ms(truth.writes.back() - truth.received));
    // Every chunk: when the client stamped it minus when the server wrote it (one steady clock).
    const auto origin =
        level.started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(r.start_s));
    // TTFT from the request's write to the first chunk's write, against the client's figure.
    ttft_error_send.push_back(r.ttft_ms - ms(truth.writes.front() - origin));
    for (std::size_t i = 0; i < r.chunks.size(); ++i) {
      arrival_delay.push_back(ms(origin + std::chrono::microseconds(r.chunks[i].at_us) - truth.writes[i]));
    }
    for (std::size_t i = 1; i < r.chunks.size(); ++i) {
      const double client = (r.chunks[i].at_us - r.chunks[i - 1].at_us) / 1000.0;
      itl_error.push_back(client - ms(truth.writes[i] - truth.writes[i - 1]));
    }
  }
  const double true_tok_s =
      static_cast<double>(true_tokens) / std::chrono::duration<double>(last_write - first_received).count();
  const nlohmann::json out = {
      {"streams", streams},
      {"requests", requests},
      {"tokens_per_request", tokens},
      {"itl_ms", itl.count()},
      {"completed", level.completed},
      {"failed", level.failed},
      {"chunk_arrival_delay", error_summary(arrival_delay)},
      {"ttft_abs_error", error_summary(ttft_error)},
      {"ttft_abs_error_steady", error_summary(ttft_error_steady)},
      {"ttft_abs_error_vs_send", error_summary(ttft_error_send)},
      {"itl_abs_error", error_summary(itl_error)},
      {"e2e_abs_error", error_summary(e2e_error)},
      {"output_tok_s", level.output_tok_s},
      {"true_output_tok_s", true_tok_s},
      {"output_tok_s_error_pct", 100.0 * (level.output_tok_s - true_tok_s) / true_tok_s},
      {"client_cpu_s", level.client_cpu_s},
      {"duration_s", level.duration_s},
  };
  std::cout << out.dump(2) << '\n';
  return level.failed == 0 ? 0 : 1;
}
