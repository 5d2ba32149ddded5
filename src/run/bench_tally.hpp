#pragma once

// Private to src/run: what a built-in benchmark gathers over its levels while
// variant_bench.cpp (single stream) and variant_levels.cpp (concurrency and rate)
// run them, for its result entry and requests-BENCH.jsonl.

#include "run_context.hpp"
#include "server_watch.hpp"

#include <specctl/bench/result.hpp>
#include <specctl/bench/workload.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specctl::run::detail {

// Sums over a benchmark's levels of what its requests say about the figures:
// prompt tokens served from the prefix cache, and drafts accepted on repeats.
struct Honesty {
  std::int64_t prompt_tokens = -1;
  std::int64_t cached_tokens = -1;
  // Without their chunks: the acceptance check needs only the server's counts.
  std::vector<bench::RequestRecord> records;
  bool shared_on_purpose = false;

  void workload(const std::vector<bench::WorkloadRequest>& requests);
  // Takes the level's records (its results are written by then).
  void add(bench::LevelResult& level);
  // Histograms of the prompt tokens the server counted and the tokens it served,
  // over the completed requests of every level.
  ordered lengths() const;
  std::vector<std::string> flags(std::string_view benchmark) const;
};

// The first failure of a level: "connection refused (connect x 3)".
std::string first_error(const bench::LevelResult& level);

// Appends a line of requests-BENCH.jsonl for each of the level's records.
void requests_jsonl(const bench::LevelResult& level, std::string_view phase, std::string& out);

struct BenchTally {
  int completed = 0;
  int failed = 0;
  std::string why_failed;
  bool interrupted = false;
  // The lines of requests-BENCH.jsonl.
  std::string requests;
  // Where the server died, when it did: what ran then, and how.
  std::optional<std::pair<std::string, ServerWatch::Death>> died;
  // What the benchmark's requests say of the figures' honesty, over all its levels.
  Honesty honesty;
  // The workload's categories, and each one's accept length from a window of its own.
  std::vector<std::string> categories;
  ordered accepts = ordered::object();

  // A level's counts, and its failure when nothing of it completed.
  void count(const bench::LevelResult& level) {
    completed += level.completed;
    failed += level.failed;
    if (level.completed == 0 && why_failed.empty()) {
      why_failed = first_error(level);
    }
  }
};

} // namespace specctl::run::detail
