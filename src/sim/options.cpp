#include <specctl/sim/options.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/util/duration.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>

namespace specctl::sim {
namespace {

enum class Arity { flag, one, many };

using Apply = std::function<std::optional<std::string>(Options&, std::span<const std::string>)>;

struct FlagSpec {
  std::vector<std::string_view> names;
  Arity arity;
  std::string_view metavar;
  std::string_view help;
  Apply apply;
};

constexpr std::array k_attention_backends{
    "aiter",    "ascend",         "cutlass_mla", "dual_chunk_flash_attn", "fa3",        "fa4",        "flashinfer",
    "flashmla", "flex_attention", "intel_amx",   "torch_native",          "trtllm_mha", "trtllm_mla", "triton",
    "wave"};
constexpr std::array k_spec_algorithms{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"};
constexpr std::array k_log_levels{"debug", "info", "warning", "error", "critical"};

std::string quoted_choices(std::span<const char* const> choices) {
  std::string out;
  for (const char* choice : choices) {
    out += fmt::format("{}'{}'", out.empty() ? "" : ", ", choice);
  }
  return out;
}

std::optional<std::string> to_int(std::string_view text, int& out) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
  }
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) {
    return fmt::format("invalid int value: '{}'", text);
  }
  return std::nullopt;
}

std::optional<std::string> to_float(std::string_view text, double& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
    return fmt::format("invalid float value: '{}'", text);
  }
  return std::nullopt;
}

std::optional<std::string> to_choice(std::string_view text, std::span<const char* const> choices) {
  if (std::ranges::find(choices, text) == choices.end()) {
    return fmt::format("invalid choice: '{}' (choose from {})", text, quoted_choices(choices));
  }
  return std::nullopt;
}

Apply set_flag(bool ServerArgs::*member) {
  return [member](Options& o, std::span<const std::string>) -> std::optional<std::string> {
    o.server.*member = true;
    return std::nullopt;
  };
}

Apply set_string(std::string ServerArgs::*member) {
  return [member](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
    o.server.*member = v.front();
    return std::nullopt;
  };
}

template <typename Member> Apply set_int(Member member) {
  return [member](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
    int value = 0;
    if (auto error = to_int(v.front(), value)) {
      return error;
    }
    o.server.*member = value;
    return std::nullopt;
  };
}

