#include <specctl/sim/gpu_state.hpp>
#include <specctl/sim/http_server.hpp>
#include <specctl/sim/loader.hpp>
#include <specctl/sim/specsim.hpp>
#include <specctl/sim/workers.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>

#include <fmt/format.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>

namespace specctl::sim {
namespace {

namespace net = boost::asio;

// SGLang's warm-up: one short generation through the whole stack.
constexpr int k_warmup_prompt_tokens = 7;
constexpr int k_warmup_tokens = 8;

// A 1000-stream benchmark needs more descriptors than the usual soft limit;
// SGLang raises it the same way.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

std::string faults_text(const FaultSet& faults) {
  std::string out;
  for (const auto& fault : faults.all()) {
    out += fmt::format("{}'{}'", out.empty() ? "" : ", ", fault_name(fault.kind));
  }
  return "[" + out + "]";
}

// Python's repr of the socket address in asyncio's bind error.
std::string address_repr(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? fmt::format("('{}', {}, 0, 0)", host, port)
                                             : fmt::format("('{}', {})", host, port);
}

std::string lowercase(std::string text) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return text;
}

// Marks the server ready when the warm-up generation finishes.
class WarmupSink : public TokenSink {
public:
  explicit WarmupSink(ServerContext& context) : m_context(context) {}
  void on_tokens(int, bool finished) override {
    if (finished) {
      become_ready(m_context);
    }
  }

  static void become_ready(ServerContext& context) {
    context.ready = true;
    context.log->main(LogLevel::info, "The server is fired up and ready to roll!");
  }

private:
  ServerContext& m_context;
};

} // namespace

namespace {

bool env_is_off(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && (std::string_view(value) == "0" || lowercase(value) == "false");
}

// The engine's prefix cache: SGLang's radix cache (on unless --disable-radix-cache,
// page_size 1 in server_args.py), vLLM's block hashes (on unless
// --no-enable-prefix-caching; a hit is whole blocks of CacheConfig.block_size, 16),
// llama.cpp's slot cache and its RAM prompt cache (cache_prompt on unless
// --no-cache-prompt; with --cache-ram 0 only the -np slots keep a prompt each).
// Capacity: --sim-prefix-cache-tokens, or the KV cache's tokens.
PrefixCacheConfig prefix_cache_config(const Options& options, long kv_tokens) {
  constexpr int k_vllm_block_size = 16;
  PrefixCacheConfig config;
  config.capacity_tokens = options.sim.prefix_cache_tokens > 0 ? options.sim.prefix_cache_tokens : kv_tokens;
  switch (options.engine) {
  case Engine::sglang:
    config.capacity_tokens = options.server.disable_radix_cache ? 0 : config.capacity_tokens;
    break;
  case Engine::vllm:
    config.capacity_tokens = options.vllm.enable_prefix_caching ? config.capacity_tokens : 0;
    config.block = k_vllm_block_size;
    break;
  case Engine::llamacpp:
    config.capacity_tokens = options.llama.cache_prompt ? config.capacity_tokens : 0;
    config.max_entries = options.llama.cache_ram_mib == 0 ? std::max(1, options.llama.parallel) : 0;
    break;
  }
  return config;
}

double env_seconds(const char* name, double fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    return fallback;
  }
  char* end = nullptr;
  const double parsed = std::strtod(value, &end);
  return end != value && parsed > 0.0 ? parsed : fallback;
}

// The processes that hold GPU memory, named as each engine names them.
std::vector<std::string> worker_names(const Options& options) {
  std::vector<std::string> names;
  const int tp = options.server.tp_size;
  for (int rank = 0; rank < tp; ++rank) {
    switch (options.engine) {
    case Engine::sglang:
      names.push_back(fmt::format("sglang::scheduler_TP{}", rank));
      break;
    case Engine::vllm:
      // vLLM's setproctitle names: the engine core holds the GPU at tp 1, workers above.
      names.push_back(tp == 1 ? std::string("VLLM::EngineCore") : fmt::format("VLLM::Worker_TP{}", rank));
      break;
    case Engine::llamacpp:
      // llama-server is one process (a CPU build here): nothing on the fake GPUs.
      break;
    }
  }
  return names;
}

LogLevel vllm_log_level(LogLevel fallback) {
  const char* value = std::getenv("VLLM_LOGGING_LEVEL");
  if (value == nullptr) {
    return fallback;
  }
  const std::string level = lowercase(value);
  return level == "debug"                          ? LogLevel::debug
         : level == "warning"                      ? LogLevel::warning
         : level == "error" || level == "critical" ? LogLevel::error
                                                   : LogLevel::info;
}

