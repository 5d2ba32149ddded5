#pragma once

// How a benchmark's requests break down: by the workload's categories (the
// spec-decode set's conversation, code, math, ...: speculation accepts several
// times more on some than on others), and by length (the histograms of the
// report). Everything here reads request records; nothing is sent.

#include <specctl/bench/result.hpp>
#include <specctl/bench/workload_spec.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specctl::bench {

// The categories of a workload's requests in the order they first appear; empty
// when none has one.
std::vector<std::string> categories_of(const std::vector<WorkloadRequest>& requests);

// One category's requests of one window.
struct CategoryFigures {
  std::string category;
  int completed = 0;
  int failed = 0;
  // Mean over completed requests of output tokens / E2E seconds: a request's own
  // speed, the single-stream tok/s. Absent when none completed.
  std::optional<double> tok_s;
  // Sums over completed requests of what the server said of each (llama.cpp
  // timings: accepted draft tokens, generated tokens); -1 when none said.
  std::int64_t draft_accepted = -1;
  std::int64_t predicted_tokens = -1;
};

// Per category, in `order` (categories_of the workload) and then any other a record
// names; records without a category are left out. Empty when no record has one.
std::vector<CategoryFigures> category_figures(const std::vector<RequestRecord>& records,
                                              const std::vector<std::string>& order);

// A single-stream benchmark run one category at a time, so that a server that
// counts acceptance only over a window (SGLang's log lines, vLLM's counters) gives
// it per category. A part is what the engine would have sent of that category:
// requests k = 0..runs-1 take prompt k % size, so a part's prompts are the
// category's requests in workload order and `runs` how many picks fell on them.
struct CategoryPart {
  std::string category;
  std::vector<WorkloadRequest> prompts;
  // The part's prompts' positions among the workload's requests.
  std::vector<int> prompt_index;
  int runs = 0;
};
// Empty when the requests have fewer than two categories, or a request has none.
std::vector<CategoryPart> split_by_category(const std::vector<WorkloadRequest>& requests, int runs);

// The parts' results as one single-stream result, as if they had run as one:
// records renumbered in the order they ran, each record's prompt mapped back to its
// position in the workload, start times laid end to end, durations and client costs
// summed, figures recomputed. `ended` is the first part's that did not end normally.
struct SingleStreamPart {
  SingleStreamResult result;
  std::vector<int> prompt_index;
};
SingleStreamResult merge_single_stream(std::vector<SingleStreamPart> parts);

// A histogram of token counts in at most `max_bins` bins of a round width (1, 2, 5
// times a power of ten): bin k counts values in [lo + k width, lo + (k + 1) width).
struct LengthHistogram {
  int lo = 0;
  int width = 1;
  std::vector<int> counts;
};
// nullopt for no values.
std::optional<LengthHistogram> length_histogram(const std::vector<int>& values, int max_bins = 20);

} // namespace specctl::bench
