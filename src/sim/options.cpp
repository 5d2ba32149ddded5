#include <specctl/sim/options.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/util/duration.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

Apply set_graph_bs() {
  return [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
    o.server.cuda_graph_bs.clear();
    for (const auto& text : v) {
      int value = 0;
      if (auto error = to_int(text, value)) {
        return error;
      }
      o.server.cuda_graph_bs.push_back(value);
    }
    return std::nullopt;
  };
}

const std::vector<FlagSpec>& sglang_table() {
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
                 "Set the list of batch sizes for cuda graph (deprecated: --cuda-graph-bs-decode).",
                 set_graph_bs()});
    // SGLang 0.5.x spellings (server_args.py); the old ones above stay parsed,
    // as SGLang still parses them (ENGINES.md).
    t.push_back({{"--cuda-graph-max-bs-decode"},
                 Arity::one,
                 "CUDA_GRAPH_MAX_BS_DECODE",
                 "Set the maximum batch size for decode cuda graphs.",
                 set_int(&ServerArgs::cuda_graph_max_bs)});
    t.push_back({{"--cuda-graph-bs-decode"},
                 Arity::many,
                 "CUDA_GRAPH_BS_DECODE",
                 "Set the list of batch sizes for decode cuda graphs.",
                 set_graph_bs()});
    t.push_back({{"--cuda-graph-backend-decode"},
                 Arity::one,
                 "CUDA_GRAPH_BACKEND_DECODE",
                 "The cuda graph backend of decode batches ('disabled' turns decode graphs off).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   o.server.cuda_graph_backend_decode = v.front();
                   if (v.front() == "disabled") {
                     o.server.disable_cuda_graph = true;
                   }
                   return std::nullopt;
                 }});
    t.push_back({{"--cuda-graph-backend-prefill"},
                 Arity::one,
                 "CUDA_GRAPH_BACKEND_PREFILL",
                 "The cuda graph backend of prefill batches (no effect in the simulation).",
                 set_string(&ServerArgs::cuda_graph_backend_prefill)});
    t.push_back({{"--flashinfer-allreduce-fusion-backend"},
                 Arity::one,
                 "FLASHINFER_ALLREDUCE_FUSION_BACKEND",
                 "FlashInfer allreduce fusion backend (any value but 'none' turns fusion on).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   o.server.enable_flashinfer_allreduce_fusion = v.front() != "none";
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
    return t;
  }();
  return table;
}