// SRV_INF's "srv  %12.*s: " (tools/server/server-common.h).
void log_srv(const Log& log, LogLevel level, std::string_view func, std::string_view message) {
  log.llama(level, fmt::format("srv  {:>12.12}: {}", func, message));
}

// llama-server (tools/server/server.cpp): the HTTP server starts before the
// model loads (503 meanwhile), signal handlers only after it loaded (a TERM
// while loading kills with the default action), then "model loaded",
// "listening on". The first TERM/INT cleans up and exits 0 once running
// requests end; a second one exits 1 at once.
int run_llamacpp(const Options& options, const PerfModel& model, const MemoryPlan& memory, const Log& log,
                 WorkerPool& workers, net::io_context& io, HttpServer& server, ServerContext& context) {
  const std::string& host = options.server.host;
  const int port = options.server.port;
  auto listening = server.listen(host, port);
  if (!listening || options.sim.faults.has(FaultKind::port_in_use)) {
    log_srv(log, LogLevel::error, "start",
            fmt::format("couldn't bind HTTP server socket, hostname: {}, port: {}", host, port));
    log_srv(log, LogLevel::error, "llama_server", "exiting due to HTTP server error");
    return k_exit_failures;
  }
  server.start();
  int exit_code = k_exit_ok;
  net::signal_set stop_signals(io);
  std::function<void()> watch_signals;
  bool terminating = false;
  watch_signals = [&] {
    stop_signals.async_wait([&](const boost::system::error_code& error, int) {
      if (error) {
        return;
      }
      if (terminating) {
        // signal_handler's second interrupt: fprintf to stderr, exit(1).
        log.raw("Received second interrupt, terminating immediately.");
        std::_Exit(1);
      }
      terminating = true;
      // clean_up is a lambda: its __func__ is operator().
      log_srv(log, LogLevel::info, "operator()", "operator(): cleaning up before exit...");
      server.stop();
      if (context.active_generations == 0) {
        io.stop();
      } else {
        context.on_generation_done = [&io] { io.stop(); };
      }
      watch_signals();
    });
  };
  std::thread loader([&] {
    const auto failed = run_load(options, model, memory, log, workers);
    net::post(io, [&, failed] {
      if (failed) {
        exit_code = *failed;
        server.stop();
        io.stop();
        return;
      }
      context.ready = true;
      log_srv(log, LogLevel::info, "llama_server", "model loaded");
      stop_signals.add(SIGINT);
      if (!options.sim.faults.has(FaultKind::ignore_sigterm)) {
        stop_signals.add(SIGTERM);
      }
      watch_signals();
      log_srv(log, LogLevel::info, "llama_server", fmt::format("listening on http://{}:{}", host, port));
    });
  });
  // The pending accept keeps io.run() going while the model loads.
  io.run();
  if (loader.joinable()) {
    loader.join();
  }
  return exit_code;
}

} // namespace