const std::vector<FlagSpec>& flag_table() {
  static const std::vector<FlagSpec> table = [] {
    std::vector<FlagSpec> t;
    t.push_back({{"--model-path", "--model"},
                 Arity::one,
                 "MODEL_PATH",
                 "The path of the model weights.",
                 set_string(&ServerArgs::model_path)});
    t.push_back({{"--host"}, Arity::one, "HOST", "The host of the HTTP server.", set_string(&ServerArgs::host)});
    t.push_back({{"--port"}, Arity::one, "PORT", "The port of the HTTP server.", set_int(&ServerArgs::port)});
    t.push_back({{"--tp-size", "--tensor-parallel-size"},
                 Arity::one,
                 "TP_SIZE",
                 "The tensor parallelism size.",
                 set_int(&ServerArgs::tp_size)});
    t.push_back(
        {{"--disable-cuda-graph"}, Arity::flag, "", "Disable cuda graph.", set_flag(&ServerArgs::disable_cuda_graph)});
    t.push_back({{"--cuda-graph-max-bs"},
                 Arity::one,
                 "CUDA_GRAPH_MAX_BS",
                 "Set the maximum batch size for cuda graph.",
                 set_int(&ServerArgs::cuda_graph_max_bs)});
    t.push_back({{"--cuda-graph-bs"},
                 Arity::many,
                 "CUDA_GRAPH_BS",
                 "Set the list of batch sizes for cuda graph.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   o.server.cuda_graph_bs.clear();
                   for (const auto& text : v) {
                     int value = 0;
                     if (auto error = to_int(text, value)) {
                       return error;
                     }
                     o.server.cuda_graph_bs.push_back(value);
                   }
                   return std::nullopt;
                 }});
    t.push_back({{"--disable-custom-all-reduce"},
                 Arity::flag,
                 "",
                 "Disable the custom all-reduce kernel.",
                 set_flag(&ServerArgs::disable_custom_all_reduce)});
    t.push_back({{"--enable-flashinfer-allreduce-fusion"},
                 Arity::flag,
                 "",
                 "Enable FlashInfer allreduce fusion with Residual RMSNorm.",
                 set_flag(&ServerArgs::enable_flashinfer_allreduce_fusion)});
    t.push_back({{"--enable-nccl-nvls"},
                 Arity::flag,
                 "",
                 "Enable NCCL NVLS for prefill heavy requests.",
                 set_flag(&ServerArgs::enable_nccl_nvls)});
    t.push_back({{"--enable-symm-mem"},
                 Arity::flag,
                 "",
                 "Enable NCCL symmetric memory for fast collectives.",
                 set_flag(&ServerArgs::enable_symm_mem)});
    t.push_back({{"--attention-backend"},
                 Arity::one,
                 "{flashinfer,fa3,fa4,triton,torch_native,...}",
                 "Choose the kernels for attention layers.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   if (auto error = to_choice(v.front(), k_attention_backends)) {
                     return error;
                   }
                   o.server.attention_backend = v.front();
                   return std::nullopt;
                 }});
    t.push_back({{"--speculative-algorithm"},
                 Arity::one,
                 "{EAGLE,EAGLE3,NEXTN,STANDALONE,NGRAM}",
                 "Speculative algorithm.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   if (auto error = to_choice(v.front(), k_spec_algorithms)) {
                     return error;
                   }
                   const auto& name = v.front();
                   o.server.speculative_algorithm = name == "EAGLE"        ? SpecAlgorithm::eagle
                                                    : name == "EAGLE3"     ? SpecAlgorithm::eagle3
                                                    : name == "NEXTN"      ? SpecAlgorithm::nextn
                                                    : name == "STANDALONE" ? SpecAlgorithm::standalone
                                                                           : SpecAlgorithm::ngram;
                   return std::nullopt;
                 }});
    t.push_back({{"--speculative-draft-model-path"},
                 Arity::one,
                 "SPECULATIVE_DRAFT_MODEL_PATH",
                 "The path of the draft model weights.",
                 set_string(&ServerArgs::speculative_draft_model_path)});
    t.push_back({{"--speculative-num-steps"},
                 Arity::one,
                 "SPECULATIVE_NUM_STEPS",
                 "The number of steps sampled from draft model in Speculative Decoding.",
                 set_int(&ServerArgs::speculative_num_steps)});
    t.push_back({{"--speculative-eagle-topk"},
                 Arity::one,
                 "SPECULATIVE_EAGLE_TOPK",
                 "The number of tokens sampled from the draft model in eagle2 each step.",
                 set_int(&ServerArgs::speculative_eagle_topk)});
    t.push_back({{"--speculative-num-draft-tokens"},
                 Arity::one,
                 "SPECULATIVE_NUM_DRAFT_TOKENS",
                 "The number of tokens sampled from the draft model in Speculative Decoding.",
                 set_int(&ServerArgs::speculative_num_draft_tokens)});
    t.push_back({{"--mem-fraction-static"},
                 Arity::one,
                 "MEM_FRACTION_STATIC",
                 "The fraction of the memory used for static allocation (model weights and KV cache).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   double value = 0.0;
                   if (auto error = to_float(v.front(), value)) {
                     return error;
                   }
                   o.server.mem_fraction_static = value;
                   return std::nullopt;
                 }});
    t.push_back({{"--log-level"},
                 Arity::one,
                 "LOG_LEVEL",
                 "The logging level of all loggers.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   std::string level = v.front();
                   std::ranges::transform(level, level.begin(), [](unsigned char c) { return std::tolower(c); });
                   if (auto error = to_choice(level, k_log_levels)) {
                     return error;
                   }
                   o.server.log_level = level == "debug"     ? LogLevel::debug
                                        : level == "info"    ? LogLevel::info
                                        : level == "warning" ? LogLevel::warning
                                                             : LogLevel::error;
                   return std::nullopt;
                 }});
    t.push_back({{"--enable-metrics"},
                 Arity::flag,
                 "",
                 "Enable log prometheus metrics.",
                 set_flag(&ServerArgs::enable_metrics)});
    t.push_back({{"--decode-log-interval"},
                 Arity::one,
                 "DECODE_LOG_INTERVAL",
                 "The log interval of decode batch.",
                 set_int(&ServerArgs::decode_log_interval)});
    t.push_back(
        {{"--skip-server-warmup"}, Arity::flag, "", "If set, skip warmup.", set_flag(&ServerArgs::skip_server_warmup)});

    t.push_back({{"--sim-load-time"},
                 Arity::one,
                 "DURATION",
                 "specsim: model load time before the port opens (default 5s; 90s, 15m, bare seconds).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   auto duration = util::parse_duration(v.front());
                   if (!duration) {
                     return duration.error();
                   }
                   o.sim.load_time = *duration;
                   return std::nullopt;
                 }});
    t.push_back({{"--sim-speed"},
                 Arity::one,
                 "FACTOR",
                 "specsim: divide every simulated duration by FACTOR (default 1).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   double value = 0.0;
                   if (auto error = to_float(v.front(), value)) {
                     return error;
                   }
                   if (!std::isfinite(value) || value <= 0.0) {
                     return fmt::format("must be a positive number, got '{}'", v.front());
                   }
                   o.sim.speed = value;
                   return std::nullopt;
                 }});
    t.push_back({{"--sim-profile"},
                 Arity::one,
                 "NAME",
                 "specsim: performance profile (default, flood).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   if (find_profile(v.front()) == nullptr) {
                     std::vector<const char*> names;
                     for (const auto& p : profiles()) {
                       names.push_back(p.name);
                     }
                     return fmt::format("invalid choice: '{}' (choose from {})", v.front(), quoted_choices(names));
                   }
                   o.sim.profile = v.front();
                   return std::nullopt;
                 }});
    t.push_back({{"--sim-fault"},
                 Arity::one,
                 "KIND[:ARG]",
                 "specsim: stage a fault (repeatable); see docs/specsim.md.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   auto fault = parse_fault(v.front());
                   if (!fault) {
                     return fault.error();
                   }
                   auto faults = o.sim.faults.all();
                   faults.push_back(*fault);
                   o.sim.faults = FaultSet(std::move(faults));
                   return std::nullopt;
                 }});
    t.push_back({{"--sim-gpu-dir"},
                 Arity::one,
                 "DIR",
                 "specsim: fake GPU state directory (default $SPECSIM_GPU_DIR, then $TMPDIR/specsim-gpus-UID).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   o.sim.gpu_dir = v.front();
                   return std::nullopt;
                 }});
    t.push_back({{"--sim-seed"},
                 Arity::one,
                 "N",
                 "specsim: seed of the simulated randomness (default 0).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   const auto& text = v.front();
                   const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), o.sim.seed);
                   if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
                     return fmt::format("invalid int value: '{}'", text);
                   }
                   return std::nullopt;
                 }});
    return t;
  }();
  return table;
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

