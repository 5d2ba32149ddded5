#pragma once

// Private to src/sim/options*.cpp: specsim's command line as tables of flags.
// Each engine's file (options_sglang.cpp, options_vllm.cpp, options_llamacpp.cpp)
// holds its table and its parse; options.cpp holds the simulation's own flags,
// the argparse loop SGLang and vLLM share, and the choice of engine. A table row
// is data: names, arity, help, and a setter built from a member pointer and a
// parser, so that one flag is one line.

#include <specctl/sim/options.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <expected>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specctl::sim::detail {

enum class Arity { flag, one, many };

// Stores a flag's values (none, one, or a list) in the options; the error is
// the text after "argument --flag: ".
using Apply = std::function<std::optional<std::string>(Options&, std::span<const std::string>)>;

struct FlagSpec {
  std::vector<std::string_view> names;
  Arity arity;
  std::string_view metavar;
  std::string_view help;
  Apply apply;
};
using FlagTable = std::vector<FlagSpec>;
using Tables = std::vector<const FlagTable*>;

// A flag's value read as what it stands for, or argparse's complaint.
template <typename T> using Parsed = std::expected<T, std::string>;

Parsed<int> int_value(std::string_view text);
Parsed<double> float_value(std::string_view text);
Parsed<std::string> text_value(std::string_view text);

// "invalid choice: 'x' (choose from 'a', 'b')".
std::string invalid_choice(std::string_view text, std::span<const char* const> choices);

// The value paired with `text` in a table of choices.
template <typename V, std::size_t N>
Parsed<V> choose(std::string_view text, const std::array<std::pair<const char*, V>, N>& choices) {
  std::array<const char*, N> names{};
  for (std::size_t i = 0; i < N; ++i) {
    if (text == choices[i].first) {
      return choices[i].second;
    }
    names[i] = choices[i].first;
  }
  return std::unexpected(invalid_choice(text, names));
}

// The names of the engines (--sim-engine) and of SGLang's speculative algorithms
// (--speculative-algorithm), which the logs print too.
inline constexpr std::array<std::pair<const char*, Engine>, 3> k_engines{
    {{"sglang", Engine::sglang}, {"vllm", Engine::vllm}, {"llamacpp", Engine::llamacpp}}};
inline constexpr std::array<std::pair<const char*, SpecAlgorithm>, 5> k_spec_algorithms{
    {{"EAGLE", SpecAlgorithm::eagle},
     {"EAGLE3", SpecAlgorithm::eagle3},
     {"NEXTN", SpecAlgorithm::nextn},
     {"STANDALONE", SpecAlgorithm::standalone},
     {"NGRAM", SpecAlgorithm::ngram}}};

// Whether the algorithm drafts with a model of its own, which must then be given.
constexpr bool needs_draft_model(SpecAlgorithm algorithm) {
  return algorithm == SpecAlgorithm::eagle || algorithm == SpecAlgorithm::eagle3 ||
         algorithm == SpecAlgorithm::standalone;
}

// The name paired with `value` in a table of choices, or `fallback`.
template <typename V, std::size_t N>
std::string_view name_of(V value, const std::array<std::pair<const char*, V>, N>& choices, std::string_view fallback) {
  const auto found = std::ranges::find(choices, value, &std::pair<const char*, V>::second);
  return found == choices.end() ? fallback : found->first;
}

// Which part of Options holds a flag's member.
template <typename Group> inline constexpr Group Options::*k_part = nullptr;
template <> inline constexpr ServerArgs Options::*k_part<ServerArgs> = &Options::server;
template <> inline constexpr VllmArgs Options::*k_part<VllmArgs> = &Options::vllm;
template <> inline constexpr LlamaArgs Options::*k_part<LlamaArgs> = &Options::llama;
template <> inline constexpr SimArgs Options::*k_part<SimArgs> = &Options::sim;

// The member a flag sets, in the part of Options that holds it.
template <typename Group, typename T> T& field(Options& o, T Group::*member) {
  return std::invoke(member, o.*k_part<Group>);
}

// Parses the flag's one value with `parse` and stores it in `member`.
template <auto parse, typename Group, typename T> Apply set(T Group::*member) {
  return [member](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
    auto value = parse(v.front());
    if (!value) {
      return value.error();
    }
    field(o, member) = std::move(*value);
    return std::nullopt;
  };
}

// Parses each of the flag's values with `parse` and stores the list in `member`.
template <auto parse, typename Group, typename T> Apply set_list(std::vector<T> Group::*member) {
  return [member](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
    auto& list = field(o, member);
    list.clear();
    for (const auto& text : v) {
      auto value = parse(text);
      if (!value) {
        return value.error();
      }
      list.push_back(std::move(*value));
    }
    return std::nullopt;
  };
}

// A flag without a value that sets `member` to `value`.
template <typename Group, typename T> Apply set_to(T Group::*member, T value) {
  return [member, value](Options& o, std::span<const std::string>) -> std::optional<std::string> {
    field(o, member) = value;
    return std::nullopt;
  };
}

// A value that must be one of `choices`: stored as given, or as what it is paired with.
template <typename Group, std::size_t N>
Apply set_choice(std::string Group::*member, const std::array<const char*, N>& choices) {
  return [member, &choices](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
    if (std::ranges::find(choices, v.front()) == choices.end()) {
      return invalid_choice(v.front(), choices);
    }
    field(o, member) = v.front();
    return std::nullopt;
  };
}
template <typename Group, typename T, typename V, std::size_t N>
Apply set_choice(T Group::*member, const std::array<std::pair<const char*, V>, N>& choices) {
  return [member, &choices](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
    auto value = choose(v.front(), choices);
    if (!value) {
      return value.error();
    }
    field(o, member) = *value;
    return std::nullopt;
  };
}

const FlagSpec* find_flag(const Tables& tables, std::string_view name);

// The `--sim-*` flags, accepted in every personality.
const FlagTable& sim_table();

// How a flag's name with underscores reads: vLLM's FlexibleArgumentParser
// takes "--max_num_seqs" as "--max-num-seqs"; SGLang's argparse does not.
enum class Underscores { as_written, as_dashes };

// SGLang's and vLLM's argparse loop: flags from `tables`; the rest returned,
// as positionals and unrecognized arguments.
std::expected<std::vector<std::string>, ArgError>
parse_argparse(std::span<const std::string> args, const Tables& tables, Options& options, Underscores underscores);
std::unexpected<ArgError> unrecognized(const std::vector<std::string>& extras);
// The options, once SGLang's ServerArgs checks after argparse pass; their
// complaints are phrased like its ValueErrors.
std::expected<Options, ArgError> check_semantics(Options options);

// Each engine's whole command line (without --sim-engine), into `options`.
std::expected<Options, ArgError> parse_sglang(std::span<const std::string> args, Options options);
std::expected<Options, ArgError> parse_vllm(std::span<const std::string> args, Options options);
std::expected<Options, ArgError> parse_llamacpp(std::span<const std::string> args, Options options);

} // namespace specctl::sim::detail
