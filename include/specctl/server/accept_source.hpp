#pragma once

// Where a benchmark window's speculative accept length comes from, as a
// template says it (`accept_length:`, best source first). Engines count it in
// different places, and a figure names the one it came from.

#include <string>

namespace specctl::server {

struct AcceptSource {
  enum class Kind {
    // Prometheus counters read before and after the window (vLLM):
    // 1 + Δaccepted / Δdrafts, warmup and health checks outside the window left out.
    prometheus,
    // log.metrics lines in the window (SGLang's Decode batch lines), each line's
    // accept length weighted by another metric of the same line: SGLang's accept
    // len is per verify pass, and a line covers `#running-req` passes per step.
    log,
    // What the server returns with each response (llama.cpp's timings):
    // 1 + accepted / verify steps over the window's completed requests.
    responses,
  };
  Kind kind = Kind::log;
  // prometheus: the endpoint and the counters (a "_total" suffix is tried too);
  // `accepted` is the accepted-tokens counter.
  std::string path = "/metrics";
  std::string drafts;
  std::string accepted;
  // log: the log.metrics name of the accept length, and of its weight (empty: each line counts once).
  // With `accepted` (a log.metrics name) instead of a weight, a line's weight is
  // the verify passes it implies, accepted / (accept length - 1): llama.cpp
  // prints per request "(A accepted / ...), mean len = M" with M = 1 + A / passes.
  std::string metric = "accept_length";
  std::string weight;
};

// "prometheus", "log", "responses".
const char* accept_source_name(AcceptSource::Kind kind);

} // namespace specctl::server
