// specsim's command line: the choice of engine, the simulation's own flags and
// the argparse loop that SGLang and vLLM share. Each engine's flags are in
// options_<engine>.cpp.

#include "options_tables.hpp"

#include <specctl/sim/perf_model.hpp>
#include <specctl/util/duration.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

namespace specctl::sim {
namespace detail {
namespace {

constexpr std::array<std::pair<const char*, bool>, 2> k_loaders{{{"multi-thread", false}, {"single-thread", true}}};

Parsed<double> positive_value(std::string_view text) {
  auto value = float_value(text);
  if (value && (!std::isfinite(*value) || *value <= 0.0)) {
    return std::unexpected(fmt::format("must be a positive number, got '{}'", text));
  }
  return value;
}

Parsed<std::string> profile_value(std::string_view text) {
  if (find_profile(text) == nullptr) {
    std::vector<const char*> names;
    for (const auto& p : profiles()) {
      names.push_back(p.name);
    }
    return std::unexpected(invalid_choice(text, names));
  }
  return std::string(text);
}

Parsed<std::uint64_t> seed_value(std::string_view text) {
  std::uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
    return std::unexpected(fmt::format("invalid int value: '{}'", text));
  }
  return seed;
}

std::optional<std::string> add_fault(Options& o, std::span<const std::string> v) {
  auto fault = parse_fault(v.front());
  if (!fault) {
    return fault.error();
  }
  auto faults = o.sim.faults.all();
  faults.push_back(*fault);
  o.sim.faults = FaultSet(std::move(faults));
  return std::nullopt;
}

std::string joined_names(const FlagSpec& spec) {
  std::string out;
  for (auto name : spec.names) {
    out += fmt::format("{}{}", out.empty() ? "" : "/", name);
  }
  return out;
}

// A token is an option when it starts with '-' and is not a negative number,
// as argparse decides when the parser has no negative-number-like options.
bool looks_like_option(std::string_view token) {
  if (token.size() < 2 || token.front() != '-') {
    return false;
  }
  const char second = token[1];
  return !(std::isdigit(static_cast<unsigned char>(second)) || second == '.');
}

} // namespace

Parsed<int> int_value(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
  }
  int value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) {
    return std::unexpected(fmt::format("invalid int value: '{}'", text));
  }
  return value;
}

Parsed<double> float_value(std::string_view text) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
    return std::unexpected(fmt::format("invalid float value: '{}'", text));
  }
  return value;
}

Parsed<std::string> text_value(std::string_view text) {
  return std::string(text);
}

std::string invalid_choice(std::string_view text, std::span<const char* const> choices) {
  std::string quoted;
  for (const char* choice : choices) {
    quoted += fmt::format("{}'{}'", quoted.empty() ? "" : ", ", choice);
  }
  return fmt::format("invalid choice: '{}' (choose from {})", text, quoted);
}

const FlagSpec* find_flag(const Tables& tables, std::string_view name) {
  for (const auto* table : tables) {
    for (const auto& spec : *table) {
      if (std::ranges::find(spec.names, name) != spec.names.end()) {
        return &spec;
      }
    }
  }
  return nullptr;
}

const FlagTable& sim_table() {
  static const FlagTable table{
      {{"--sim-load-time"},
       Arity::one,
       "DURATION",
       "specsim: model load time before the port opens (default 5s; 90s, 15m, bare seconds).",
       set<util::parse_duration>(&SimArgs::load_time)},
      {{"--sim-prefix-cache-tokens"},
       Arity::one,
       "TOKENS",
       "specsim: the prefix cache's capacity in tokens (default: the KV cache's).",
       set<int_value>(&SimArgs::prefix_cache_tokens)},
      {{"--sim-speed"},
       Arity::one,
       "FACTOR",
       "specsim: divide every simulated duration by FACTOR (default 1).",
       set<positive_value>(&SimArgs::speed)},
      {{"--sim-profile"},
       Arity::one,
       "NAME",
       "specsim: performance profile (default, flood).",
       set<profile_value>(&SimArgs::profile)},
      {{"--sim-fault"},
       Arity::one,
       "KIND[:ARG]",
       "specsim: stage a fault (repeatable); see docs/specsim.md.",
       add_fault},
      {{"--sim-loader"},
       Arity::one,
       "{multi-thread,single-thread}",
       "specsim: which SGLang weight loader's tqdm bar to print (default multi-thread).",
       set_choice(&SimArgs::single_thread_loader, k_loaders)},
      {{"--sim-gpu-dir"},
       Arity::one,
       "DIR",
       "specsim: fake GPU state directory (default $SPECSIM_GPU_DIR, then $TMPDIR/specsim-gpus-UID).",
       set<text_value>(&SimArgs::gpu_dir)},
      {{"--sim-seed"},
       Arity::one,
       "N",
       "specsim: seed of the simulated randomness (default 0).",
       set<seed_value>(&SimArgs::seed)},
  };
  return table;
}