// The simulation knobs, accepted in every personality.
const std::vector<FlagSpec>& sim_table() {
  static const std::vector<FlagSpec> table = [] {
    std::vector<FlagSpec> t;
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
    t.push_back({{"--sim-loader"},
                 Arity::one,
                 "{multi-thread,single-thread}",
                 "specsim: which SGLang weight loader's tqdm bar to print (default multi-thread).",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   constexpr std::array k_loaders{"multi-thread", "single-thread"};
                   if (auto error = to_choice(v.front(), k_loaders)) {
                     return error;
                   }
                   o.sim.single_thread_loader = v.front() == "single-thread";
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

using Tables = std::vector<const std::vector<FlagSpec>*>;

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

// vLLM's attention backends (vllm/attention/backends/registry.py names) and
// the SGLang backend whose cost the simulation charges for each.
constexpr std::array<std::pair<const char*, const char*>, 10> k_vllm_backends{{
    {"FLASHINFER", "flashinfer"},
    {"FLASH_ATTN", "fa3"},
    {"TRITON_ATTN", "triton"},
    {"FLASHMLA", "flashmla"},
    {"FLASHINFER_MLA", "flashinfer"},
    {"TRITON_MLA", "triton"},
    {"CUTLASS_MLA", "cutlass_mla"},
    {"FLEX_ATTENTION", "flex_attention"},
    {"TORCH_SDPA", "torch_native"},
    {"TREE_ATTN", "flashinfer"},
}};

std::optional<nlohmann::json> parse_json_object(std::string_view text, std::string& error) {
  try {
    auto json = nlohmann::json::parse(text);
    if (!json.is_object()) {
      error = fmt::format("expected a JSON object, got '{}'", text);
      return std::nullopt;
    }
    return json;
  } catch (const nlohmann::json::exception& e) {
    error = fmt::format("invalid JSON '{}': {}", text, e.what());
    return std::nullopt;
  }
}

// --speculative-config as vLLM's SpeculativeConfig reads it (method, model,
// num_speculative_tokens), mapped onto the simulated algorithm: each verify
// pass checks num_speculative_tokens drafts along one chain (topk 1).
std::optional<std::string> apply_speculative_config(Options& o, std::string_view text) {
  std::string error;
  auto json = parse_json_object(text, error);
  if (!json) {
    return error;
  }
  o.vllm.speculative_config = std::string(text);
  const std::string method = json->value("method", std::string());
  const std::string model = json->value("model", std::string());
  const auto tokens = json->find("num_speculative_tokens");
  if (tokens == json->end() || !tokens->is_number_integer() || tokens->get<int>() < 1) {
    return "num_speculative_tokens must be a positive integer";
  }
  SpecAlgorithm algorithm = SpecAlgorithm::none;
  if (method == "eagle3") {
    algorithm = SpecAlgorithm::eagle3;
  } else if (method == "eagle") {
    algorithm = SpecAlgorithm::eagle;
  } else if (method == "mtp" || method == "deepseek_mtp") {
    algorithm = SpecAlgorithm::nextn;
  } else if (method == "ngram") {
    algorithm = SpecAlgorithm::ngram;
  } else if (method == "draft_model" || (method.empty() && !model.empty())) {
    algorithm = SpecAlgorithm::standalone;
  } else {
    return fmt::format("unsupported speculative method '{}' (specsim knows eagle3, eagle, mtp, ngram, draft_model)",
                       method);
  }
  if ((algorithm == SpecAlgorithm::eagle3 || algorithm == SpecAlgorithm::eagle ||
       algorithm == SpecAlgorithm::standalone) &&
      model.empty()) {
    return fmt::format("method '{}' needs a draft \"model\"", method);
  }
  o.vllm.speculative_method = method.empty() ? "draft_model" : method;
  o.server.speculative_algorithm = algorithm;
  o.server.speculative_draft_model_path = model;
  o.server.speculative_num_steps = tokens->get<int>();
  o.server.speculative_eagle_topk = 1;
  o.server.speculative_num_draft_tokens = tokens->get<int>() + 1;
  return std::nullopt;
}

// --compilation-config: cudagraph_mode NONE turns graphs off; allreduce fusion is
// pass_config.fuse_allreduce_rms (older: enable_fi_allreduce_fusion); the
// capture size bounds the graphed batch (REFERENCE.md, vLLM config/compilation.py).
std::optional<std::string> apply_compilation_config(Options& o, std::string_view text) {
  std::string error;
  auto json = parse_json_object(text, error);
  if (!json) {
    return error;
  }
  o.vllm.compilation_config = std::string(text);
  if (const auto mode = json->find("cudagraph_mode"); mode != json->end() && mode->is_string()) {
    o.server.disable_cuda_graph = mode->get<std::string>() == "NONE";
  }
  if (const auto pass = json->find("pass_config"); pass != json->end() && pass->is_object()) {
    for (const char* key : {"fuse_allreduce_rms", "enable_fi_allreduce_fusion"}) {
      if (const auto fuse = pass->find(key); fuse != pass->end() && fuse->is_boolean()) {
        o.server.enable_flashinfer_allreduce_fusion = fuse->get<bool>();
      }
    }
  }
  if (const auto size = json->find("max_cudagraph_capture_size"); size != json->end() && size->is_number_integer()) {
    o.server.cuda_graph_max_bs = size->get<int>();
  }
  return std::nullopt;
}

// `vllm serve` flags (vllm/engine/arg_utils.py, entrypoints/openai/cli_args.py).
const std::vector<FlagSpec>& vllm_table() {
  static const std::vector<FlagSpec> table = [] {
    std::vector<FlagSpec> t;
    t.push_back({{"--host"}, Arity::one, "HOST", "Host name.", set_string(&ServerArgs::host)});
    t.push_back({{"--port"}, Arity::one, "PORT", "Port number.", set_int(&ServerArgs::port)});
    t.push_back({{"--tensor-parallel-size", "-tp"},
                 Arity::one,
                 "TENSOR_PARALLEL_SIZE",
                 "Number of tensor parallel groups.",
                 set_int(&ServerArgs::tp_size)});
    t.push_back({{"--speculative-config"},
                 Arity::one,
                 "SPECULATIVE_CONFIG",
                 "The configurations for speculative decoding (JSON).",
                 [](Options& o, std::span<const std::string> v) { return apply_speculative_config(o, v.front()); }});
    t.push_back({{"--compilation-config", "-O"},
                 Arity::one,
                 "COMPILATION_CONFIG",
                 "torch.compile and cudagraph capture configuration (JSON).",
                 [](Options& o, std::span<const std::string> v) { return apply_compilation_config(o, v.front()); }});
    t.push_back({{"--enforce-eager"},
                 Arity::flag,
                 "",
                 "Always use eager-mode PyTorch (no CUDA graphs).",
                 set_flag(&ServerArgs::disable_cuda_graph)});
    t.push_back({{"--no-enforce-eager"},
                 Arity::flag,
                 "",
                 "Use CUDA graphs (the default).",
                 [](Options& o, std::span<const std::string>) -> std::optional<std::string> {
                   o.server.disable_cuda_graph = false;
                   return std::nullopt;
                 }});
    t.push_back({{"--max-cudagraph-capture-size"},
                 Arity::one,
                 "MAX_CUDAGRAPH_CAPTURE_SIZE",
                 "Maximum batch size captured in a CUDA graph.",
                 set_int(&ServerArgs::cuda_graph_max_bs)});
    t.push_back({{"--attention-backend"},
                 Arity::one,
                 "ATTENTION_BACKEND",
                 "Attention backend.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   for (const auto& [name, sglang] : k_vllm_backends) {
                     if (v.front() == name) {
                       o.server.attention_backend = sglang;
                       return std::nullopt;
                     }
                   }
                   std::vector<const char*> names;
                   for (const auto& entry : k_vllm_backends) {
                     names.push_back(entry.first);
                   }
                   return fmt::format("invalid choice: '{}' (choose from {})", v.front(), quoted_choices(names));
                 }});
    t.push_back({{"--gpu-memory-utilization"},
                 Arity::one,
                 "GPU_MEMORY_UTILIZATION",
                 "The fraction of GPU memory to be used for the model executor.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   double value = 0.0;
                   if (auto error = to_float(v.front(), value)) {
                     return error;
                   }
                   o.server.mem_fraction_static = value;
                   return std::nullopt;
                 }});
    t.push_back({{"--disable-custom-all-reduce"},
                 Arity::flag,
                 "",
                 "Disable the custom all-reduce kernel.",
                 set_flag(&ServerArgs::disable_custom_all_reduce)});
    t.push_back({{"--max-num-seqs"},
                 Arity::one,
                 "MAX_NUM_SEQS",
                 "Maximum number of sequences per iteration.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   int value = 0;
                   if (auto error = to_int(v.front(), value)) {
                     return error;
                   }
                   o.vllm.max_num_seqs = value;
                   return std::nullopt;
                 }});
    t.push_back({{"--served-model-name"},
                 Arity::one,
                 "SERVED_MODEL_NAME",
                 "The model name used in the API.",
                 [](Options& o, std::span<const std::string> v) -> std::optional<std::string> {
                   o.vllm.served_model_name = v.front();
                   return std::nullopt;
                 }});
    return t;
  }();
  return table;
}