const FlagSpec* find_flag(std::string_view name) {
  for (const auto& spec : flag_table()) {
    if (std::ranges::find(spec.names, name) != spec.names.end()) {
      return &spec;
    }
  }
  return nullptr;
}

// SGLang's ServerArgs checks after argparse, phrased like its ValueErrors.
std::optional<std::string> check_semantics(const Options& o) {
  const auto& s = o.server;
  if (s.port < 1 || s.port > 65535) {
    return fmt::format("argument --port: {} is not a valid port (1-65535)", s.port);
  }
  if (s.tp_size < 1) {
    return fmt::format("argument --tp-size/--tensor-parallel-size: must be at least 1, got {}", s.tp_size);
  }
  if (s.cuda_graph_max_bs && *s.cuda_graph_max_bs < 1) {
    return fmt::format("argument --cuda-graph-max-bs: must be at least 1, got {}", *s.cuda_graph_max_bs);
  }
  if (std::ranges::any_of(s.cuda_graph_bs, [](int bs) { return bs < 1; })) {
    return "argument --cuda-graph-bs: batch sizes must be at least 1";
  }
  if (s.mem_fraction_static && (*s.mem_fraction_static <= 0.0 || *s.mem_fraction_static > 1.0)) {
    return fmt::format("argument --mem-fraction-static: must be in (0, 1], got {}", *s.mem_fraction_static);
  }
  if (s.decode_log_interval < 1) {
    return fmt::format("argument --decode-log-interval: must be at least 1, got {}", s.decode_log_interval);
  }
  const int given = int{s.speculative_num_steps.has_value()} + int{s.speculative_eagle_topk.has_value()} +
                    int{s.speculative_num_draft_tokens.has_value()};
  if (given != 0 && given != 3) {
    return "--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens must be set "
           "together, or none of them";
  }
  if (given != 0 && s.speculative_algorithm == SpecAlgorithm::none) {
    return "--speculative-num-steps and friends need --speculative-algorithm";
  }
  if (given == 3 &&
      (*s.speculative_num_steps < 1 || *s.speculative_eagle_topk < 1 || *s.speculative_num_draft_tokens < 1)) {
    return "--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens must be at least 1";
  }
  const bool needs_draft = s.speculative_algorithm == SpecAlgorithm::eagle ||
                           s.speculative_algorithm == SpecAlgorithm::eagle3 ||
                           s.speculative_algorithm == SpecAlgorithm::standalone;
  if (needs_draft && s.speculative_draft_model_path.empty()) {
    return fmt::format("--speculative-draft-model-path is required with --speculative-algorithm {}",
                       spec_algorithm_name(s.speculative_algorithm));
  }
  return std::nullopt;
}

