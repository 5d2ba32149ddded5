// llama.cpp `llama-server` flags (common/arg.cpp) and the way
// common_params_parse_ex reads them: every flag takes one value or none, and
// the first mistake is fatal.

#include "options_tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace specctl::sim {
namespace detail {
namespace {

// common_params_parse_ex runs std::stoi, which reads a leading number; its
// exception text is "stoi".
Parsed<int> llama_int(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end == text.data()) {
    return std::unexpected("stoi");
  }
  return value;
}

Parsed<int> llama_count(std::string_view text) {
  auto value = llama_int(text);
  if (value && *value < 0) {
    return std::unexpected("invalid value");
  }
  return value;
}

// --spec-type: comma-separated common/speculative.cpp type names, added to those given before.
std::optional<std::string> add_spec_types(Options& o, std::span<const std::string> v) {
  constexpr std::array k_types{"none",        "draft-simple",  "draft-eagle3", "draft-mtp",  "ngram-simple",
                               "ngram-map-k", "ngram-map-k4v", "ngram-mod",    "ngram-cache"};
  std::string_view rest = v.front();
  while (true) {
    const auto comma = rest.find(',');
    const std::string type(rest.substr(0, comma));
    if (std::ranges::find(k_types, type) == k_types.end()) {
      return fmt::format("unknown speculative decoding type: {}", type);
    }
    o.llama.spec_types.push_back(type);
    if (comma == std::string_view::npos) {
      return std::nullopt;
    }
    rest.remove_prefix(comma + 1);
  }
}

std::optional<std::string> ignore(Options&, std::span<const std::string>) {
  return std::nullopt;
}

// Removed in 2026 (common/arg.cpp "removed params"): the handler throws.
Apply removed(std::string_view message) {
  return [message](Options&, std::span<const std::string>) -> std::optional<std::string> {
    return fmt::format("the argument has been removed. {}", message);
  };
}

const FlagTable& llama_table() {
  static const FlagTable table{
      {{"-m", "--model"}, Arity::one, "", "", set<text_value>(&ServerArgs::model_path)},
      {{"--host"}, Arity::one, "", "", set<text_value>(&ServerArgs::host)},
      {{"--port"}, Arity::one, "", "", set<llama_int>(&ServerArgs::port)},
      {{"-md", "--model-draft", "--spec-draft-model"}, Arity::one, "", "", set<text_value>(&LlamaArgs::draft_model)},
      {{"--spec-type"}, Arity::one, "", "", add_spec_types},
      {{"--spec-draft-n-max"}, Arity::one, "", "", set<llama_count>(&LlamaArgs::draft_n_max)},
      {{"--spec-draft-n-min"}, Arity::one, "", "", set<llama_int>(&LlamaArgs::draft_n_min)},
      {{"-c", "--ctx-size"}, Arity::one, "", "", set<llama_int>(&LlamaArgs::ctx_size)},
      {{"-np", "--parallel"}, Arity::one, "", "", set<llama_int>(&LlamaArgs::parallel)},
      {{"-t", "--threads"}, Arity::one, "", "", set<llama_int>(&LlamaArgs::threads)},
      // A number, "auto" or "all" (common/arg.cpp); the CPU simulation ignores it.
      {{"-ngl", "--gpu-layers", "--n-gpu-layers"}, Arity::one, "", "", ignore},
      {{"--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"}, Arity::one, "", "", ignore},
      {{"-a", "--alias"}, Arity::one, "", "", set<text_value>(&LlamaArgs::alias)},
      {{"-fa", "--flash-attn"}, Arity::one, "", "", ignore},
      {{"-b", "--batch-size"}, Arity::one, "", "", ignore},
      {{"-ub", "--ubatch-size"}, Arity::one, "", "", ignore},
      {{"--cache-reuse"}, Arity::one, "", "", ignore},
      {{"--metrics"}, Arity::flag, "", "", set_to(&LlamaArgs::metrics, true)},
      {{"--no-warmup"}, Arity::flag, "", "", set_to(&LlamaArgs::warmup, false)},
      {{"--cache-prompt"}, Arity::flag, "", "", set_to(&LlamaArgs::cache_prompt, true)},
      {{"--no-cache-prompt"}, Arity::flag, "", "", set_to(&LlamaArgs::cache_prompt, false)},
      {{"-cram", "--cache-ram"}, Arity::one, "", "", set<llama_int>(&LlamaArgs::cache_ram_mib)},
      {{"--jinja"}, Arity::flag, "", "", ignore},
      {{"--no-webui", "--no-ui"}, Arity::flag, "", "", ignore},
      {{"-cb", "--cont-batching"}, Arity::flag, "", "", ignore},
      {{"-nocb", "--no-cont-batching"}, Arity::flag, "", "", ignore},
      {{"-kvu", "--kv-unified"}, Arity::flag, "", "", ignore},
      {{"--draft", "--draft-n", "--draft-max"},
       Arity::one,
       "",
       "",
       removed("use --spec-draft-n-max or --spec-ngram-mod-n-max")},
      {{"--draft-min", "--draft-n-min"},
       Arity::one,
       "",
       "",
       removed("use --spec-draft-n-min or --spec-ngram-mod-n-min")},
  };
  return table;
}

// The usage block common_params_parse_ex appends (opt.to_string(), abridged to
// the flag names and the help of the removed flags).
std::string llama_usage(const FlagSpec& flag, std::string_view name) {
  std::string names;
  for (auto n : flag.names) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", n);
  }
  if (name.starts_with("--draft")) {
    const bool min = name.find("min") != std::string_view::npos;
    return fmt::format("{} N{}the argument has been removed. use --spec-draft-n-{} or --spec-ngram-mod-n-{}", names,
                       std::string(std::max<std::size_t>(2, 40 - names.size() - 2), ' '), min ? "min" : "max",
                       min ? "min" : "max");
  }
  return names + (flag.arity == Arity::flag ? "" : " N");
}

