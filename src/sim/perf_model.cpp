#include <specctl/sim/perf_model.hpp>
#include <specctl/sim/spec_categories.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace specctl::sim {
namespace {

// Kimi-K2.5 INT4 (61 layers, MLA) on 8 GPUs over PCIe, fitted to the seeds:
// baseline 92.6 tok/s single-stream and 773 tok/s at 250 streams; EAGLE-3
// (2 steps, topk 1, 3 draft tokens) 96.1 tok/s single-stream saturating near
// 354 tok/s; EAGLE-3 without all-reduce fusion 54.1 tok/s. docs/specsim.md.
constexpr Profile k_default_profile{
    .name = "default",
    .description = "Kimi-K2.5 INT4, tp 8, calibrated to the seeds",
    .flood = false,
    .reference_tp = 8,
    .weights_ms = 10.1675,
    .token_ms = 1.2072,
    .eager_ms = 12.0,
    .allreduces = 122,
    .allreduce_fused_ms = 0.005,
    .allreduce_captured_ms = 0.0051,
    .allreduce_nccl_ms = 0.1344,
    .custom_allreduce_factor = 0.6,
    .symm_mem_factor = 0.75,
    .nvls_factor = 0.85,
    .prefill_ms = 20.0,
    .prefill_token_ms = 0.04,
    .draft_ms = 1.5,
    .draft_token_ms = 0.05,
    .draft_extend_ms = 2.0,
    .verify_ms = 2.3067,
    .spec_request_ms = 1.7216,
    .accept_first = 0.62,
    .accept_decay = 0.9,
    .default_cuda_graph_max_bs = 160,
    .chunked_prefill_tokens = 8192,
    .max_running_requests = 4096,
    .context_len = 262144,
    .default_mem_fraction = 0.85,
    .weights_gib = 547.0,
    .draft_weights_gib = 2.1,
    .weight_shards = 64,
    .draft_shards = 1,
    .kv_bytes_per_token = 70272.0,
    .architecture = "DeepseekV3ForCausalLM",
};

constexpr Profile make_flood_profile() {
  Profile p = k_default_profile;
  p.name = "flood";
  p.description = "no performance model: tokens as fast as the socket takes them";
  p.flood = true;
  return p;
}

constexpr std::array k_profiles{k_default_profile, make_flood_profile()};

// Relative attention cost of the backends, flashinfer being the reference.
double attention_factor(std::string_view backend) {
  constexpr std::array<std::pair<std::string_view, double>, 8> k_factors{{
      {"fa3", 0.98},
      {"fa4", 0.97},
      {"flashmla", 0.97},
      {"cutlass_mla", 0.97},
      {"trtllm_mla", 0.96},
      {"triton", 1.08},
      {"flex_attention", 1.2},
      {"torch_native", 1.6},
  }};
  for (const auto& [name, factor] : k_factors) {
    if (name == backend) {
      return factor;
    }
  }
  return 1.0;
}

// How much more (or less) a draft algorithm's first token is accepted than
// EAGLE-3's; NGRAM drafts from the prompt, NEXTN uses the model's own MTP head.
double accept_scale(SpecAlgorithm algorithm) {
  switch (algorithm) {
  case SpecAlgorithm::eagle:
    return 0.9;
  case SpecAlgorithm::nextn:
    return 1.1;
  case SpecAlgorithm::standalone:
    return 0.95;
  case SpecAlgorithm::ngram:
    return 0.45;
  default:
    return 1.0;
  }
}

} // namespace

std::span<const Profile> profiles() {
  return k_profiles;
}

const Profile* find_profile(std::string_view name) {
  for (const auto& profile : k_profiles) {
    if (profile.name == name) {
      return &profile;
    }
  }
  return nullptr;
}

