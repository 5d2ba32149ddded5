#include <specctl/bench/workload.hpp>

#include "workload_text.hpp"

#include <fmt/format.h>

#include <cmath>

namespace specctl::bench {

using workload_detail::bad_input;
using workload_detail::distinct_text;
using workload_detail::DistinctStarts;
using workload_detail::random_words;

namespace {

// Generated text is capped so that a typo (input_tokens: 10000000) is an error, not
// gigabytes of prompts.
constexpr int k_max_generated_tokens = 1 << 20;
constexpr int k_max_generated_requests = 1 << 20;

std::expected<void, Error> check_range(std::string_view source, std::string_view field, long long value, long long low,
                                       long long high) {
  if (value < low || value > high) {
    return std::unexpected(
        bad_input(fmt::format("{}: {} must be in [{}, {}], not {}", source, field, low, high, value)));
  }
  return {};
}

struct Range {
  int low;
  int high;
};

// vLLM's RandomDataset.get_sampling_params: floor below, ceil above.
Range length_range(int length, double ratio, int minimum) {
  const auto low = static_cast<int>(std::floor(length * (1.0 - ratio)));
  const auto high = static_cast<int>(std::ceil(length * (1.0 + ratio)));
  return {std::max(low, minimum), std::max(high, minimum)};
}

int draw_in(std::mt19937_64& rng, Range range) {
  return range.low + static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(range.high - range.low) + 1));
}

} // namespace

std::expected<Workload, Error> make_workload(const RandomSpec& spec) {
  for (const auto& check : {check_range("random", "num_prompts", spec.num_prompts, 1, k_max_generated_requests),
                            check_range("random", "input_tokens", spec.input_tokens, 1, k_max_generated_tokens),
                            check_range("random", "output_tokens", spec.output_tokens, 1, k_max_generated_tokens),
                            check_range("random", "prefix_tokens", spec.prefix_tokens, 0, k_max_generated_tokens)}) {
    if (!check) {
      return std::unexpected(check.error());
    }
  }
  if (!(spec.range_ratio >= 0.0 && spec.range_ratio < 1.0)) {
    return std::unexpected(bad_input(fmt::format("random: range_ratio must be in [0, 1), not {}", spec.range_ratio)));
  }
  const Range input = length_range(spec.input_tokens, spec.range_ratio, 0);
  const Range output = length_range(spec.output_tokens, spec.range_ratio, 1);
  if (input.low + spec.prefix_tokens < 1) {
    return std::unexpected(bad_input(fmt::format("random: input_tokens {} with range_ratio {} can draw an empty "
                                                 "prompt: raise input_tokens or prefix_tokens, or lower range_ratio",
                                                 spec.input_tokens, spec.range_ratio)));
  }

  // The order of the draws is fixed (as vLLM's: every input length, every output
  // length, then the text) so that a request's lengths do not depend on the text.
  std::mt19937_64 rng(spec.seed);
  const auto count = static_cast<std::size_t>(spec.num_prompts);
  std::vector<int> inputs(count);
  std::vector<int> outputs(count);
  for (int& length : inputs) {
    length = draw_in(rng, input);
  }
  for (int& length : outputs) {
    length = draw_in(rng, output);
  }
  const std::string prefix = random_words(rng, spec.prefix_tokens);
  const DistinctStarts starts(rng, count);

  std::vector<WorkloadRequest> requests;
  for (std::size_t i = 0; i < count; ++i) {
    WorkloadRequest request;
    request.id = fmt::format("random:{}", i);
    const std::string own = distinct_text(starts, i, inputs[i], rng);
    request.prompt = prefix.empty() ? own : own.empty() ? prefix : prefix + ' ' + own;
    request.shared_bytes = prefix.empty() ? 0 : prefix.size() + (own.empty() ? 0 : 1);
    request.input_tokens = spec.prefix_tokens + inputs[i];
    request.output_tokens = outputs[i];
    requests.push_back(std::move(request));
  }
  Workload workload = workload_detail::workload_of("random", spec.seed, count, std::move(requests));
  auto& filters = workload.provenance.filters;
  filters = {{"input_tokens", spec.input_tokens},      {"output_tokens", spec.output_tokens},
             {"range_ratio", spec.range_ratio},        {"prefix_tokens", spec.prefix_tokens},
             {"input_range", {input.low, input.high}}, {"output_range", {output.low, output.high}}};
  if (starts.words() > 1 && input.low < starts.words()) {
    workload.notes.push_back(fmt::format("random: prompts shorter than {} words may begin alike", starts.words()));
  }
  return workload;
}

std::expected<Workload, Error> make_workload(const SharedPrefixSpec& spec) {
  for (const auto& check :
       {check_range("shared_prefix", "groups", spec.groups, 1, k_max_generated_requests),
        check_range("shared_prefix", "per_group", spec.per_group, 1, k_max_generated_requests),
        check_range("shared_prefix", "groups x per_group", static_cast<long long>(spec.groups) * spec.per_group, 1,
                    k_max_generated_requests),
        check_range("shared_prefix", "system_tokens", spec.system_tokens, 1, k_max_generated_tokens),
        check_range("shared_prefix", "question_tokens", spec.question_tokens, 1, k_max_generated_tokens),
        check_range("shared_prefix", "output_tokens", spec.output_tokens, 1, k_max_generated_tokens)}) {
    if (!check) {
      return std::unexpected(check.error());
    }
  }
  std::mt19937_64 rng(spec.seed);
  const auto groups = static_cast<std::size_t>(spec.groups);
  const auto per_group = static_cast<std::size_t>(spec.per_group);
  // Every system prompt begins differently from the others, and so does every
  // question after its system prompt: a group shares exactly its system prompt.
  const DistinctStarts system_starts(rng, groups);
  const DistinctStarts question_starts(rng, groups * per_group);
  std::vector<std::string> systems;
  for (std::size_t g = 0; g < groups; ++g) {
    systems.push_back(distinct_text(system_starts, g, spec.system_tokens, rng));
  }
  std::vector<WorkloadRequest> requests;
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t p = 0; p < per_group; ++p) {
      WorkloadRequest request;
      request.id = fmt::format("gsp:{}:{}", g, p);
      // SGLang's sample_generated_shared_prefix_requests: f"{system_prompt}\n\n{question}".
      request.prompt =
          systems[g] + "\n\n" + distinct_text(question_starts, g * per_group + p, spec.question_tokens, rng);
      request.shared_bytes = systems[g].size() + 2;
      request.input_tokens = spec.system_tokens + spec.question_tokens;
      request.output_tokens = spec.output_tokens;
      request.group = static_cast<int>(g);
      requests.push_back(std::move(request));
    }
  }
  if (spec.order == SharedPrefixSpec::Order::shuffled) {
    shuffle_portably(requests, rng);
  }

  const std::size_t available = requests.size();
  Workload workload = workload_detail::workload_of("shared_prefix", spec.seed, available, std::move(requests));
  auto& filters = workload.provenance.filters;
  filters = {{"groups", spec.groups},
             {"per_group", spec.per_group},
             {"system_tokens", spec.system_tokens},
             {"question_tokens", spec.question_tokens},
             {"output_tokens", spec.output_tokens},
             {"order", spec.order == SharedPrefixSpec::Order::shuffled ? "shuffled" : "grouped"}};
  if (question_starts.words() > spec.question_tokens) {
    workload.notes.push_back(
        fmt::format("shared_prefix: questions shorter than {} words may begin alike", question_starts.words()));
  }
  return workload;
}

} // namespace specctl::bench