std::expected<std::vector<std::string>, ArgError>
parse_argparse(std::span<const std::string> args, const Tables& tables, Options& options, Underscores underscores) {
  std::vector<std::string> extras;
  bool positional_only = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (positional_only || !looks_like_option(token)) {
      extras.push_back(token);
      continue;
    }
    if (token == "--") {
      positional_only = true;
      continue;
    }
    if (token == "-h" || token == "--help") {
      options.help = true;
      return extras;
    }
    const auto equals = token.starts_with("--") ? token.find('=') : std::string::npos;
    std::string name = token.substr(0, equals);
    if (underscores == Underscores::as_dashes && name.starts_with("--")) {
      std::ranges::replace(name, '_', '-');
    }
    const FlagSpec* spec = find_flag(tables, name);
    if (spec == nullptr) {
      extras.push_back(token);
      continue;
    }
    std::vector<std::string> values;
    if (equals != std::string::npos) {
      values.push_back(token.substr(equals + 1));
    }
    if (spec->arity == Arity::flag && !values.empty()) {
      return std::unexpected(
          ArgError{fmt::format("argument {}: ignored explicit argument '{}'", joined_names(*spec), values.front())});
    }
    if (spec->arity == Arity::one && values.empty()) {
      // A JSON value starts with '{', never '-': only a following flag is missing the value.
      if (i + 1 >= args.size() || looks_like_option(args[i + 1])) {
        return std::unexpected(ArgError{fmt::format("argument {}: expected one argument", joined_names(*spec))});
      }
      values.push_back(args[++i]);
    }
    if (spec->arity == Arity::many && values.empty()) {
      while (i + 1 < args.size() && !looks_like_option(args[i + 1])) {
        values.push_back(args[++i]);
      }
      if (values.empty()) {
        return std::unexpected(
            ArgError{fmt::format("argument {}: expected at least one argument", joined_names(*spec))});
      }
    }
    if (auto error = spec->apply(options, values)) {
      return std::unexpected(ArgError{fmt::format("argument {}: {}", joined_names(*spec), *error)});
    }
  }
  return extras;
}

std::unexpected<ArgError> unrecognized(const std::vector<std::string>& extras) {
  std::string joined;
  for (const auto& extra : extras) {
    joined += fmt::format("{}{}", joined.empty() ? "" : " ", extra);
  }
  return std::unexpected(ArgError{fmt::format("unrecognized arguments: {}", joined)});
}

std::expected<Options, ArgError> check_semantics(Options options) {
  const auto& s = options.server;
  const auto fail = [](std::string message) { return std::unexpected(ArgError{std::move(message)}); };
  if (s.port < 1 || s.port > 65535) {
    return fail(fmt::format("argument --port: {} is not a valid port (1-65535)", s.port));
  }
  if (s.tp_size < 1) {
    return fail(fmt::format("argument --tp-size/--tensor-parallel-size: must be at least 1, got {}", s.tp_size));
  }
  if (s.cuda_graph_max_bs && *s.cuda_graph_max_bs < 1) {
    return fail(fmt::format("argument --cuda-graph-max-bs: must be at least 1, got {}", *s.cuda_graph_max_bs));
  }
  if (std::ranges::any_of(s.cuda_graph_bs, [](int bs) { return bs < 1; })) {
    return fail("argument --cuda-graph-bs: batch sizes must be at least 1");
  }
  if (s.mem_fraction_static && (*s.mem_fraction_static <= 0.0 || *s.mem_fraction_static > 1.0)) {
    return fail(fmt::format("argument --mem-fraction-static: must be in (0, 1], got {}", *s.mem_fraction_static));
  }
  if (s.decode_log_interval < 1) {
    return fail(fmt::format("argument --decode-log-interval: must be at least 1, got {}", s.decode_log_interval));
  }
  const int given = int{s.speculative_num_steps.has_value()} + int{s.speculative_eagle_topk.has_value()} +
                    int{s.speculative_num_draft_tokens.has_value()};
  if (given != 0 && given != 3) {
    return fail("--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens must be set "
                "together, or none of them");
  }
  if (given != 0 && s.speculative_algorithm == SpecAlgorithm::none) {
    return fail("--speculative-num-steps and friends need --speculative-algorithm");
  }
  if (given == 3 &&
      (*s.speculative_num_steps < 1 || *s.speculative_eagle_topk < 1 || *s.speculative_num_draft_tokens < 1)) {
    return fail(
        "--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens must be at least 1");
  }
  if (needs_draft_model(s.speculative_algorithm) && s.speculative_draft_model_path.empty()) {
    return fail(fmt::format("--speculative-draft-model-path is required with --speculative-algorithm {}",
                            spec_algorithm_name(s.speculative_algorithm)));
  }
  return options;
}

} // namespace detail

std::string_view spec_algorithm_name(SpecAlgorithm algorithm) {
  return detail::name_of(algorithm, detail::k_spec_algorithms, "None");
}

std::string_view engine_name(Engine engine) {
  return detail::name_of(engine, detail::k_engines, "sglang");
}

std::expected<Options, ArgError> parse_args(std::span<const std::string> all_args) {
  Options options;
  // --sim-engine first: it decides how everything else is read.
  std::vector<std::string> args;
  for (std::size_t i = 0; i < all_args.size(); ++i) {
    const std::string& token = all_args[i];
    std::optional<std::string> value;
    if (token == "--sim-engine") {
      if (i + 1 >= all_args.size()) {
        return std::unexpected(ArgError{"argument --sim-engine: expected one argument"});
      }
      value = all_args[++i];
    } else if (token.starts_with("--sim-engine=")) {
      value = token.substr(std::string_view("--sim-engine=").size());
    } else {
      args.push_back(token);
      continue;
    }
    auto engine = detail::choose(*value, detail::k_engines);
    if (!engine) {
      return std::unexpected(ArgError{fmt::format("argument --sim-engine: {}", engine.error())});
    }
    options.engine = *engine;
  }
  switch (options.engine) {
  case Engine::vllm:
    return detail::parse_vllm(args, std::move(options));
  case Engine::llamacpp:
    return detail::parse_llamacpp(args, std::move(options));
  case Engine::sglang:
    break;
  }
  return detail::parse_sglang(args, std::move(options));
}

} // namespace specctl::sim
