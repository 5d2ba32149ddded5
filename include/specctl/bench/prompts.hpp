#pragma once

// Where the benchmark's prompts come from: the seeds' three, a longer built-in
// set, a file, or synthetic text of a chosen length.

#include <specctl/bench/workload.hpp>
#include <specctl/util/error.hpp>

#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::bench {

enum class PromptKind { seeds, long_set, file, synthetic, inline_texts, workload };

struct PromptSource {
  PromptKind kind = PromptKind::seeds;
  // kind file: one prompt per non-empty line; ".jsonl" files hold one JSON
  // string or object with "prompt" (or "text") per line.
  std::string path;
  // kind synthetic: about this many tokens each, `count` different prompts.
  int input_tokens = 0;
  int count = 16;
  // kind inline_texts.
  std::vector<std::string> texts;
  // kind workload: a source of bench/workload.hpp.
  std::optional<WorkloadSpec> workload;

  // "seeds", "long", "file prompts.txt", "synthetic 512 tokens x 16", "3 inline prompts".
  std::string describe() const;
};

// Reads "seeds", "builtin" (the seeds), "long", "synthetic:N" or a file path, as the CLI's --prompts takes them.
std::expected<PromptSource, Error> parse_prompt_source(std::string_view text);

// The three prompts of the seeds' benchmark_eagle3.py.
const std::vector<std::string>& seed_prompts();
// A longer, varied built-in set (explanations, code, analysis, stories).
const std::vector<std::string>& long_prompts();
// Deterministic text of about `input_tokens` tokens, different from the first
// word on so that a server's prefix cache cannot serve one prompt from another.
std::vector<std::string> synthetic_prompts(int input_tokens, int count);

// The requests of any source: a workload source's own, or the texts of the others as
// plain requests (with a provenance naming the source and, for a file, its path, size
// and SHA-256). Errors as load_prompts' and make_workload's.
std::expected<Workload, Error> load_workload(const PromptSource& source);

// Loads the prompts; an unreadable or empty file is an error naming the file and line.
std::expected<std::vector<std::string>, Error> load_prompts(const PromptSource& source);

} // namespace specctl::bench