std::string py_str(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "'";
}

std::string py_opt_str(std::string_view text) {
  return text.empty() ? std::string("None") : py_str(text);
}

template <typename T> std::string py_opt(const std::optional<T>& value) {
  return value ? fmt::format("{}", *value) : std::string("None");
}

std::string_view py_bool(bool value) {
  return value ? "True" : "False";
}

} // namespace

std::string_view spec_algorithm_name(SpecAlgorithm algorithm) {
  switch (algorithm) {
  case SpecAlgorithm::none:
    return "None";
  case SpecAlgorithm::eagle:
    return "EAGLE";
  case SpecAlgorithm::eagle3:
    return "EAGLE3";
  case SpecAlgorithm::nextn:
    return "NEXTN";
  case SpecAlgorithm::standalone:
    return "STANDALONE";
  case SpecAlgorithm::ngram:
    return "NGRAM";
  }
  return "None";
}

std::expected<Options, ArgError> parse_args(std::span<const std::string> args) {
  Options options;
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
      return options;
    }
    const auto equals = token.starts_with("--") ? token.find('=') : std::string::npos;
    const std::string name = token.substr(0, equals);
    const FlagSpec* spec = find_flag(name);
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
  if (options.server.model_path.empty()) {
    return std::unexpected(ArgError{"the following arguments are required: --model-path/--model"});
  }
  if (!extras.empty()) {
    std::string joined;
    for (const auto& extra : extras) {
      joined += fmt::format("{}{}", joined.empty() ? "" : " ", extra);
    }
    return std::unexpected(ArgError{fmt::format("unrecognized arguments: {}", joined)});
  }
  if (auto error = check_semantics(options)) {
    return std::unexpected(ArgError{*error});
  }
  return options;
}

