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

// The SGLang `launch_server` flags specsim understands, with SGLang's defaults.
struct ServerArgs {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 30000;
  int tp_size = 1;
  bool disable_cuda_graph = false;
  std::optional<int> cuda_graph_max_bs;
  std::vector<int> cuda_graph_bs;
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
};

// The simulation-only `--sim-*` flags.
struct SimArgs {
  std::chrono::milliseconds load_time{5000};
  double speed = 1.0;
  std::string profile = "default";
  FaultSet faults;
  std::string gpu_dir; // empty: $SPECSIM_GPU_DIR, then a per-user default
  std::uint64_t seed = 0;
};

struct Options {
  ServerArgs server;
  SimArgs sim;
  bool help = false;
};

// An argparse-style complaint: the text after "specsim: error: ".
struct ArgError {
  std::string message;
};

// Parses the arguments after the program name the way SGLang's argparse
// parser does: separate values (`--tp-size 8`) or `--flag=value`, every
// unknown token reported at once, required flags checked first.
std::expected<Options, ArgError> parse_args(std::span<const std::string> args);

// argparse's one-line usage and the full --help text.
std::string usage_text();
std::string help_text();

// The `server_args=ServerArgs(...)` log line body, in Python repr.
std::string server_args_repr(const ServerArgs& args);

} // namespace specctl::sim
