// SGLang's `launch_server` flags (server_args.py), its usage and help, and the
// ServerArgs repr its log prints.

#include "options_tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace specctl::sim {
namespace detail {
namespace {

constexpr std::array k_attention_backends{
    "aiter",    "ascend",         "cutlass_mla", "dual_chunk_flash_attn", "fa3",        "fa4",        "flashinfer",
    "flashmla", "flex_attention", "intel_amx",   "torch_native",          "trtllm_mha", "trtllm_mla", "triton",
    "wave"};
// Python's logging levels; the simulation logs "critical" as "error".
constexpr std::array<std::pair<const char*, LogLevel>, 5> k_log_levels{{{"debug", LogLevel::debug},
                                                                        {"info", LogLevel::info},
                                                                        {"warning", LogLevel::warning},
                                                                        {"error", LogLevel::error},
                                                                        {"critical", LogLevel::error}}};

// The value as SGLang reads it: --log-level INFO is "info".
Apply lowercased(Apply apply) {
  return [apply = std::move(apply)](Options& o, std::span<const std::string> v) {
    std::vector<std::string> lower(v.begin(), v.end());
    for (auto& text : lower) {
      std::ranges::transform(text, text.begin(), [](unsigned char c) { return std::tolower(c); });
    }
    return apply(o, lower);
  };
}

// 'disabled' turns decode graphs off.
std::optional<std::string> set_graph_backend_decode(Options& o, std::span<const std::string> v) {
  o.server.cuda_graph_backend_decode = v.front();
  if (v.front() == "disabled") {
    o.server.disable_cuda_graph = true;
  }
  return std::nullopt;
}

// Any backend but 'none' turns fusion on.
std::optional<std::string> set_fusion_backend(Options& o, std::span<const std::string> v) {
  o.server.enable_flashinfer_allreduce_fusion = v.front() != "none";
  return std::nullopt;
}

const FlagTable& sglang_table() {
  // The 0.5.x spellings (--cuda-graph-*-decode) sit beside the old ones, which
  // SGLang still parses (ENGINES.md).
  static const FlagTable table{
      {{"--model-path", "--model"},
       Arity::one,
       "MODEL_PATH",
       "The path of the model weights.",
       set<text_value>(&ServerArgs::model_path)},
      {{"--host"}, Arity::one, "HOST", "The host of the HTTP server.", set<text_value>(&ServerArgs::host)},
      {{"--port"}, Arity::one, "PORT", "The port of the HTTP server.", set<int_value>(&ServerArgs::port)},
      {{"--tp-size", "--tensor-parallel-size"},
       Arity::one,
       "TP_SIZE",
       "The tensor parallelism size.",
       set<int_value>(&ServerArgs::tp_size)},
      {{"--disable-cuda-graph"}, Arity::flag, "", "Disable cuda graph.", set_to(&ServerArgs::disable_cuda_graph, true)},
      {{"--cuda-graph-max-bs"},
       Arity::one,
       "CUDA_GRAPH_MAX_BS",
       "Set the maximum batch size for cuda graph.",
       set<int_value>(&ServerArgs::cuda_graph_max_bs)},
      {{"--cuda-graph-bs"},
       Arity::many,
       "CUDA_GRAPH_BS",
       "Set the list of batch sizes for cuda graph (deprecated: --cuda-graph-bs-decode).",
       set_list<int_value>(&ServerArgs::cuda_graph_bs)},
      {{"--cuda-graph-max-bs-decode"},
       Arity::one,
       "CUDA_GRAPH_MAX_BS_DECODE",
       "Set the maximum batch size for decode cuda graphs.",
       set<int_value>(&ServerArgs::cuda_graph_max_bs)},
      {{"--cuda-graph-bs-decode"},
       Arity::many,
       "CUDA_GRAPH_BS_DECODE",
       "Set the list of batch sizes for decode cuda graphs.",
       set_list<int_value>(&ServerArgs::cuda_graph_bs)},
      {{"--cuda-graph-backend-decode"},
       Arity::one,
       "CUDA_GRAPH_BACKEND_DECODE",
       "The cuda graph backend of decode batches ('disabled' turns decode graphs off).",
       set_graph_backend_decode},
      {{"--cuda-graph-backend-prefill"},
       Arity::one,
       "CUDA_GRAPH_BACKEND_PREFILL",
       "The cuda graph backend of prefill batches (no effect in the simulation).",
       set<text_value>(&ServerArgs::cuda_graph_backend_prefill)},
      {{"--flashinfer-allreduce-fusion-backend"},
       Arity::one,
       "FLASHINFER_ALLREDUCE_FUSION_BACKEND",
       "FlashInfer allreduce fusion backend (any value but 'none' turns fusion on).",
       set_fusion_backend},
      {{"--disable-custom-all-reduce"},
       Arity::flag,
       "",
       "Disable the custom all-reduce kernel.",
       set_to(&ServerArgs::disable_custom_all_reduce, true)},
      {{"--enable-flashinfer-allreduce-fusion"},
       Arity::flag,
       "",
       "Enable FlashInfer allreduce fusion with Residual RMSNorm.",
       set_to(&ServerArgs::enable_flashinfer_allreduce_fusion, true)},
      {{"--enable-nccl-nvls"},
       Arity::flag,
       "",
       "Enable NCCL NVLS for prefill heavy requests.",
       set_to(&ServerArgs::enable_nccl_nvls, true)},
      {{"--enable-symm-mem"},
       Arity::flag,
       "",
       "Enable NCCL symmetric memory for fast collectives.",
       set_to(&ServerArgs::enable_symm_mem, true)},
      {{"--attention-backend"},
       Arity::one,
       "{flashinfer,fa3,fa4,triton,torch_native,...}",
       "Choose the kernels for attention layers.",
       set_choice(&ServerArgs::attention_backend, k_attention_backends)},
      {{"--speculative-algorithm"},
       Arity::one,
       "{EAGLE,EAGLE3,NEXTN,STANDALONE,NGRAM}",
       "Speculative algorithm.",
       set_choice(&ServerArgs::speculative_algorithm, k_spec_algorithms)},
      {{"--speculative-draft-model-path"},
       Arity::one,
       "SPECULATIVE_DRAFT_MODEL_PATH",
       "The path of the draft model weights.",
       set<text_value>(&ServerArgs::speculative_draft_model_path)},
      {{"--speculative-num-steps"},
       Arity::one,
       "SPECULATIVE_NUM_STEPS",
       "The number of steps sampled from draft model in Speculative Decoding.",
       set<int_value>(&ServerArgs::speculative_num_steps)},
      {{"--speculative-eagle-topk"},
       Arity::one,
       "SPECULATIVE_EAGLE_TOPK",
       "The number of tokens sampled from the draft model in eagle2 each step.",
       set<int_value>(&ServerArgs::speculative_eagle_topk)},
      {{"--speculative-num-draft-tokens"},
       Arity::one,
       "SPECULATIVE_NUM_DRAFT_TOKENS",
       "The number of tokens sampled from the draft model in Speculative Decoding.",
       set<int_value>(&ServerArgs::speculative_num_draft_tokens)},
      {{"--mem-fraction-static"},
       Arity::one,
       "MEM_FRACTION_STATIC",
       "The fraction of the memory used for static allocation (model weights and KV cache).",
       set<float_value>(&ServerArgs::mem_fraction_static)},
      {{"--log-level"},
       Arity::one,
       "LOG_LEVEL",
       "The logging level of all loggers.",
       lowercased(set_choice(&ServerArgs::log_level, k_log_levels))},
      {{"--enable-metrics"},
       Arity::flag,
       "",
       "Enable log prometheus metrics.",
       set_to(&ServerArgs::enable_metrics, true)},
      {{"--decode-log-interval"},
       Arity::one,
       "DECODE_LOG_INTERVAL",
       "The log interval of decode batch.",
       set<int_value>(&ServerArgs::decode_log_interval)},
      {{"--skip-server-warmup"},
       Arity::flag,
       "",
       "If set, skip warmup.",
       set_to(&ServerArgs::skip_server_warmup, true)},
      {{"--enable-cache-report"},
       Arity::flag,
       "",
       "Return number of cached tokens in usage.prompt_tokens_details for each openai request.",
       set_to(&ServerArgs::enable_cache_report, true)},
      {{"--disable-radix-cache"},
       Arity::flag,
       "",
       "Disable RadixAttention for prefix caching.",
       set_to(&ServerArgs::disable_radix_cache, true)},
  };
  return table;
}

} // namespace

std::expected<Options, ArgError> parse_sglang(std::span<const std::string> args, Options options) {
  auto extras = parse_argparse(args, {&sglang_table(), &sim_table()}, options, Underscores::as_written);
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
  return check_semantics(std::move(options));
}

} // namespace detail

namespace {

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

std::string usage_text() {
  constexpr std::size_t k_width = 100;
  const std::string lead = "usage: specsim ";
  std::vector<std::string> parts{"[-h]"};
  for (const auto* table : {&detail::sglang_table(), &detail::sim_table()}) {
    for (const auto& spec : *table) {
      const std::string_view name = spec.names.front();
      std::string part = spec.arity == detail::Arity::flag ? std::string(name)
                         : spec.arity == detail::Arity::many
                             ? fmt::format("{} {} [{} ...]", name, spec.metavar, spec.metavar)
                             : fmt::format("{} {}", name, spec.metavar);
      parts.push_back(name == "--model-path" ? part : "[" + part + "]");
    }
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
  for (const auto* table : {&detail::sglang_table(), &detail::sim_table()}) {
    for (const auto& spec : *table) {
      std::string names;
      for (auto name : spec.names) {
        names += fmt::format("{}{}{}", names.empty() ? "" : ", ", name,
                             spec.arity == detail::Arity::flag ? "" : " " + std::string(spec.metavar));
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
