// `vllm serve` flags (vllm/engine/arg_utils.py, entrypoints/openai/cli_args.py),
// mapped onto the SGLang ServerArgs the simulation runs on.

#include "options_tables.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace specctl::sim::detail {
namespace {

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
std::optional<std::string> apply_speculative_config(Options& o, std::span<const std::string> v) {
  const std::string& text = v.front();
  std::string error;
  auto json = parse_json_object(text, error);
  if (!json) {
    return error;
  }
  o.vllm.speculative_config = text;
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
  if (needs_draft_model(algorithm) && model.empty()) {
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
std::optional<std::string> apply_compilation_config(Options& o, std::span<const std::string> v) {
  const std::string& text = v.front();
  std::string error;
  auto json = parse_json_object(text, error);
  if (!json) {
    return error;
  }
  o.vllm.compilation_config = text;
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

const FlagTable& vllm_table() {
  static const FlagTable table{
      {{"--host"}, Arity::one, "HOST", "Host name.", set<text_value>(&ServerArgs::host)},
      {{"--port"}, Arity::one, "PORT", "Port number.", set<int_value>(&ServerArgs::port)},
      {{"--tensor-parallel-size", "-tp"},
       Arity::one,
       "TENSOR_PARALLEL_SIZE",
       "Number of tensor parallel groups.",
       set<int_value>(&ServerArgs::tp_size)},
      {{"--speculative-config"},
       Arity::one,
       "SPECULATIVE_CONFIG",
       "The configurations for speculative decoding (JSON).",
       apply_speculative_config},
      {{"--compilation-config", "-O"},
       Arity::one,
       "COMPILATION_CONFIG",
       "torch.compile and cudagraph capture configuration (JSON).",
       apply_compilation_config},
      {{"--enforce-eager"},
       Arity::flag,
       "",
       "Always use eager-mode PyTorch (no CUDA graphs).",
       set_to(&ServerArgs::disable_cuda_graph, true)},
      {{"--no-enforce-eager"},
       Arity::flag,
       "",
       "Use CUDA graphs (the default).",
       set_to(&ServerArgs::disable_cuda_graph, false)},
      {{"--max-cudagraph-capture-size"},
       Arity::one,
       "MAX_CUDAGRAPH_CAPTURE_SIZE",
       "Maximum batch size captured in a CUDA graph.",
       set<int_value>(&ServerArgs::cuda_graph_max_bs)},
      {{"--attention-backend"},
       Arity::one,
       "ATTENTION_BACKEND",
       "Attention backend.",
       set_choice(&ServerArgs::attention_backend, k_vllm_backends)},
      {{"--gpu-memory-utilization"},
       Arity::one,
       "GPU_MEMORY_UTILIZATION",
       "The fraction of GPU memory to be used for the model executor.",
       set<float_value>(&ServerArgs::mem_fraction_static)},
      {{"--disable-custom-all-reduce"},
       Arity::flag,
       "",
       "Disable the custom all-reduce kernel.",
       set_to(&ServerArgs::disable_custom_all_reduce, true)},
      {{"--max-num-seqs"},
       Arity::one,
       "MAX_NUM_SEQS",
       "Maximum number of sequences per iteration.",
       set<int_value>(&VllmArgs::max_num_seqs)},
      {{"--served-model-name"},
       Arity::one,
       "SERVED_MODEL_NAME",
       "The model name used in the API.",
       set<text_value>(&VllmArgs::served_model_name)},
      {{"--enable-prompt-tokens-details"},
       Arity::flag,
       "",
       "If set to True, enable prompt_tokens_details in usage.",
       set_to(&VllmArgs::enable_prompt_tokens_details, true)},
      {{"--enable-prefix-caching"},
       Arity::flag,
       "",
       "Whether to enable prefix caching (the default).",
       set_to(&VllmArgs::enable_prefix_caching, true)},
      {{"--no-enable-prefix-caching"},
       Arity::flag,
       "",
       "Disable prefix caching.",
       set_to(&VllmArgs::enable_prefix_caching, false)},
  };
  return table;
}

} // namespace

std::expected<Options, ArgError> parse_vllm(std::span<const std::string> args, Options options) {
  // vLLM's defaults (entrypoints/openai/cli_args.py): host None binds every
  // interface, port 8000.
  options.server.host = "0.0.0.0";
  options.server.port = 8000;
  auto positionals = parse_argparse(args, {&vllm_table(), &sim_table()}, options, Underscores::as_dashes);
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
  return check_semantics(std::move(options));
}

} // namespace specctl::sim::detail