// common_params_parse_ex: "--foo_bar" reads as "--foo-bar"; an unknown
// argument is "error: invalid argument: X"; a handler's exception becomes
// "error while handling argument ...". Every error exits 1 (server.cpp).
std::expected<void, ArgError> parse_flags(std::span<const std::string> args, Options& options) {
  const auto fail = [](std::string message) {
    return std::unexpected(ArgError{std::move(message), ArgStyle::llamacpp});
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.starts_with("--")) {
      std::ranges::replace(arg, '_', '-');
    }
    if (arg == "-h" || arg == "--help" || arg == "--usage") {
      options.help = true;
      return {};
    }
    const bool sim = arg.starts_with("--sim-");
    const FlagSpec* flag = find_flag({sim ? &sim_table() : &llama_table()}, arg);
    if (flag == nullptr) {
      return fail(fmt::format("error: invalid argument: {}", arg));
    }
    std::string value;
    std::optional<std::string> error;
    if (flag->arity != Arity::flag) {
      if (i + 1 >= args.size()) {
        error = "expected value for argument";
      } else {
        value = args[++i];
      }
    }
    if (!error) {
      error = flag->apply(options, std::span(&value, 1));
    }
    if (error && sim) {
      return fail(fmt::format("error while handling argument \"{}\": {}", arg, *error));
    }
    if (error) {
      return fail(fmt::format("error while handling argument \"{}\": {}\n\nusage:\n{}\n\nto show complete usage, run "
                              "with -h",
                              arg, *error, llama_usage(*flag, arg)));
    }
  }
  return {};
}

} // namespace

std::expected<Options, ArgError> parse_llamacpp(std::span<const std::string> args, Options options) {
  // llama-server's defaults (common/common.h): 127.0.0.1:8080.
  options.server.port = 8080;
  if (auto parsed = parse_flags(args, options); !parsed) {
    return std::unexpected(parsed.error());
  }
  if (options.help) {
    return options;
  }
  if (options.server.model_path.empty()) {
    // common.h's DEFAULT_MODEL_PATH, which then fails to open like any missing file.
    options.server.model_path = "models/7B/ggml-model-f16.gguf";
  }
  if (options.server.port < 0 || options.server.port > 65535) {
    return std::unexpected(ArgError{fmt::format("error: invalid port: {}", options.server.port), ArgStyle::llamacpp});
  }
  if (options.llama.parallel < 1) {
    options.llama.parallel = 4;
  }
  if (options.llama.speculates()) {
    options.server.speculative_algorithm = SpecAlgorithm::standalone;
    options.server.speculative_draft_model_path = options.llama.draft_model;
    options.server.speculative_num_steps = options.llama.draft_n_max;
    options.server.speculative_eagle_topk = 1;
    options.server.speculative_num_draft_tokens = options.llama.draft_n_max + 1;
  }
  return options;
}

} // namespace detail

bool LlamaArgs::speculates() const {
  return !draft_model.empty() && draft_n_max > 0 && std::ranges::find(spec_types, "draft-simple") != spec_types.end();
}

} // namespace specctl::sim
