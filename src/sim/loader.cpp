#include <specctl/sim/loader.hpp>

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

namespace specctl::sim {
namespace {

constexpr double k_gib_per_mib = 1.0 / 1024.0;
constexpr double k_bytes_per_gib = 1024.0 * 1024.0 * 1024.0;
// Memory a CUDA context and NCCL take before any weight arrives.
constexpr double k_context_gib = 0.53;
// CUDA graphs for every captured batch size.
constexpr double k_graph_gib = 1.21;
// The largest share of the static memory budget weights are shown to take.
constexpr double k_max_weights_share = 0.9;

// Shares of the load time, as a 14-minute Kimi-K2.5 load spends it.
constexpr double k_init_share = 0.03;
constexpr double k_weights_share = 0.80;
constexpr double k_draft_share = 0.04;
constexpr double k_kv_share = 0.03;
constexpr double k_graph_share = 0.10;

// tqdm descriptions: SGLang's default multi-threaded loader and the
// single-threaded one (and vLLM's), per ENGINES.md.
constexpr std::string_view k_multi_thread_bar = "Multi-thread loading shards";
constexpr std::string_view k_bar = "Loading safetensors checkpoint shards";
// Of the CUDA-graph share, the part an EAGLE draft's own graphs take.
constexpr double k_draft_graph_share = 0.3;

struct Event {
  double at = 0.0; // fraction of the load time
  std::function<void()> action;
};

long to_mib(double gib) {
  return std::lround(gib * 1024.0);
}

// Everything after the first line of a Python traceback, without prefixes.
constexpr std::string_view k_load_traceback =
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2764, in "
    "run_scheduler_process\n"
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/tp_worker.py\", line 95, in __init__\n"
    "    self.model_runner = ModelRunner(\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py\", line 321, in "
    "load_model\n"
    "    self.model = get_model(model_config=self.model_config, load_config=self.load_config)\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/model_loader/loader.py\", line 421, in "
    "load_weights_and_postprocess\n"
    "    model.load_weights(weights)\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/models/deepseek_v2.py\", line 2710, in "
    "load_weights\n"
    "    weight_loader(param, loaded_weight)";

constexpr std::string_view k_oom_traceback =
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2764, in "
    "run_scheduler_process\n"
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py\", line 1702, in "
    "init_memory_pool\n"
    "    self.token_to_kv_pool = MLATokenToKVPool(\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/mem_cache/memory_pool.py\", line 812, in "
    "_create_buffers\n"
    "    torch.zeros((size + page_size, 1, kv_lora_rank + qk_rope_head_dim), dtype=self.store_dtype, "
    "device=device)";

constexpr std::string_view k_serving_traceback =
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2770, in "
    "run_scheduler_process\n"
    "    scheduler.event_loop_normal()\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 1012, in "
    "event_loop_normal\n"
    "    result = self.run_batch(batch)\n"
    "  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 1871, in run_batch\n"
    "    logits_output, next_token_ids, can_run_cuda_graph = self.tp_worker.forward_batch_generation(";

[[noreturn]] void hang_forever() {
  for (;;) {
    ::pause();
  }
}

} // namespace

MemoryPlan plan_memory(const PerfModel& model, const GpuConfig& gpus) {
  const auto& profile = model.profile();
  const auto& variant = model.variant();
  MemoryPlan plan;
  plan.total_gib = static_cast<double>(gpus.memory_total_mib) * k_gib_per_mib;
  plan.context_gib = k_context_gib;
  const double budget = variant.mem_fraction_static * plan.total_gib;
  // Memory is not a limit here: weights too big for the GPU (a small tp) are
  // shown as filling most of the static budget instead of failing like SGLang.
  plan.weights_gib = std::min(profile.weights_gib / variant.tp, k_max_weights_share * budget);
  plan.draft_gib = variant.spec ? profile.draft_weights_gib / variant.tp : 0.0;
  plan.graph_gib = variant.cuda_graph ? k_graph_gib : 0.0;
  const double fixed = plan.context_gib + plan.weights_gib + plan.draft_gib;
  plan.kv_gib = std::max(0.0, budget - fixed);
  // A tiny KV pool still serves requests: capacity only shows in "token usage".
  plan.kv_tokens = std::max(100'000L, static_cast<long>(plan.kv_gib * k_bytes_per_gib / profile.kv_bytes_per_token));
  return plan;
}

void log_scheduler_crash(const Log& log, CrashSite site, std::string_view exception_line) {
  log.scheduler(LogLevel::error, "Scheduler hit an exception: Traceback (most recent call last):");
  log.raw(site == CrashSite::loading ? k_load_traceback : k_serving_traceback);
  log.raw(exception_line);
  log.raw("");
  log.main(LogLevel::error, "Received sigquit from a child process. It usually means the child failed.");
}

namespace {

std::optional<int> run_load_sglang(const Options& options, const PerfModel& model, const MemoryPlan& memory,
                                   const Log& log, WorkerPool& workers);
std::optional<int> run_load_vllm(const Options& options, const PerfModel& model, const MemoryPlan& memory,
                                 const Log& log, WorkerPool& workers);
std::optional<int> run_load_llamacpp(const Options& options, const PerfModel& model, const Log& log);

} // namespace

std::optional<int> run_load(const Options& options, const PerfModel& model, const MemoryPlan& memory, const Log& log,
                            WorkerPool& workers) {
  switch (options.engine) {
  case Engine::vllm:
    return run_load_vllm(options, model, memory, log, workers);
  case Engine::llamacpp:
    return run_load_llamacpp(options, model, log);
  case Engine::sglang:
    break;
  }
  return run_load_sglang(options, model, memory, log, workers);
}

namespace {

// The staged load fault that strikes first (crash-load, oom, hang), if any.
const Fault* load_fault(const FaultSet& faults) {
  const Fault* fault = faults.find(FaultKind::crash_load);
  for (FaultKind kind : {FaultKind::oom, FaultKind::hang}) {
    const Fault* other = faults.find(kind);
    if (other != nullptr && (fault == nullptr || other->fraction < fault->fraction)) {
      fault = other;
    }
  }
  return fault;
}

// Where each part of a GPU engine's load ends, as fractions of its load time: both the
// SGLang and the vLLM personality load weights, a draft, the KV cache and graphs in this order.
struct LoadShares {
  double load_s;
  double weights_share;
  double weights_start;
  double weights_end;
  double draft_end;
  double kv_end;
};

LoadShares load_shares(const Options& options, bool spec, bool graphs) {
  LoadShares shares{};
  shares.load_s = std::chrono::duration<double>(options.sim.load_time).count() / options.sim.speed;
  shares.weights_share = k_weights_share + (spec ? 0.0 : k_draft_share) + (graphs ? 0.0 : k_graph_share);
  shares.weights_start = k_init_share;
  shares.weights_end = shares.weights_start + shares.weights_share;
  shares.draft_end = shares.weights_end + (spec ? k_draft_share : 0.0);
  shares.kv_end = shares.draft_end + k_kv_share;
  return shares;
}

// Plays `events` at their fractions of load_s; a fault strikes at its own.
std::optional<int> play(std::vector<Event>& events, double load_s, const Fault* fault,
                        const std::function<int()>& strike_action) {
  const auto start = std::chrono::steady_clock::now();
  const auto wait_until = [&](double fraction) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(fraction * load_s)));
  };
  const auto strike = [&]() -> int {
    wait_until(fault->fraction);
    if (fault->kind == FaultKind::hang) {
      hang_forever();
    }
    return strike_action();
  };
  std::ranges::stable_sort(events, {}, &Event::at);
  for (const auto& event : events) {
    if (fault != nullptr && fault->fraction < event.at) {
      return strike();
    }
    wait_until(event.at);
    event.action();
  }
  if (fault != nullptr) {
    return strike();
  }
  return std::nullopt;
}