int run_server(const Options& options) {
  ::signal(SIGPIPE, SIG_IGN);
  raise_descriptor_limit();
  const FaultSet& faults = options.sim.faults;
  if (faults.has(FaultKind::ignore_sigterm)) {
    ::signal(SIGTERM, SIG_IGN);
  }
  const Engine engine = options.engine;
  Log mutable_log(engine == Engine::vllm ? vllm_log_level(options.server.log_level) : options.server.log_level);
  if (engine == Engine::vllm) {
    mutable_log.set_uvicorn_prefix(fmt::format("(APIServer pid={}) ", ::getpid()));
  }
  const Log& log = mutable_log;
  const Profile& profile = *find_profile(options.sim.profile);
  VariantResult variant = make_variant(options.server, profile);
  if (engine == Engine::vllm && options.vllm.max_num_seqs) {
    variant.variant.max_running = *options.vllm.max_num_seqs;
  }
  if (engine == Engine::llamacpp) {
    // One slot per parallel sequence (-np).
    variant.variant.max_running = options.llama.parallel;
  }
  const PerfModel model(profile, variant.variant);
  const std::string sim_line =
      fmt::format("specsim: engine={}, profile={}, sim_speed={}, sim_load_time={}, faults={}", engine_name(engine),
                  profile.name, options.sim.speed, util::format_duration(options.sim.load_time), faults_text(faults));

  switch (engine) {
  case Engine::sglang:
    log.main(LogLevel::info, "server_args=" + server_args_repr(options.server));
    log.main(LogLevel::info, sim_line);
    for (const auto& warning : variant.warnings) {
      log.main(LogLevel::warning, warning);
    }
    break;
  case Engine::vllm:
    log.vllm(LogLevel::info, "api_server.py:1896", sim_line);
    break;
  case Engine::llamacpp:
    log.llama(LogLevel::info, sim_line);
    break;
  }

  const auto gpu_dir = resolve_gpu_dir(options.sim.gpu_dir);
  const auto gpus = load_gpu_config(gpu_dir);
  if (!gpus) {
    throw Error(gpus.error(), ErrorKind::bad_input);
  }
  auto spawned = WorkerPool::spawn(worker_names(options), gpus->count, gpu_dir,
                                   faults.has(FaultKind::orphan_workers) ? Detach::yes : Detach::no);
  if (!spawned) {
    throw Error(spawned.error());
  }
  WorkerPool workers = std::move(*spawned);
  const MemoryPlan memory = plan_memory(model, *gpus);
  const double weights_needed = profile.weights_gib / options.server.tp_size;
  if (engine == Engine::sglang && weights_needed > memory.weights_gib) {
    log.main(LogLevel::warning,
             fmt::format("specsim: the weights need {:.1f} GB per GPU at tp {}, more than a {:.1f} GB GPU holds; "
                         "specsim does not model memory limits (SGLang would run out of memory)",
                         weights_needed, options.server.tp_size, memory.total_gib));
  }

  net::io_context io(1);
  ServingStats stats;
  std::optional<Scheduler> scheduler;
  if (!profile.flood) {
    scheduler.emplace(io, model,
                      SchedulerConfig{.speed = options.sim.speed,
                                      .decode_log_interval = options.server.decode_log_interval,
                                      .seed = options.sim.seed,
                                      .kv_capacity_tokens = memory.kv_tokens,
                                      .engine = engine,
                                      .stats_interval_s = env_seconds("VLLM_LOG_STATS_INTERVAL", 10.0),
                                      .slots = options.llama.parallel,
                                      .prefix_cache = prefix_cache_config(options, memory.kv_tokens)},
                      log, stats);
  }
  // The GPUs' power follows the scheduler's steps; a server without GPUs (llama.cpp's
  // CPU build) publishes nothing.
  PowerMeter power(io, gpu_dir, workers.gpus(), gpus->count, power_spec(*gpus));
  if (scheduler) {
    std::optional<PowerCapWindow> cap;
    if (const Fault* fault = faults.find(FaultKind::power_cap)) {
      cap = PowerCapWindow{.first = fault->count, .last = fault->until};
    }
    scheduler->set_power(power_spec(*gpus), &power, cap);
  }
  ServerContext context;
  context.power = &power;
  context.options = &options;
  context.model = &model;
  context.log = &log;
  context.scheduler = scheduler ? &*scheduler : nullptr;
  context.stats = &stats;
  context.engine = engine;
  context.health_generates = !env_is_off("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION");
  context.draft_depth = model.speculative() ? model.max_accept_length() - 1 : 0;
  context.served_model = engine == Engine::vllm && !options.vllm.served_model_name.empty()
                             ? options.vllm.served_model_name
                         : engine == Engine::llamacpp && !options.llama.alias.empty() ? options.llama.alias
                                                                                      : options.server.model_path;
  context.kv_capacity_tokens = memory.kv_tokens;
  context.created = static_cast<long>(std::time(nullptr));
  if (const Fault* fault = faults.find(FaultKind::http_500)) {
    context.http_500 = FractionPicker(fault->fraction);
  }
  if (const Fault* fault = faults.find(FaultKind::garbled)) {
    context.garbled = FractionPicker(fault->fraction);
  }
  if (const Fault* fault = faults.find(FaultKind::cut_stream)) {
    context.cut_stream = FractionPicker(fault->fraction);
  }
  if (const Fault* fault = faults.find(FaultKind::die_after)) {
    context.die_after = fault->count;
  }
  if (const Fault* fault = faults.find(FaultKind::slow_first_token)) {
    context.first_token_delay = fault->delay;
  }
  context.die = [&log] {
    log_scheduler_crash(log, CrashSite::serving, "RuntimeError: CUDA error: an illegal memory access was encountered");
    // Like a crashed scheduler taking the server down: no goodbyes, streams just end.
    std::_Exit(1);
  };

  HttpServer server(io, context);
  const std::string& host = options.server.host;
  const int port = options.server.port;
  const auto staged_or = [&](std::expected<void, std::error_code> result) -> std::error_code {
    if (faults.has(FaultKind::port_in_use)) {
      return std::make_error_code(std::errc::address_in_use);
    }
    return result ? std::error_code{} : result.error();
  };
  int exit_code = k_exit_ok;

  if (engine == Engine::llamacpp) {
    return run_llamacpp(options, model, memory, log, workers, io, server, context);
  }

  if (engine == Engine::vllm) {
    // vLLM binds its socket before the engine starts (SO_REUSEPORT) and listens
    // only once the engine is up: connections are refused while loading.
    if (const auto error = staged_or(server.bind(host, port, HttpServer::ReusePort::yes))) {
      const std::string api = fmt::format("(APIServer pid={}) ", ::getpid());
      log.raw(api + "Traceback (most recent call last):");
      log.raw(api + "  File \"/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py\", "
                    "line 1950, in create_server_socket");
      log.raw(api + "    sock.bind(addr)");
      log.raw(api + fmt::format("OSError: [Errno {}] {}", error.value(), std::strerror(error.value())));
      return k_exit_failures;
    }
    if (const auto failed = run_load(options, model, memory, log, workers)) {
      return *failed;
    }
    log.vllm(LogLevel::info, "launcher.py:29", fmt::format("Starting vLLM API server 0 on http://{}:{}", host, port));
    if (auto listening = server.listen(); !listening) {
      log.raw(fmt::format("(APIServer pid={}) OSError: [Errno {}] {}", ::getpid(), listening.error().value(),
                          std::strerror(listening.error().value())));
      return k_exit_failures;
    }
    log.uvicorn(LogLevel::info, fmt::format("Started server process [{}]", ::getpid()));
    log.uvicorn(LogLevel::info, "Waiting for application startup.");
    log.uvicorn(LogLevel::info, "Application startup complete.");
    context.ready = true;
  } else {
    if (const auto failed = run_load(options, model, memory, log, workers)) {
      return *failed;
    }
    const std::error_code bind_error = staged_or(server.listen(host, port));
    log.uvicorn(LogLevel::info, fmt::format("Started server process [{}]", ::getpid()));
    log.uvicorn(LogLevel::info, "Waiting for application startup.");
    log.uvicorn(LogLevel::info, "Application startup complete.");
    if (bind_error) {
      log.uvicorn(LogLevel::error,
                  fmt::format("[Errno {}] error while attempting to bind on address {}: {}", bind_error.value(),
                              address_repr(host, port), lowercase(std::strerror(bind_error.value()))));
      log.uvicorn(LogLevel::info, "Waiting for application shutdown.");
      log.uvicorn(LogLevel::info, "Application shutdown complete.");
      return k_exit_failures;
    }
    log.uvicorn(LogLevel::info, fmt::format("Uvicorn running on http://{}:{} (Press CTRL+C to quit)", host, port));
  }
  server.start();

  net::signal_set stop_signals(io, SIGINT);
  if (!faults.has(FaultKind::ignore_sigterm)) {
    stop_signals.add(SIGTERM);
  }
  stop_signals.async_wait([&](const boost::system::error_code& error, int) {
    if (error) {
      return;
    }
    log.uvicorn(LogLevel::info, "Shutting down");
    log.uvicorn(LogLevel::info, "Waiting for application shutdown.");
    log.uvicorn(LogLevel::info, "Application shutdown complete.");
    log.uvicorn(LogLevel::info, fmt::format("Finished server process [{}]", ::getpid()));
    server.stop();
    io.stop();
  });
  // A worker that dies takes the server down, as a crashed SGLang scheduler does.
  net::signal_set child_signals(io, SIGCHLD);
  std::function<void()> watch_children = [&] {
    child_signals.async_wait([&](const boost::system::error_code& error, int) {
      if (error) {
        return;
      }
      if (const auto rank = workers.reap_dead()) {
        log.main(LogLevel::error, fmt::format("Scheduler TP{} exited unexpectedly.", *rank));
        log.main(LogLevel::error, "Received sigquit from a child process. It usually means the child failed.");
        exit_code = k_exit_failures;
        server.stop();
        io.stop();
        return;
      }
      watch_children();
    });
  };
  watch_children();

  if (engine == Engine::sglang) {
    if (scheduler && !options.server.skip_server_warmup) {
      log.uvicorn(LogLevel::info, "127.0.0.1:50102 - \"GET /get_model_info HTTP/1.1\" 200 OK", UvicornStream::out);
      auto warmup = std::make_shared<WarmupSink>(context);
      scheduler->submit(context.next_request_id++, k_warmup_prompt_tokens, k_warmup_tokens,
                        std::chrono::milliseconds::zero(), warmup, RequestKind::warmup);
    } else {
      WarmupSink::become_ready(context);
    }
  }
  io.run();
  return exit_code;
}

} // namespace specctl::sim
