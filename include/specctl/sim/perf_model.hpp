#pragma once

#include <specctl/sim/options.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::sim {

// The numbers behind one simulated deployment. Durations are model time in
// milliseconds (before --sim-speed); docs/specsim.md explains each one and
// how the default profile was fitted to the seeds.
struct Profile {
  const char* name;
  const char* description;
  // Emit tokens as fast as the socket takes them, ignoring every cost below.
  bool flood;

  // Forward-pass costs at reference_tp GPUs.
  int reference_tp;
  double weights_ms;            // one token per request, batch 1, CUDA graph, fused all-reduce
  double token_ms;              // each further token in the pass (batch x tokens per request)
  double eager_ms;              // extra per pass run without a CUDA graph
  int allreduces;               // all-reduces per forward pass
  double allreduce_fused_ms;    // FlashInfer fusion
  double allreduce_captured_ms; // NCCL inside a captured one-token decode graph
  double allreduce_nccl_ms;     // NCCL in verify, prefill and eager passes
  double custom_allreduce_factor;
  double symm_mem_factor;
  double nvls_factor;
  double prefill_ms;
  double prefill_token_ms;

  // Speculative decoding.
  double draft_ms;        // one draft step, fixed part
  double draft_token_ms;  // one draft step, per request and topk branch
  double draft_extend_ms; // the draft model's share of a prefill
  double verify_ms;       // fixed extra of a verify pass (tree mask, sampling)
  double spec_request_ms; // per request per verify pass (scheduler bookkeeping)
  double accept_first;    // chance the first draft token is accepted (EAGLE-3, topk 1)
  double accept_decay;    // each further position is accepted with this factor less

  // Scheduling and memory.
  int default_cuda_graph_max_bs;
  int chunked_prefill_tokens;
  int max_running_requests;
  int context_len;
  double default_mem_fraction;
  double weights_gib;
  double draft_weights_gib;
  int weight_shards;
  int draft_shards;
  double kv_bytes_per_token; // per GPU
  const char* architecture;
};

std::span<const Profile> profiles();
const Profile* find_profile(std::string_view name);

struct SpecConfig {
  SpecAlgorithm algorithm = SpecAlgorithm::eagle3;
  int steps = 3;
  int topk = 1;
  int draft_tokens = 4;
};

// What the launch flags change in the cost of a step.
struct Variant {
  int tp = 1;
  bool cuda_graph = true;
  int cuda_graph_max_bs = 0;
  bool fusion = false;
  bool custom_all_reduce = true;
  bool nvls = false;
  bool symm_mem = false;
  double attention_factor = 1.0;
  std::optional<SpecConfig> spec;
  double mem_fraction_static = 0.85;
  // Requests that run at once; 0: the profile's max_running_requests.
  int max_running = 0;
};

struct VariantResult {
  Variant variant;
  // Lines SGLang would log about adjusted settings.
  std::vector<std::string> warnings;
};

VariantResult make_variant(const ServerArgs& args, const Profile& profile);

class PerfModel {
public:
  PerfModel(const Profile& profile, Variant variant);

  const Profile& profile() const { return *m_profile; }
  const Variant& variant() const { return m_variant; }
  bool speculative() const { return m_variant.spec.has_value(); }
  bool graph_for(int batch) const;

  // One decode step for `batch` requests without speculation.
  double decode_ms(int batch) const;
  // One speculative cycle (draft steps + verify) for `batch` requests.
  double spec_cycle_ms(int batch) const;
  double step_ms(int batch) const { return speculative() ? spec_cycle_ms(batch) : decode_ms(batch); }
  // One prefill pass over `tokens` prompt tokens of `seqs` requests.
  double prefill_ms(int tokens, int seqs) const;

  // Tokens one request gains per verify pass: accepted drafts + the bonus token.
  // `category` is an index in spec_categories() (a built-in prompt's task) or -1
  // for any other prompt, which gets the profile's own acceptance.
  double mean_accept_length(int category = -1) const;
  int max_accept_length() const { return static_cast<int>(m_accept_cdf.size()); }
  // Inverse CDF of the accept length, for u in [0, 1).
  int accept_length_for(double u, int category = -1) const;

private:
  enum class Pass { decode_graph, other };
  double compute_scale() const;
  double allreduce_total_ms(Pass pass) const;

  const Profile* m_profile;
  Variant m_variant;
  struct AcceptModel {
    std::vector<double> cdf{}; // P(accept length <= i + 1)
    double mean = 1.0;
  };
  AcceptModel accept_model(double first) const;

  std::vector<double> m_accept_cdf; // P(accept length <= i + 1)
  double m_mean_accept = 1.0;
  // Per spec_categories() entry: the first-draft acceptance rescaled so the mean
  // accept length is the category's ratio times the profile's.
  std::vector<AcceptModel> m_category_accept;
};

} // namespace specctl::sim