std::optional<int> run_load_sglang(const Options& options, const PerfModel& model, const MemoryPlan& memory,
                                   const Log& log, WorkerPool& workers) {
  const std::string_view bar = options.sim.single_thread_loader ? k_bar : k_multi_thread_bar;
  const auto& profile = model.profile();
  const auto& variant = model.variant();
  const int tp = variant.tp;
  const bool spec = variant.spec.has_value();
  const bool graphs = variant.cuda_graph;
  const auto [load_s, weights_share, weights_start, weights_end, draft_end, kv_end] =
      load_shares(options, spec, graphs);

  const auto avail = [&](double used_gib) { return memory.total_gib - used_gib; };
  const auto each_rank = [&](const std::function<std::string(int)>& line) {
    for (int rank = 0; rank < tp; ++rank) {
      log.scheduler(LogLevel::info, line(rank), rank);
    }
  };

  std::vector<Event> events;
  events.push_back({0.0, [&] {
                      each_rank([](int) { return std::string("Init torch distributed begin."); });
                      workers.set_used_mib(to_mib(memory.context_gib));
                    }});
  events.push_back({weights_start, [&] {
                      each_rank([&](int) {
                        return fmt::format("Init torch distributed ends. mem usage={:.2f} GB", memory.context_gib);
                      });
                      each_rank([&](int) {
                        return fmt::format("Load weight begin. avail mem={:.2f} GB", avail(memory.context_gib));
                      });
                      log.raw(progress_line(bar, 0, profile.weight_shards, 0.0));
                    }});
  for (int shard = 1; shard <= profile.weight_shards; ++shard) {
    const double at = weights_start + weights_share * shard / profile.weight_shards;
    events.push_back({at, [&, shard, at] {
                        log.raw(progress_line(bar, shard, profile.weight_shards, (at - weights_start) * load_s));
                        workers.set_used_mib(
                            to_mib(memory.context_gib + memory.weights_gib * shard / profile.weight_shards));
                      }});
  }
  events.push_back({weights_end, [&] {
                      each_rank([&](int) {
                        return fmt::format("Load weight end. elapsed={:.2f} s, type={}, dtype=torch.bfloat16, "
                                           "avail mem={:.2f} GB, mem usage={:.2f} GB.",
                                           weights_share * load_s, profile.architecture,
                                           avail(memory.context_gib + memory.weights_gib), memory.weights_gib);
                      });
                    }});
  if (spec) {
    events.push_back({weights_end, [&] {
                        const double used = memory.context_gib + memory.weights_gib;
                        each_rank(
                            [&](int) { return fmt::format("Load weight begin. avail mem={:.2f} GB", avail(used)); });
                        log.raw(progress_line(bar, 0, profile.draft_shards, 0.0));
                      }});
    events.push_back(
        {draft_end, [&] {
           const double used = memory.context_gib + memory.weights_gib + memory.draft_gib;
           log.raw(progress_line(bar, profile.draft_shards, profile.draft_shards, (draft_end - weights_end) * load_s));
           each_rank([&](int) {
             return fmt::format("Load weight end. elapsed={:.2f} s, type=LlamaForCausalLMEagle3, "
                                "dtype=torch.bfloat16, avail mem={:.2f} GB, mem usage={:.2f} GB.",
                                (draft_end - weights_end) * load_s, avail(used), memory.draft_gib);
           });
           workers.set_used_mib(to_mib(used));
         }});
  }
  events.push_back({kv_end, [&] {
                      const double used = memory.context_gib + memory.weights_gib + memory.draft_gib + memory.kv_gib;
                      each_rank([&](int) {
                        return fmt::format("KV Cache is allocated. #tokens: {}, KV size: {:.2f} GB", memory.kv_tokens,
                                           memory.kv_gib);
                      });
                      each_rank([&](int) { return fmt::format("Memory pool end. avail mem={:.2f} GB", avail(used)); });
                      workers.set_used_mib(to_mib(used));
                      if (graphs) {
                        each_rank([&](int) {
                          return fmt::format("Capture cuda graph begin. This can take up to several minutes. avail "
                                             "mem={:.2f} GB",
                                             avail(used));
                        });
                      }
                    }});
  // EAGLE-style drafts capture graphs of their own after the target's
  // (ENGINES.md: "Capture draft cuda graph begin/end").
  const bool draft_graphs = graphs && spec && variant.spec->algorithm != SpecAlgorithm::ngram;
  const double main_graph_share = draft_graphs ? k_graph_share * (1.0 - k_draft_graph_share) : k_graph_share;
  if (draft_graphs) {
    events.push_back({kv_end + main_graph_share, [&] {
                        each_rank([&](int) {
                          return fmt::format("Capture cuda graph end. Time elapsed: {:.2f} s. mem usage={:.2f} GB. "
                                             "avail mem={:.2f} GB.",
                                             main_graph_share * load_s, memory.graph_gib, avail(memory.used_gib()));
                        });
                        each_rank([&](int) {
                          return fmt::format("Capture draft cuda graph begin. This can take up to several minutes. "
                                             "avail mem={:.2f} GB",
                                             avail(memory.used_gib()));
                        });
                      }});
  }
  events.push_back({1.0, [&] {
                      if (draft_graphs) {
                        each_rank([&](int) {
                          return fmt::format("Capture draft cuda graph end. Time elapsed: {:.2f} s. mem usage=0.00 "
                                             "GB. avail mem={:.2f} GB.",
                                             (k_graph_share - main_graph_share) * load_s, avail(memory.used_gib()));
                        });
                      } else if (graphs) {
                        each_rank([&](int) {
                          return fmt::format("Capture cuda graph end. Time elapsed: {:.2f} s. mem usage={:.2f} GB. "
                                             "avail mem={:.2f} GB.",
                                             k_graph_share * load_s, memory.graph_gib, avail(memory.used_gib()));
                        });
                      }
                      workers.set_used_mib(to_mib(memory.used_gib()));
                      log.scheduler(LogLevel::info,
                                    fmt::format("max_total_num_tokens={}, chunked_prefill_size={}, "
                                                "max_prefill_tokens=16384, max_running_requests={}, context_len={}, "
                                                "available_gpu_mem={:.2f} GB",
                                                memory.kv_tokens, profile.chunked_prefill_tokens,
                                                profile.max_running_requests, profile.context_len,
                                                avail(memory.used_gib())));
                    }});

  return play(events, load_s, load_fault(options.sim.faults), [&]() -> int {
    const Fault* fault = load_fault(options.sim.faults);
    if (fault->kind == FaultKind::oom) {
      log.scheduler(LogLevel::error, "Scheduler hit an exception: Traceback (most recent call last):");
      log.raw(k_oom_traceback);
      log.raw(fmt::format("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                          "capacity of {:.2f} GiB of which 1.05 GiB is free. Including non-PyTorch memory, this "
                          "process has {:.2f} GiB memory in use. Of the allocated memory {:.2f} GiB is allocated by "
                          "PyTorch, and 312.45 MiB is reserved by PyTorch but unallocated.",
                          memory.total_gib, memory.total_gib - 1.05, memory.total_gib - 1.5));
      log.raw("");
      log.main(LogLevel::error, "Received sigquit from a child process. It usually means the child failed.");
      return 1;
    }
    log_scheduler_crash(log, CrashSite::loading,
                        "RuntimeError: shape mismatch: value tensor of shape [7168, 2048] cannot be broadcast "
                        "to indexing result of shape [7168, 4096]");
    return 1;
  });
}