VariantResult make_variant(const ServerArgs& args, const Profile& profile) {
  VariantResult result;
  Variant& v = result.variant;
  v.tp = args.tp_size;
  v.cuda_graph = !args.disable_cuda_graph;
  if (args.cuda_graph_max_bs) {
    v.cuda_graph_max_bs = *args.cuda_graph_max_bs;
  } else if (!args.cuda_graph_bs.empty()) {
    v.cuda_graph_max_bs = std::ranges::max(args.cuda_graph_bs);
  } else {
    v.cuda_graph_max_bs = profile.default_cuda_graph_max_bs;
  }
  v.fusion = args.enable_flashinfer_allreduce_fusion && args.tp_size > 1;
  v.custom_all_reduce = !args.disable_custom_all_reduce;
  v.nvls = args.enable_nccl_nvls;
  v.symm_mem = args.enable_symm_mem;
  v.attention_factor = attention_factor(args.attention_backend);
  v.mem_fraction_static = args.mem_fraction_static.value_or(profile.default_mem_fraction);
  if (args.speculative_algorithm != SpecAlgorithm::none) {
    SpecConfig spec{.algorithm = args.speculative_algorithm};
    if (args.speculative_num_steps) {
      spec.steps = *args.speculative_num_steps;
      spec.topk = *args.speculative_eagle_topk;
      spec.draft_tokens = *args.speculative_num_draft_tokens;
    } else {
      result.warnings.push_back(fmt::format(
          "Auto choose speculative_num_steps={}, speculative_eagle_topk={}, speculative_num_draft_tokens={}",
          spec.steps, spec.topk, spec.draft_tokens));
    }
    if (spec.topk == 1 && spec.draft_tokens != spec.steps + 1) {
      spec.draft_tokens = spec.steps + 1;
      result.warnings.push_back("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                                "speculative_eagle_topk == 1");
    }
    result.warnings.push_back("Overlap scheduler is disabled because of using eagle speculative decoding.");
    v.spec = spec;
  }
  return result;
}

PerfModel::PerfModel(const Profile& profile, Variant variant) : m_profile(&profile), m_variant(std::move(variant)) {
  if (!m_variant.spec) {
    m_accept_cdf = {1.0};
    return;
  }
  const auto& spec = *m_variant.spec;
  const double first = std::min(0.95, profile.accept_first * accept_scale(spec.algorithm));
  AcceptModel base = accept_model(first);
  m_accept_cdf = base.cdf;
  m_mean_accept = base.mean;
  // Each built-in category: the first-draft acceptance whose mean accept length is
  // the category's ratio of the profile's, found by bisection (the mean grows with
  // it); clamped to what the draft depth allows.
  for (const auto& category : spec_categories()) {
    const double target = category.accept_ratio * m_mean_accept;
    double low = 0.0;
    double high = 0.999;
    for (int i = 0; i < 60; ++i) {
      const double mid = (low + high) / 2.0;
      (accept_model(mid).mean < target ? low : high) = mid;
    }
    m_category_accept.push_back(category.accept_ratio == 1.0 ? base : accept_model((low + high) / 2.0));
  }
}

PerfModel::AcceptModel PerfModel::accept_model(double first) const {
  const auto& spec = *m_variant.spec;
  const int depth = std::max(0, std::min(spec.steps, spec.draft_tokens - 1));
  // P(exactly j drafts accepted) = a_1 ... a_j (1 - a_{j+1}); topk branches
  // per position give k chances: a_i(k) = 1 - (1 - a_i)^k.
  std::vector<double> pmf;
  double reach = 1.0;
  for (int j = 0; j <= depth; ++j) {
    double next = 0.0;
    if (j < depth) {
      const double single = first * std::pow(m_profile->accept_decay, j);
      next = 1.0 - std::pow(1.0 - single, spec.topk);
    }
    pmf.push_back(reach * (1.0 - next));
    reach *= next;
  }
  AcceptModel model;
  model.mean = 0.0;
  double cumulative = 0.0;
  for (std::size_t j = 0; j < pmf.size(); ++j) {
    cumulative += pmf[j];
    model.cdf.push_back(cumulative);
    model.mean += pmf[j] * static_cast<double>(j + 1);
  }
  model.cdf.back() = 1.0;
  return model;
}

bool PerfModel::graph_for(int batch) const {
  return m_variant.cuda_graph && batch <= m_variant.cuda_graph_max_bs;
}

double PerfModel::compute_scale() const {
  return static_cast<double>(m_profile->reference_tp) / m_variant.tp * m_variant.attention_factor;
}

double PerfModel::allreduce_total_ms(Pass pass) const {
  if (m_variant.tp <= 1) {
    return 0.0;
  }
  // Ring all-reduce latency grows with the number of ranks.
  const double ranks = static_cast<double>(m_variant.tp - 1) / (m_profile->reference_tp - 1);
  double each = 0.0;
  if (m_variant.fusion) {
    each = m_profile->allreduce_fused_ms;
  } else if (pass == Pass::decode_graph) {
    each = m_profile->allreduce_captured_ms;
  } else {
    each = m_profile->allreduce_nccl_ms;
    if (m_variant.custom_all_reduce) {
      each *= m_profile->custom_allreduce_factor;
    }
    if (m_variant.symm_mem) {
      each *= m_profile->symm_mem_factor;
    }
    if (m_variant.nvls) {
      each *= m_profile->nvls_factor;
    }
  }
  return m_profile->allreduces * each * ranks;
}

double PerfModel::decode_ms(int batch) const {
  const bool graph = graph_for(batch);
  const auto& p = *m_profile;
  return compute_scale() * (p.weights_ms + p.token_ms * (batch - 1)) + (graph ? 0.0 : p.eager_ms) +
         allreduce_total_ms(graph ? Pass::decode_graph : Pass::other);
}

double PerfModel::spec_cycle_ms(int batch) const {
  const auto& p = *m_profile;
  const auto& spec = *m_variant.spec;
  const bool graph = graph_for(batch);
  const double draft =
      spec.algorithm == SpecAlgorithm::ngram ? 0.0 : spec.steps * (p.draft_ms + p.draft_token_ms * batch * spec.topk);
  const double verify_tokens = static_cast<double>(batch) * spec.draft_tokens;
  const double verify = compute_scale() * (p.weights_ms + p.token_ms * (verify_tokens - 1)) + p.verify_ms +
                        p.spec_request_ms * batch + (graph ? 0.0 : p.eager_ms) + allreduce_total_ms(Pass::other);
  return draft + verify;
}

double PerfModel::prefill_ms(int tokens, int seqs) const {
  const auto& p = *m_profile;
  double cost = compute_scale() * (p.prefill_ms + p.prefill_token_ms * tokens) + allreduce_total_ms(Pass::other);
  if (speculative()) {
    cost += p.draft_extend_ms + p.draft_token_ms * seqs;
  }
  return cost;
}

double PerfModel::mean_accept_length(int category) const {
  if (category >= 0 && static_cast<std::size_t>(category) < m_category_accept.size()) {
    return m_category_accept[static_cast<std::size_t>(category)].mean;
  }
  return m_mean_accept;
}

int PerfModel::accept_length_for(double u, int category) const {
  const std::vector<double>& cdf = category >= 0 && static_cast<std::size_t>(category) < m_category_accept.size()
                                       ? m_category_accept[static_cast<std::size_t>(category)].cdf
                                       : m_accept_cdf;
  for (std::size_t i = 0; i < cdf.size(); ++i) {
    if (u < cdf[i]) {
      return static_cast<int>(i) + 1;
    }
  }
  return static_cast<int>(cdf.size());
}

} // namespace specctl::sim