// The argparse loop shared by SGLang and vLLM: flags from `tables`, the rest
// collected as positionals (vLLM's `serve MODEL`) or reported as unrecognized.
std::expected<std::vector<std::string>, ArgError>
parse_argparse(std::span<const std::string> args, const Tables& tables, Options& options, bool underscores) {
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
    if (underscores && name.starts_with("--")) {
      // vLLM's FlexibleArgumentParser reads --max_num_seqs as --max-num-seqs.
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

// llama.cpp's flags (common/arg.cpp): every one takes one value or none.
struct LlamaFlag {
  std::vector<std::string_view> names;
  bool takes_value;
  std::function<std::optional<std::string>(Options&, const std::string&)> apply;
};

std::optional<std::string> llama_int(const std::string& text, int& out) {
  // common_params_parse_ex runs std::stoi; its exception text is "stoi".
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end == text.data()) {
    return "stoi";
  }
  out = value;
  return std::nullopt;
}

const std::vector<LlamaFlag>& llama_table() {
  static const std::vector<LlamaFlag> table = [] {
    std::vector<LlamaFlag> t;
    const auto int_flag = [](int LlamaArgs::*member) {
      return [member](Options& o, const std::string& v) { return llama_int(v, o.llama.*member); };
    };
    const auto ignore = [](Options&, const std::string&) -> std::optional<std::string> { return std::nullopt; };
    t.push_back({{"-m", "--model"}, true, [](Options& o, const std::string& v) -> std::optional<std::string> {
                   o.server.model_path = v;
                   return std::nullopt;
                 }});
    t.push_back({{"--host"}, true, [](Options& o, const std::string& v) -> std::optional<std::string> {
                   o.server.host = v;
                   return std::nullopt;
                 }});
    t.push_back({{"--port"}, true, [](Options& o, const std::string& v) { return llama_int(v, o.server.port); }});
    t.push_back({{"-md", "--model-draft", "--spec-draft-model"},
                 true,
                 [](Options& o, const std::string& v) -> std::optional<std::string> {
                   o.llama.draft_model = v;
                   return std::nullopt;
                 }});
    t.push_back({{"--spec-type"}, true, [](Options& o, const std::string& v) -> std::optional<std::string> {
                   // common/speculative.cpp's type names.
                   constexpr std::array k_types{"none",          "draft-simple", "draft-eagle3",
                                                "draft-mtp",     "ngram-simple", "ngram-map-k",
                                                "ngram-map-k4v", "ngram-mod",    "ngram-cache"};
                   std::string_view rest = v;
                   while (true) {
                     const auto comma = rest.find(',');
                     const std::string type(rest.substr(0, comma));
                     if (std::ranges::find(k_types, type) == k_types.end()) {
                       return fmt::format("unknown speculative decoding type: {}", type);
                     }
                     o.llama.spec_types.push_back(type);
                     if (comma == std::string_view::npos) {
                       break;
                     }
                     rest.remove_prefix(comma + 1);
                   }
                   return std::nullopt;
                 }});
    t.push_back({{"--spec-draft-n-max"}, true, [](Options& o, const std::string& v) -> std::optional<std::string> {
                   int value = 0;
                   if (auto error = llama_int(v, value)) {
                     return error;
                   }
                   if (value < 0) {
                     return "invalid value";
                   }
                   o.llama.draft_n_max = value;
                   return std::nullopt;
                 }});
    t.push_back({{"--spec-draft-n-min"}, true, int_flag(&LlamaArgs::draft_n_min)});
    t.push_back({{"-c", "--ctx-size"}, true, int_flag(&LlamaArgs::ctx_size)});
    t.push_back({{"-np", "--parallel"}, true, int_flag(&LlamaArgs::parallel)});
    t.push_back({{"-t", "--threads"}, true, int_flag(&LlamaArgs::threads)});
    // A number, "auto" or "all" (common/arg.cpp); the CPU simulation ignores it.
    t.push_back({{"-ngl", "--gpu-layers", "--n-gpu-layers"}, true, ignore});
    t.push_back({{"--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"}, true, ignore});
    t.push_back({{"-a", "--alias"}, true, [](Options& o, const std::string& v) -> std::optional<std::string> {
                   o.llama.alias = v;
                   return std::nullopt;
                 }});
    t.push_back({{"-fa", "--flash-attn"}, true, ignore});
    t.push_back({{"-b", "--batch-size"}, true, ignore});
    t.push_back({{"-ub", "--ubatch-size"}, true, ignore});
    t.push_back({{"--cache-reuse"}, true, ignore});
    t.push_back({{"--metrics"}, false, [](Options& o, const std::string&) -> std::optional<std::string> {
                   o.llama.metrics = true;
                   return std::nullopt;
                 }});
    t.push_back({{"--no-warmup"}, false, [](Options& o, const std::string&) -> std::optional<std::string> {
                   o.llama.warmup = false;
                   return std::nullopt;
                 }});
    t.push_back({{"--jinja"}, false, ignore});
    t.push_back({{"--no-webui", "--no-ui"}, false, ignore});
    t.push_back({{"-cb", "--cont-batching"}, false, ignore});
    t.push_back({{"-nocb", "--no-cont-batching"}, false, ignore});
    t.push_back({{"--cache-prompt"}, false, ignore});
    t.push_back({{"--no-cache-prompt"}, false, ignore});
    t.push_back({{"-kvu", "--kv-unified"}, false, ignore});
    // Removed in 2026 (common/arg.cpp "removed params"): the handler throws.
    const auto removed = [](std::string_view message) {
      return [message](Options&, const std::string&) -> std::optional<std::string> {
        return fmt::format("the argument has been removed. {}", message);
      };
    };
    t.push_back(
        {{"--draft", "--draft-n", "--draft-max"}, true, removed("use --spec-draft-n-max or --spec-ngram-mod-n-max")});
    t.push_back({{"--draft-min", "--draft-n-min"}, true, removed("use --spec-draft-n-min or --spec-ngram-mod-n-min")});
    return t;
  }();
  return table;
}

// The usage block common_params_parse_ex appends (opt.to_string(), abridged to
// the flag names and the help of the removed flags).
std::string llama_usage(const LlamaFlag& flag, std::string_view name) {
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
  return names + (flag.takes_value ? " N" : "");
}

// common_params_parse_ex: "--foo_bar" reads as "--foo-bar"; an unknown
// argument is "error: invalid argument: X"; a handler's exception becomes
// "error while handling argument ...". Every error exits 1 (server.cpp).
std::expected<void, ArgError> parse_llamacpp(std::span<const std::string> args, Options& options) {
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
    if (arg.starts_with("--sim-")) {
      const FlagSpec* spec = find_flag({&sim_table()}, arg);
      if (spec == nullptr) {
        return fail(fmt::format("error: invalid argument: {}", arg));
      }
      if (i + 1 >= args.size()) {
        return fail(fmt::format("error while handling argument \"{}\": expected value for argument", arg));
      }
      const std::string value = args[++i];
      if (auto error = spec->apply(options, std::span(&value, 1))) {
        return fail(fmt::format("error while handling argument \"{}\": {}", arg, *error));
      }
      continue;
    }
    const LlamaFlag* flag = nullptr;
    for (const auto& candidate : llama_table()) {
      if (std::ranges::find(candidate.names, arg) != candidate.names.end()) {
        flag = &candidate;
      }
    }
    if (flag == nullptr) {
      return fail(fmt::format("error: invalid argument: {}", arg));
    }
    std::string value;
    std::optional<std::string> error;
    if (flag->takes_value) {
      if (i + 1 >= args.size()) {
        error = "expected value for argument";
      } else {
        value = args[++i];
      }
    }
    if (!error) {
      error = flag->apply(options, value);
    }
    if (error) {
      return fail(fmt::format("error while handling argument \"{}\": {}\n\nusage:\n{}\n\nto show complete usage, run "
                              "with -h",
                              arg, *error, llama_usage(*flag, arg)));
    }
  }
  return {};
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

std::string_view engine_name(Engine engine) {
  switch (engine) {
  case Engine::sglang:
    return "sglang";
  case Engine::vllm:
    return "vllm";
  case Engine::llamacpp:
    return "llamacpp";
  }
  return "sglang";
}

bool LlamaArgs::speculates() const {
  return !draft_model.empty() && draft_n_max > 0 && std::ranges::find(spec_types, "draft-simple") != spec_types.end();
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
    constexpr std::array k_engines{"sglang", "vllm", "llamacpp"};
    if (auto error = to_choice(*value, k_engines)) {
      return std::unexpected(ArgError{fmt::format("argument --sim-engine: {}", *error)});
    }
    options.engine = *value == "vllm" ? Engine::vllm : *value == "llamacpp" ? Engine::llamacpp : Engine::sglang;
  }

  if (options.engine == Engine::llamacpp) {
    // llama-server's defaults (common/common.h): 127.0.0.1:8080.
    options.server.port = 8080;
    if (auto parsed = parse_llamacpp(args, options); !parsed) {
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

  if (options.engine == Engine::vllm) {
    // vLLM's defaults (entrypoints/openai/cli_args.py): host None binds every
    // interface, port 8000.
    options.server.host = "0.0.0.0";
    options.server.port = 8000;
    auto positionals = parse_argparse(args, {&vllm_table(), &sim_table()}, options, true);
    if (!positionals) {
      return std::unexpected(positionals.error());
    }
    if (options.help) {
      return options;
    }
    auto& rest = *positionals;
    if (rest.empty() || rest.front() != "serve") {
      return std::unexpected(ArgError{"specsim --sim-engine vllm plays `vllm serve MODEL ...`: the first argument "
                                      "must be serve"});
    }
    rest.erase(rest.begin());
    if (rest.empty()) {
      return std::unexpected(ArgError{"the following arguments are required: model_tag"});
    }
    options.server.model_path = rest.front();
    rest.erase(rest.begin());
    if (!rest.empty()) {
      return unrecognized(rest);
    }
    if (auto error = check_semantics(options)) {
      return std::unexpected(ArgError{*error});
    }
    return options;
  }

  auto extras = parse_argparse(args, {&sglang_table(), &sim_table()}, options, false);
  if (!extras) {
    return std::unexpected(extras.error());
  }
  if (options.help) {
    return options;
  }
  if (options.server.model_path.empty()) {
    return std::unexpected(ArgError{"the following arguments are required: --model-path/--model"});
  }
  if (!extras->empty()) {
    return unrecognized(*extras);
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
  Tables tables{&sglang_table(), &sim_table()};
  std::vector<const FlagSpec*> specs;
  for (const auto* table : tables) {
    for (const auto& spec : *table) {
      specs.push_back(&spec);
    }
  }
  for (const FlagSpec* flag : specs) {
    const FlagSpec& spec = *flag;
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
  for (const auto* table : {&sglang_table(), &sim_table()}) {
    for (const auto& spec : *table) {
      std::string names;
      for (auto name : spec.names) {
        names += fmt::format("{}{}{}", names.empty() ? "" : ", ", name,
                             spec.arity == Arity::flag ? "" : " " + std::string(spec.metavar));
      }
      out += fmt::format("  {}\n                        {}\n", names, spec.help);
    }
  }
  out += "\n  --sim-engine {sglang,vllm,llamacpp}\n                        specsim: whose command line, log and API "
         "to play (default sglang).\n";
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