// vLLM's engine-core process prints the load; its lines carry that process's
// prefix (vllm/v1/engine/core.py runs it as EngineCore_DP0).
constexpr std::string_view k_vllm_core = "EngineCore_DP0";

std::optional<int> run_load_vllm(const Options& options, const PerfModel& model, const MemoryPlan& memory,
                                 const Log& log, WorkerPool& workers) {
  const auto& profile = model.profile();
  const auto& variant = model.variant();
  const bool spec = variant.spec.has_value();
  const bool graphs = variant.cuda_graph;
  const auto [load_s, weights_share, weights_start, weights_end, draft_end, kv_end] =
      load_shares(options, spec, graphs);
  const std::string bar_prefix = fmt::format("({} pid={}) ", k_vllm_core, ::getpid());
  const auto core = [&](LogLevel level, std::string_view file, std::string_view message) {
    log.vllm(level, file, message, k_vllm_core);
  };

  std::vector<Event> events;
  events.push_back({0.0, [&] { workers.set_used_mib(to_mib(memory.context_gib)); }});
  events.push_back({weights_start, [&] {
                      core(LogLevel::info, "gpu_model_runner.py:2602",
                           fmt::format("Starting to load model {}...", options.server.model_path));
                      log.raw(bar_prefix + progress_line(k_bar, 0, profile.weight_shards, 0.0));
                    }});
  for (int shard = 1; shard <= profile.weight_shards; ++shard) {
    const double at = weights_start + weights_share * shard / profile.weight_shards;
    events.push_back(
        {at, [&, shard, at] {
           log.raw(bar_prefix + progress_line(k_bar, shard, profile.weight_shards, (at - weights_start) * load_s));
           workers.set_used_mib(to_mib(memory.context_gib + memory.weights_gib * shard / profile.weight_shards));
         }});
  }
  events.push_back({weights_end, [&] {
                      // default_loader.py: "Loading weights took %.2f seconds".
                      core(LogLevel::info, "default_loader.py:267",
                           fmt::format("Loading weights took {:.2f} seconds", weights_share * load_s));
                      if (spec) {
                        log.raw(bar_prefix + progress_line(k_bar, 0, profile.draft_shards, 0.0));
                      }
                    }});
  if (spec) {
    events.push_back({draft_end, [&] {
                        log.raw(bar_prefix + progress_line(k_bar, profile.draft_shards, profile.draft_shards,
                                                           (draft_end - weights_end) * load_s));
                        workers.set_used_mib(to_mib(memory.context_gib + memory.weights_gib + memory.draft_gib));
                      }});
  }
  events.push_back({draft_end, [&] {
                      core(LogLevel::info, "gpu_model_runner.py:2653",
                           fmt::format("Model loading took {:.4f} GiB and {:.6f} seconds",
                                       memory.weights_gib + memory.draft_gib, (draft_end - weights_start) * load_s));
                    }});
  events.push_back(
      {kv_end, [&] {
         core(LogLevel::info, "gpu_worker.py:298", fmt::format("Available KV cache memory: {:.2f} GiB", memory.kv_gib));
         core(LogLevel::info, "kv_cache_utils.py:1087", fmt::format("GPU KV cache size: {} tokens", memory.kv_tokens));
         workers.set_used_mib(to_mib(memory.context_gib + memory.weights_gib + memory.draft_gib + memory.kv_gib));
       }});
  events.push_back({1.0, [&] {
                      if (graphs) {
                        // gpu_model_runner.py: "Graph capturing finished in %.0f secs, took %.2f GiB".
                        core(LogLevel::info, "gpu_model_runner.py:3480",
                             fmt::format("Graph capturing finished in {:.0f} secs, took {:.2f} GiB",
                                         k_graph_share * load_s, memory.graph_gib));
                      }
                      workers.set_used_mib(to_mib(memory.used_gib()));
                      core(LogLevel::info, "core.py:210",
                           fmt::format("init engine (profile, create kv cache, warmup model) took {:.2f} seconds",
                                       (1.0 - draft_end) * load_s));
                    }});
  return play(events, load_s, load_fault(options.sim.faults), [&]() -> int {
    const Fault* fault = load_fault(options.sim.faults);
    const std::string exception =
        fault->kind == FaultKind::oom
            ? fmt::format("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                          "capacity of {:.2f} GiB of which 1.05 GiB is free.",
                          memory.total_gib)
            : std::string("RuntimeError: shape mismatch: value tensor of shape [7168, 2048] cannot be broadcast to "
                          "indexing result of shape [7168, 4096]");
    core(LogLevel::error, "core.py:779", "EngineCore failed to start.");
    core(LogLevel::error, "core.py:779", "Traceback (most recent call last):");
    core(LogLevel::error, "core.py:779",
         "  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", line 770, in run_engine_core");
    core(LogLevel::error, "core.py:779", exception);
    const std::string api = fmt::format("(APIServer pid={}) ", ::getpid());
    log.raw(api + "Traceback (most recent call last):");
    log.raw(api + "  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py\", line 928, in "
                  "wait_for_engine_startup");
    log.raw(api + "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}");
    return 1;
  });
}

// llama-server's load (tools/server/server-context.cpp load_model, and the
// draft through common/speculative.cpp): no progress line at any verbosity.
std::optional<int> run_load_llamacpp(const Options& options, const PerfModel& model, const Log& log) {
  const double load_s = std::chrono::duration<double>(options.sim.load_time).count() / options.sim.speed;
  const auto& llama = options.llama;
  const auto srv = [&](LogLevel level, std::string_view func, std::string_view message) {
    // SRV_INF's "srv  %12.*s: ": the function name right-aligned in 12 columns, cut at 12.
    log.llama(level, fmt::format("srv  {:>12.12}: {}", func, message));
  };
  // A model that looks like a file and is not there fails at once, as a
  // missing GGUF does (gguf.cpp, llama.cpp, server.cpp).
  const auto missing = [](const std::string& path) {
    std::error_code ec;
    return path.ends_with(".gguf") && !std::filesystem::is_regular_file(path, ec);
  };
  // The sequence of the capture tests/data/engine-logs/llamacpp-3f545bec/missing-model.log:
  // the fit pass tries the file, then the real load, then clean_up before the last line.
  const auto fail_to_open = [&](const std::string& path, bool draft) {
    const auto open_failed = [&] {
      log.llama(LogLevel::error,
                fmt::format("gguf_init_from_file: failed to open GGUF file '{}' (No such file or directory)", path));
      log.llama(
          LogLevel::error,
          fmt::format("llama_model_load: error loading model: llama_model_loader: failed to load model from {}", path));
      log.llama(LogLevel::error, "llama_model_load_from_file_impl: failed to load model");
    };
    if (!draft) {
      open_failed();
      log.llama(LogLevel::error, "common_fit_params: encountered an error while trying to fit params to free device "
                                 "memory: failed to load model");
    }
    open_failed();
    if (!draft) {
      log.llama(LogLevel::error, fmt::format("cmn  common_init_: failed to load model '{}'", path));
    }
    if (draft) {
      log.llama(LogLevel::error, fmt::format("common_speculative_init_result: failed to load draft model, '{}'", path));
      srv(LogLevel::error, "load_model", fmt::format("failed to load draft model, '{}'", path));
    } else {
      srv(LogLevel::error, "load_model", fmt::format("failed to load model, '{}'", path));
    }
    srv(LogLevel::info, "operator()", "operator(): cleaning up before exit...");
    srv(LogLevel::error, "llama_server", "exiting due to model loading error");
    return 1;
  };
  srv(LogLevel::info, "load_model", fmt::format("loading model '{}'", options.server.model_path));
  if (missing(options.server.model_path)) {
    return fail_to_open(options.server.model_path, false);
  }
  std::vector<Event> events;
  if (!llama.draft_model.empty()) {
    events.push_back({0.85, [&] {
                        log.llama(
                            LogLevel::info,
                            fmt::format("common_speculative_init_result: loading draft model '{}'", llama.draft_model));
                      }});
  }
  events.push_back({1.0, [&] {
                      const int n_ctx_slot = llama.ctx_size > 0                   ? llama.ctx_size
                                             : model.profile().context_len > 4096 ? 4096
                                                                                  : model.profile().context_len;
                      srv(LogLevel::info, "load_model",
                          fmt::format("initializing, n_slots = {}, n_ctx_slot = {}, kv_unified = 'true'",
                                      llama.parallel, n_ctx_slot));
                    }});
  const bool draft_missing = !llama.draft_model.empty() && missing(llama.draft_model);
  if (draft_missing) {
    // The draft fails before the slots are set up.
    events.pop_back();
  }
  auto result = play(events, load_s, load_fault(options.sim.faults), [&]() -> int {
    log.llama(LogLevel::error, "llama_model_load: error loading model: tensor 'blk.12.ffn_down.weight' data is not "
                               "within the file bounds, model is corrupted or incomplete");
    log.llama(LogLevel::error, "llama_model_load_from_file_impl: failed to load model");
    srv(LogLevel::error, "load_model", fmt::format("failed to load model, '{}'", options.server.model_path));
    srv(LogLevel::error, "llama_server", "exiting due to model loading error");
    return 1;
  });
  if (!result && draft_missing) {
    return fail_to_open(llama.draft_model, true);
  }
  return result;
}

} // namespace

} // namespace specctl::sim
