#pragma once

#include <specctl/sim/faults.hpp>

#include <chrono>
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::sim {

enum class SpecAlgorithm { none, eagle, eagle3, nextn, standalone, ngram };

std::string_view spec_algorithm_name(SpecAlgorithm algorithm);

enum class LogLevel { debug, info, warning, error };

// Whose personality specsim wears (`--sim-engine`): the command line, the log,
// the health endpoint and the event stream of that engine. docs/specsim.md
// says which engine source file each behaviour comes from.
enum class Engine { sglang, vllm, llamacpp };

std::string_view engine_name(Engine engine);

// The SGLang `launch_server` flags specsim understands, with SGLang's defaults.
struct ServerArgs {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 30000;
  int tp_size = 1;
  bool disable_cuda_graph = false;
  std::optional<int> cuda_graph_max_bs;
  std::vector<int> cuda_graph_bs;
  std::string cuda_graph_backend_decode;  // --cuda-graph-backend-decode
  std::string cuda_graph_backend_prefill; // --cuda-graph-backend-prefill
  bool disable_custom_all_reduce = false;
  bool enable_flashinfer_allreduce_fusion = false;
  bool enable_nccl_nvls = false;
  bool enable_symm_mem = false;
  std::string attention_backend; // empty: SGLang picks (flashinfer here)
  SpecAlgorithm speculative_algorithm = SpecAlgorithm::none;
  std::string speculative_draft_model_path;
  std::optional<int> speculative_num_steps;
  std::optional<int> speculative_eagle_topk;
  std::optional<int> speculative_num_draft_tokens;
  std::optional<double> mem_fraction_static;
  LogLevel log_level = LogLevel::info;
  bool enable_metrics = false;
  int decode_log_interval = 40;
  bool skip_server_warmup = false;
  // --enable-cache-report: usage.prompt_tokens_details.cached_tokens.
  bool enable_cache_report = false;
  // --disable-radix-cache: no prefix cache (SGLang's radix cache is on by default).
  bool disable_radix_cache = false;
};

// vLLM-only flags, kept as given (the JSON ones are also mapped onto ServerArgs).
struct VllmArgs {
  std::string speculative_config;            // --speculative-config JSON
  std::string compilation_config;            // --compilation-config JSON
  std::string speculative_method;            // "eagle3", "mtp", ... from the JSON
  std::optional<int> max_num_seqs;           // --max-num-seqs
  std::string served_model_name;             // --served-model-name
  bool enable_prompt_tokens_details = false; // --enable-prompt-tokens-details
  bool enable_prefix_caching = true;         // --[no-]enable-prefix-caching (on in V1)
};

// llama.cpp `llama-server` flags (common/arg.cpp at 3f545bec), with its defaults.
struct LlamaArgs {
  std::string draft_model;             // -md/--model-draft/--spec-draft-model
  std::vector<std::string> spec_types; // --spec-type, comma-separated, repeatable
  int draft_n_max = 3;                 // common_params_speculative_draft::n_max
  int draft_n_min = 0;
  int ctx_size = 0; // -c; 0: the model's own (4096 per slot here)
  int parallel = 4; // -np; "auto" resolves to 4 (tools/server/server.cpp)
  int threads = -1; // -t
  bool metrics = false;
  bool warmup = true;
  std::string alias;        // -a/--alias: the served model name
  bool cache_prompt = true; // --[no-]cache-prompt
  int cache_ram_mib = 8192; // -cram/--cache-ram: the prompt cache beyond the slots; 0: none
  // Speculation runs only with a draft model and the draft-simple type.
  bool speculates() const;
};

// The simulation-only `--sim-*` flags.
struct SimArgs {
  std::chrono::milliseconds load_time{5000};
  double speed = 1.0;
  std::string profile = "default";
  FaultSet faults;
  std::string gpu_dir; // empty: $SPECSIM_GPU_DIR, then a per-user default
  std::uint64_t seed = 0;
  // SGLang's single-threaded loader bar ("Loading safetensors checkpoint
  // shards") instead of the default multi-threaded one (--sim-loader).
  bool single_thread_loader = false;
  // The prefix cache's capacity in tokens (--sim-prefix-cache-tokens); 0: the KV cache's.
  long prefix_cache_tokens = 0;
};

struct Options {
  Engine engine = Engine::sglang;
  ServerArgs server;
  VllmArgs vllm;
  LlamaArgs llama;
  SimArgs sim;
  bool help = false;
};

// A command-line complaint. argparse's (SGLang, vLLM): the text after
// "specsim: error: ", after the usage, exit 2. llama.cpp's: printed as is,
// exit 1 (common_params_parse prints the exception text; main returns 1).
enum class ArgStyle { argparse, llamacpp };
struct ArgError {
  std::string message;
  ArgStyle style = ArgStyle::argparse;
};

// Parses the arguments after the program name. `--sim-engine X` (anywhere,
// default sglang) picks the personality; the rest is parsed the way that
// engine parses it: SGLang's and vLLM's argparse (separate values or
// `--flag=value`, every unknown token reported at once) or llama.cpp's
// common_params_parse (the first unknown argument is fatal).
std::expected<Options, ArgError> parse_args(std::span<const std::string> args);

// argparse's one-line usage and the full --help text.
std::string usage_text();
std::string help_text();

// The `server_args=ServerArgs(...)` log line body, in Python repr.
std::string server_args_repr(const ServerArgs& args);

} // namespace specctl::sim