std::string usage_text() {
  constexpr std::size_t k_width = 100;
  const std::string lead = "usage: specsim ";
  std::vector<std::string> parts{"[-h]"};
  for (const auto& spec : flag_table()) {
    const std::string_view name = spec.names.front();
    std::string part = spec.arity == Arity::flag   ? std::string(name)
                       : spec.arity == Arity::many ? fmt::format("{} {} [{} ...]", name, spec.metavar, spec.metavar)
                                                   : fmt::format("{} {}", name, spec.metavar);
    parts.push_back(name == "--model-path" ? part : "[" + part + "]");
  }
  std::string out = lead;
  std::size_t line_length = lead.size();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0 && line_length + 1 + parts[i].size() > k_width) {
      out += "\n" + std::string(lead.size(), ' ');
      line_length = lead.size();
    } else if (i > 0) {
      out += ' ';
      ++line_length;
    }
    out += parts[i];
    line_length += parts[i].size();
  }
  return out + "\n";
}

std::string help_text() {
  std::string out = usage_text();
  out += "\nA simulated SGLang server for specctl: SGLang's launch flags, the OpenAI API, fake GPUs.\n"
         "Run `specsim nvidia-smi ...` (or call it through a link named nvidia-smi) for the fake nvidia-smi.\n"
         "\noptions:\n  -h, --help            show this help message and exit\n";
  for (const auto& spec : flag_table()) {
    std::string names;
    for (auto name : spec.names) {
      names += fmt::format("{}{}{}", names.empty() ? "" : ", ", name,
                           spec.arity == Arity::flag ? "" : " " + std::string(spec.metavar));
    }
    out += fmt::format("  {}\n                        {}\n", names, spec.help);
  }
  return out;
}

std::string server_args_repr(const ServerArgs& s) {
  std::string graph_bs = "None";
  if (!s.cuda_graph_bs.empty()) {
    graph_bs = "[";
    for (std::size_t i = 0; i < s.cuda_graph_bs.size(); ++i) {
      graph_bs += fmt::format("{}{}", i == 0 ? "" : ", ", s.cuda_graph_bs[i]);
    }
    graph_bs += "]";
  }
  constexpr std::array k_level_names{"debug", "info", "warning", "error"};
  const std::string algorithm =
      s.speculative_algorithm == SpecAlgorithm::none ? "None" : py_str(spec_algorithm_name(s.speculative_algorithm));
  return fmt::format(
      "ServerArgs(model_path={0}, tokenizer_path={0}, tokenizer_mode='auto', load_format='auto', "
      "trust_remote_code=False, dtype='auto', kv_cache_dtype='auto', served_model_name={0}, host={1}, port={2}, "
      "mem_fraction_static={3}, max_running_requests=None, chunked_prefill_size=8192, max_prefill_tokens=16384, "
      "schedule_policy='fcfs', tp_size={4}, stream_interval=1, log_level={5}, enable_metrics={6}, "
      "decode_log_interval={7}, attention_backend={8}, speculative_algorithm={9}, "
      "speculative_draft_model_path={10}, speculative_num_steps={11}, speculative_eagle_topk={12}, "
      "speculative_num_draft_tokens={13}, disable_cuda_graph={14}, cuda_graph_max_bs={15}, cuda_graph_bs={16}, "
      "disable_custom_all_reduce={17}, enable_flashinfer_allreduce_fusion={18}, enable_nccl_nvls={19}, "
      "enable_symm_mem={20}, skip_server_warmup={21})",
      py_str(s.model_path), py_str(s.host), s.port, py_opt(s.mem_fraction_static), s.tp_size,
      py_str(k_level_names.at(static_cast<std::size_t>(s.log_level))), py_bool(s.enable_metrics), s.decode_log_interval,
      py_opt_str(s.attention_backend), algorithm, py_opt_str(s.speculative_draft_model_path),
      py_opt(s.speculative_num_steps), py_opt(s.speculative_eagle_topk), py_opt(s.speculative_num_draft_tokens),
      py_bool(s.disable_cuda_graph), py_opt(s.cuda_graph_max_bs), graph_bs, py_bool(s.disable_custom_all_reduce),
      py_bool(s.enable_flashinfer_allreduce_fusion), py_bool(s.enable_nccl_nvls), py_bool(s.enable_symm_mem),
      py_bool(s.skip_server_warmup));
}

} // namespace specctl::sim
