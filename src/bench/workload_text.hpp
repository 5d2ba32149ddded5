#pragma once

// What the workload sources share and nothing outside bench/ needs: the word
// vocabulary of generated text, distinct prompt beginnings, and error and number
// formatting.

#include <specctl/bench/workload.hpp>
#include <specctl/util/error.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::bench::workload_detail {

// Common English words of at most 6 letters: most tokenizers keep each, with its
// leading space, as one token, and estimate_tokens() counts each as one, so N words
// make about N tokens.
std::span<const std::string_view> vocabulary();

// `count` words drawn from the vocabulary, separated by single spaces.
std::string random_words(std::mt19937_64& rng, int count);

// Gives every prompt of a set a different beginning, so that a server's prefix
// cache cannot serve one prompt from another: index i is written in base V (the
// vocabulary's size) with digits spelled as words of a seeded permutation.
class DistinctStarts {
public:
  DistinctStarts(std::mt19937_64& rng, std::size_t count);
  // How many words each beginning takes (the base-V digits of count - 1, at least 1).
  int words() const { return m_digits; }
  // The first min(limit, words()) words of beginning `index`.
  std::string start(std::size_t index, int limit) const;

private:
  std::vector<std::size_t> m_permutation;
  int m_digits = 1;
};

// A prompt of `words` words: its distinct beginning, then random words.
std::string distinct_text(const DistinctStarts& starts, std::size_t index, int words, std::mt19937_64& rng);

// 9412 -> "9,412": counts in one-line descriptions.
std::string with_commas(std::uint64_t value);

// One category of the built-in spec-decode prompt set (workload_specdec_text.cpp).
inline constexpr std::size_t k_specdec_per_category = 10;
struct SpecDecCategory {
  std::string_view name;
  std::array<std::string_view, k_specdec_per_category> prompts;
};
std::span<const SpecDecCategory> specdec_set();

// The requests in the order they are sent, with the provenance every source shares:
// where they came from, the seed, how many the source offered, and their ids.
Workload workload_of(std::string source, std::uint64_t seed, std::size_t available,
                     std::vector<WorkloadRequest> requests);

inline Error bad_input(std::string message) {
  return Error(std::move(message), ErrorKind::bad_input);
}

} // namespace specctl::bench::workload_detail
