#include <specctl/sim/gpu_state.hpp>
#include <specctl/sim/http_server.hpp>
#include <specctl/sim/loader.hpp>
#include <specctl/sim/specsim.hpp>
#include <specctl/sim/workers.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <fmt/format.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <ctime>
#include <optional>

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

int run_server(const Options& options) {
  ::signal(SIGPIPE, SIG_IGN);
  raise_descriptor_limit();
  const FaultSet& faults = options.sim.faults;
  if (faults.has(FaultKind::ignore_sigterm)) {
    ::signal(SIGTERM, SIG_IGN);
  }
  const Log log(options.server.log_level);
  const Profile& profile = *find_profile(options.sim.profile);
  const VariantResult variant = make_variant(options.server, profile);
  const PerfModel model(profile, variant.variant);

  log.main(LogLevel::info, "server_args=" + server_args_repr(options.server));
  log.main(LogLevel::info,
           fmt::format("specsim: profile={}, sim_speed={}, sim_load_time={}, faults={}", profile.name,
                       options.sim.speed, util::format_duration(options.sim.load_time), faults_text(faults)));
  for (const auto& warning : variant.warnings) {
    log.main(LogLevel::warning, warning);
  }

  const auto gpu_dir = resolve_gpu_dir(options.sim.gpu_dir);
  const auto gpus = load_gpu_config(gpu_dir);
  if (!gpus) {
    throw Error(gpus.error(), ErrorKind::bad_input);
  }
  auto spawned = WorkerPool::spawn(options.server.tp_size, gpus->count, gpu_dir,
                                   faults.has(FaultKind::orphan_workers) ? Detach::yes : Detach::no);
  if (!spawned) {
    throw Error(spawned.error());
  }
  WorkerPool workers = std::move(*spawned);
  const MemoryPlan memory = plan_memory(model, *gpus);
  const double weights_needed = profile.weights_gib / options.server.tp_size;
  if (weights_needed > memory.weights_gib) {
    log.main(LogLevel::warning,
             fmt::format("specsim: the weights need {:.1f} GB per GPU at tp {}, more than a {:.1f} GB GPU holds; "
                         "specsim does not model memory limits (SGLang would run out of memory)",
                         weights_needed, options.server.tp_size, memory.total_gib));
  }
  if (const auto failed = run_load(options, model, memory, log, workers)) {
    return *failed;
  }

  net::io_context io(1);
  ServingStats stats;
  std::optional<Scheduler> scheduler;
  if (!profile.flood) {
    scheduler.emplace(io, model,
                      SchedulerConfig{.speed = options.sim.speed,
                                      .decode_log_interval = options.server.decode_log_interval,
                                      .seed = options.sim.seed,
                                      .kv_capacity_tokens = memory.kv_tokens},
                      log, stats);
  }
  ServerContext context;
  context.options = &options;
  context.model = &model;
  context.log = &log;
  context.scheduler = scheduler ? &*scheduler : nullptr;
  context.stats = &stats;
  context.served_model = options.server.model_path;
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
  std::error_code bind_error;
  if (faults.has(FaultKind::port_in_use)) {
    bind_error = std::make_error_code(std::errc::address_in_use);
  } else if (auto listening = server.listen(options.server.host, options.server.port); !listening) {
    bind_error = listening.error();
  }
  log.uvicorn(LogLevel::info, fmt::format("Started server process [{}]", ::getpid()));
  log.uvicorn(LogLevel::info, "Waiting for application startup.");
  log.uvicorn(LogLevel::info, "Application startup complete.");
  if (bind_error) {
    log.uvicorn(LogLevel::error, fmt::format("[Errno {}] error while attempting to bind on address {}: {}",
                                             bind_error.value(), address_repr(options.server.host, options.server.port),
                                             lowercase(std::strerror(bind_error.value()))));
    log.uvicorn(LogLevel::info, "Waiting for application shutdown.");
    log.uvicorn(LogLevel::info, "Application shutdown complete.");
    return k_exit_failures;
  }
  log.uvicorn(LogLevel::info, fmt::format("Uvicorn running on http://{}:{} (Press CTRL+C to quit)", options.server.host,
                                          options.server.port));
  server.start();

  int exit_code = k_exit_ok;
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

  if (scheduler && !options.server.skip_server_warmup) {
    log.uvicorn(LogLevel::info, "127.0.0.1:50102 - \"GET /get_model_info HTTP/1.1\" 200 OK", UvicornStream::out);
    auto warmup = std::make_shared<WarmupSink>(context);
    scheduler->submit(context.next_request_id++, k_warmup_prompt_tokens, k_warmup_tokens, std::chrono::milliseconds{0},
                      warmup);
  } else {
    WarmupSink::become_ready(context);
  }
  io.run();
  return exit_code;
}

} // namespace specctl::sim
