#pragma once

// Workloads: the requests a benchmark sends, drawn from the sources inference
// engineers compare on (vLLM's and SGLang's bench_serving: ShareGPT, JSONL, random,
// generated shared prefix) and a built-in per-category prompt set for speculative
// decoding. Every source is seeded and reproducible: the same spec and seed give
// byte-identical requests on any machine, because every draw is std::mt19937_64
// (whose output the standard fixes) through this file's own bounded draw and
// Fisher-Yates shuffle, never the standard distributions (whose results differ
// between standard libraries). Nothing here does network I/O.

#include <specctl/bench/workload_spec.hpp>
#include <specctl/util/error.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace specctl::bench {

// What a colleague needs to rerun exactly the same requests.
struct Provenance {
  std::string source{}; // "sharegpt", "jsonl", "random", "shared_prefix", "specdec"
  std::string path{};   // the dataset file; empty for generated sources
  std::uintmax_t size = 0;
  std::string sha256{};
  std::uint64_t seed = 0;
  // How many items the source offered before filtering and sampling.
  std::size_t available = 0;
  // The options applied, and for datasets how many items were dropped for each reason.
  nlohmann::ordered_json filters = nlohmann::ordered_json::object();
  // The drawn requests' ids, in the order they are sent.
  std::vector<std::string> ids{};

  // {"source", "path", "size", "sha256" (the last three for files only), "seed",
  // "available", "filters", "ids"}.
  nlohmann::ordered_json to_json() const;
};

struct Workload {
  std::vector<WorkloadRequest> requests{};
  Provenance provenance{};
  // Things the user should know that are not errors (the first malformed item of a
  // dataset, lengths that are only estimates).
  std::vector<std::string> notes{};
};

// A tokenizer-free estimate of a text's length in tokens: each run of ASCII letters
// counts one token per started 6 letters, each run of digits one per started 3
// (tokenizers of the Llama 3 and GPT-4 families split numbers in groups of 3), each
// run of other non-ASCII bytes one per started 3 bytes (about one per CJK
// character), each other visible character (punctuation) one, and whitespace nothing
// (BPE merges a space into the next word). For English prose that is about one token
// per 4 to 5 bytes, close to what BPE tokenizers produce. It only filters datasets
// and sizes generated text: the run calibrates real lengths against the server
// (calibrate()), which holds the one tokenizer that counts.
int estimate_tokens(std::string_view text);

// A uniform draw in [0, bound) from the generator by rejection, the same on every
// standard library (unlike std::uniform_int_distribution). bound must be > 0.
std::uint64_t draw_below(std::mt19937_64& rng, std::uint64_t bound);

// Fisher-Yates from the last element down, with draw_below (unlike std::shuffle, the
// same permutation on every standard library).
template <class T> void shuffle_portably(std::vector<T>& items, std::mt19937_64& rng) {
  for (std::size_t i = items.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(draw_below(rng, i));
    std::swap(items[i - 1], items[j]);
  }
}

// Texts as requests of their own (ids "1", "2", ...), for the sources that are a list of
// prompts (the seeds', the long set, a file of lines, inline texts, synthetic text).
std::vector<WorkloadRequest> plain_requests(const std::vector<std::string>& texts);

// A request as the host-side benchmark job receives it, and back.
nlohmann::json request_to_json(const WorkloadRequest& request);
// Throws specctl::Error (bad_input) naming the field that is missing or of the wrong type.
WorkloadRequest request_from_json(const nlohmann::json& j);

// Each returns the requests in the order they are sent, or an ErrorKind::bad_input
// error of one line naming the file (and line or item where it applies).
std::expected<Workload, Error> make_workload(const ShareGptSpec& spec);
std::expected<Workload, Error> make_workload(const JsonlSpec& spec);
std::expected<Workload, Error> make_workload(const RandomSpec& spec);
std::expected<Workload, Error> make_workload(const SharedPrefixSpec& spec);
std::expected<Workload, Error> make_workload(const SpecDecSpec& spec);
std::expected<Workload, Error> make_workload(const WorkloadSpec& spec);

// The same source drawn with its seed plus `offset`: fresh requests of the same
// shape, for a level or repeat that must not find the last one's prompts in the
// server's prefix cache.
WorkloadSpec with_seed_offset(WorkloadSpec spec, std::uint64_t offset);

// conversation, code, math, summarisation, translation, reasoning, extraction, writing.
const std::vector<std::string>& specdec_categories();

// One line for plans and logs, before anything is read:
// "sharegpt data/sg.json: 200 conversations (seed 0)".
std::string describe(const WorkloadSpec& spec);
// One line once loaded, with what the source offered:
// "sharegpt data/sg.json: 200 of 9,412 conversations (seed 0)".
std::string describe(const Workload& workload);

// What the requests ask to generate: "512 tokens" (max_tokens for every request), or
// "16-1024 tokens (each request its own)" where requests carry their own lengths.
std::string describe_output(const std::vector<WorkloadRequest>& requests, int max_tokens);
// The most output tokens any request asks for (max_tokens for one without its own).
int longest_output(const std::vector<WorkloadRequest>& requests, int max_tokens);

// Counts a prompt's tokens the way the server will (its /tokenize, or a max_tokens: 1
// request's usage.prompt_tokens).
using TokenCounter = std::function<std::expected<int, Error>(const std::string&)>;

// Brings a text request's prompt within `tolerance` tokens of `target_tokens` by
// trimming words from its end or appending words of the generators' vocabulary (drawn
// from a generator seeded by the request's id, so it is reproducible). It counts the
// prompt as it is, then corrects by the measured tokens per word, then steps a word
// at a time, at most k_calibration_calls counts in all; it never changes the first
// shared_bytes bytes. Returns how many counts it made, or an error naming the target
// and the last count (a counter's own error is passed on).
inline constexpr int k_calibration_calls = 8;
std::expected<int, Error> calibrate(WorkloadRequest& request, int target_tokens, const TokenCounter& count_tokens,
                                    int tolerance = 1);

} // namespace specctl::bench
