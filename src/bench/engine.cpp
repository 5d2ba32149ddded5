#include "engine.hpp"

#include <specctl/util/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

namespace specctl::bench::detail {

namespace {

// The loop wakes at least this often to notice a stop request.
constexpr std::chrono::milliseconds k_stop_poll{100};
// Descriptors beyond one per stream: epoll, curl's internal wake-up pipe, stdio, result files.
constexpr std::size_t k_spare_descriptors = 64;
// Socket events taken per epoll call.
constexpr int k_max_epoll_events = 256;
// A ready server answers /v1/models at once; this only bounds a broken one.
constexpr std::chrono::seconds k_preconnect_timeout{30};

std::size_t discard(char*, std::size_t size, std::size_t count, void*) {
  return size * count;
}

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

} // namespace

EpollFd::EpollFd() : m_fd(epoll_create1(EPOLL_CLOEXEC)) {
  if (m_fd < 0) {
    throw Error(fmt::format("epoll_create1 failed: {}", std::strerror(errno)));
  }
}

EpollFd::~EpollFd() {
  close(m_fd);
}

Engine::Engine(const Target& target, const RunOptions& options, int max_streams, http::FdLimit fd_limit)
    : m_target(target), m_options(options), m_url(target.url + std::string(endpoint_path(options.request.endpoint))) {
  if (auto problem = check_requests(options.request, options.prompts); !problem.empty()) {
    throw Error(problem, ErrorKind::bad_input);
  }
  max_streams = std::max(max_streams, 1);
  if (auto limit = http::ensure_fd_limit(static_cast<std::size_t>(max_streams) + k_spare_descriptors, fd_limit);
      !limit) {
    throw limit.error();
  }
  m_headers.append("Content-Type: application/json");
  m_headers.append("Accept: text/event-stream");
  // Never wait for "100 Continue" before sending a long prompt.
  m_headers.append("Expect:");
  if (!target.api_key.empty()) {
    m_headers.append("Authorization: Bearer " + target.api_key);
  }
  if (!options.unique_prompts) {
    m_bodies.reserve(options.prompts.size());
    for (const auto& prompt : options.prompts) {
      m_bodies.push_back(build_body(options.request, target.model, prompt));
    }
  }
  CURLM* multi = m_multi.get();
  curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &Engine::on_socket);
  curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &Engine::on_timer);
  curl_multi_setopt(multi, CURLMOPT_TIMERDATA, this);
  // Keep every idle connection for the next request: a new TCP connection per request is a known client trap.
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(max_streams + 1));
  curl_multi_setopt(multi, CURLMOPT_PIPELINING, static_cast<long>(CURLPIPE_NOTHING));
}

Engine::~Engine() {
  for (Stream* stream : m_busy) {
    curl_multi_remove_handle(m_multi.get(), stream->handle());
  }
  m_busy.clear();
  // Closing the cached connections needs no more epoll bookkeeping: the descriptor goes right after.
  curl_multi_setopt(m_multi.get(), CURLMOPT_SOCKETFUNCTION, nullptr);
  curl_multi_setopt(m_multi.get(), CURLMOPT_TIMERFUNCTION, nullptr);
}

int Engine::on_socket(CURL*, curl_socket_t socket, int what, void* user, void* socket_data) {
  auto* self = static_cast<Engine*>(user);
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(self->m_epoll.get(), EPOLL_CTL_DEL, socket, nullptr);
    curl_multi_assign(self->m_multi.get(), socket, nullptr);
    return 0;
  }
  epoll_event event{};
  event.data.fd = socket;
  event.events = ((what & CURL_POLL_IN) != 0 ? EPOLLIN : 0U) | ((what & CURL_POLL_OUT) != 0 ? EPOLLOUT : 0U);
  // curl hands back the pointer we assigned: non-null means the socket is already registered.
  const int op = socket_data != nullptr ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  if (epoll_ctl(self->m_epoll.get(), op, socket, &event) != 0 && errno == ENOENT) {
    epoll_ctl(self->m_epoll.get(), EPOLL_CTL_ADD, socket, &event);
  }
  if (socket_data == nullptr) {
    curl_multi_assign(self->m_multi.get(), socket, self);
  }
  return 0;
}

int Engine::on_timer(CURLM*, long timeout_ms, void* user) {
  auto* self = static_cast<Engine*>(user);
  if (timeout_ms < 0) {
    self->m_curl_deadline.reset();
  } else {
    self->m_curl_deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  return 0;
}

bool Engine::stop_requested() const {
  return m_options.stop != nullptr && m_options.stop->load(std::memory_order_relaxed);
}

void Engine::start(const std::string& phase, int index, Clock::time_point level_start, Clock::time_point intended,
                   Stream::Origin origin) {
  Stream* stream = nullptr;
  if (m_idle.empty()) {
    m_streams.push_back(std::make_unique<Stream>(m_url, m_headers, m_options.request));
    stream = m_streams.back().get();
  } else {
    stream = m_idle.back();
    m_idle.pop_back();
  }
  const int prompt = index % static_cast<int>(m_options.prompts.size());
  const auto at = static_cast<std::size_t>(prompt);
  const WorkloadRequest& request = m_options.prompts[at];
  // A warmup request shares nothing with a measured one, not even a workload's
  // shared prefix: sent verbatim it would put a measured prompt in the server's cache.
  const bool warmup = phase == k_warmup_phase;
  std::string body;
  if (m_options.unique_prompts || warmup) {
    WorkloadRequest whole = request;
    whole.shared_bytes = warmup ? 0 : request.shared_bytes;
    body = build_body(m_options.request, m_target.model, whole, unique_prefix(m_options.prompt_tag, phase, index));
  } else {
    body = m_bodies[at];
  }
  stream->begin(std::move(body), index, prompt, level_start, intended, origin);
  stream->label(request.id, request.category, request.input_tokens,
                request.output_tokens > 0 ? request.output_tokens : m_options.request.max_tokens);
  if (CURLMcode rc = curl_multi_add_handle(m_multi.get(), stream->handle()); rc != CURLM_OK) {
    throw Error(fmt::format("curl_multi_add_handle failed: {}", curl_multi_strerror(rc)));
  }
  m_busy.push_back(stream);
}

void Engine::poll_once(Clock::time_point until) {
  const auto now = Clock::now();
  const auto wait = std::max(Clock::duration::zero(), until - now);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
  epoll_event events[k_max_epoll_events];
  int n = -1;
  if (m_have_pwait2) {
    timespec timeout{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    n = epoll_pwait2(m_epoll.get(), events, k_max_epoll_events, &timeout, nullptr);
    if (n < 0 && errno == ENOSYS) {
      m_have_pwait2 = false;
    }
  }
  if (!m_have_pwait2) {
    // Round up: waking early would spin until the deadline.
    n = epoll_wait(m_epoll.get(), events, k_max_epoll_events, static_cast<int>((ns + 999'999) / 1'000'000));
  }
  int running = 0;
  for (int i = 0; i < n; ++i) {
    int mask = 0;
    if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) != 0) {
      mask |= CURL_CSELECT_IN;
    }
    if ((events[i].events & EPOLLOUT) != 0) {
      mask |= CURL_CSELECT_OUT;
    }
    if ((events[i].events & EPOLLERR) != 0) {
      mask |= CURL_CSELECT_ERR;
    }
    curl_multi_socket_action(m_multi.get(), events[i].data.fd, mask, &running);
  }
  if (m_curl_deadline && *m_curl_deadline <= Clock::now()) {
    m_curl_deadline.reset();
    curl_multi_socket_action(m_multi.get(), CURL_SOCKET_TIMEOUT, 0, &running);
  }
}

int Engine::collect(std::vector<RequestRecord>& records) {
  int finished = 0;
  int queued = 0;
  while (CURLMsg* message = curl_multi_info_read(m_multi.get(), &queued)) {
    if (message->msg != CURLMSG_DONE) {
      continue;
    }
    CURL* easy = message->easy_handle;
    const CURLcode code = message->data.result;
    char* private_data = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &private_data);
    auto* stream = reinterpret_cast<Stream*>(private_data);
    curl_multi_remove_handle(m_multi.get(), easy);
    if (stream->resend_after(code)) {
      if (CURLMcode rc = curl_multi_add_handle(m_multi.get(), easy); rc == CURLM_OK) {
        int running = 0;
        curl_multi_socket_action(m_multi.get(), CURL_SOCKET_TIMEOUT, 0, &running);
        continue;
      }
    }
    records.push_back(stream->finish(code));
    std::erase(m_busy, stream);
    m_idle.push_back(stream);
    ++finished;
  }
  return finished;
}

int Engine::end_stalled(std::vector<RequestRecord>& records) {
  const auto idle = m_options.request.idle_timeout;
  if (idle <= std::chrono::milliseconds::zero()) {
    return 0;
  }
  const auto now = Clock::now();
  int ended = 0;
  for (std::size_t i = 0; i < m_busy.size();) {
    Stream* stream = m_busy[i];
    if (now - stream->last_activity() < idle) {
      ++i;
      continue;
    }
    curl_multi_remove_handle(m_multi.get(), stream->handle());
    records.push_back(
        stream->abandon(FailureKind::stalled, fmt::format("no byte came for {} ms (idle timeout)", idle.count())));
    m_busy.erase(m_busy.begin() + static_cast<std::ptrdiff_t>(i));
    m_idle.push_back(stream);
    ++ended;
  }
  return ended;
}

void Engine::abandon_all(std::vector<RequestRecord>& records, FailureKind kind, const std::string& why) {
  for (Stream* stream : m_busy) {
    curl_multi_remove_handle(m_multi.get(), stream->handle());
    records.push_back(stream->abandon(kind, why));
    m_idle.push_back(stream);
  }
  m_busy.clear();
}

void Engine::preconnect(int connections) {
  const std::string url = m_target.url + "/v1/models";
  std::vector<http::Easy> probes(static_cast<std::size_t>(std::max(connections, 0)));
  for (auto& probe : probes) {
    CURL* h = probe.get();
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, m_headers.get());
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &discard);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(m_options.request.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::chrono::milliseconds(k_preconnect_timeout).count()));
    curl_multi_add_handle(m_multi.get(), h);
  }
  std::size_t remaining = probes.size();
  while (remaining > 0 && !stop_requested()) {
    auto until = Clock::now() + k_stop_poll;
    if (m_curl_deadline) {
      until = std::min(until, *m_curl_deadline);
    }
    poll_once(until);
    int queued = 0;
    while (CURLMsg* message = curl_multi_info_read(m_multi.get(), &queued)) {
      if (message->msg == CURLMSG_DONE) {
        curl_multi_remove_handle(m_multi.get(), message->easy_handle);
        --remaining;
      }
    }
  }
  // Removing a handle that already finished is harmless; this covers a stop mid-way.
  for (auto& probe : probes) {
    curl_multi_remove_handle(m_multi.get(), probe.get());
  }
}

LevelResult Engine::run_level(const LevelPlan& plan) {
  LevelResult level;
  level.records.reserve(static_cast<std::size_t>(plan.count));
  const bool open_loop = !plan.arrivals.empty();
  const int limit = plan.limit > 0 ? plan.limit : plan.count;
  std::int64_t events_before = 0;
  for (const auto& stream : m_streams) {
    events_before += stream->events();
  }
  const double cpu_before = thread_cpu_seconds();
  const auto level_start = Clock::now();
  level.started = level_start;
  auto last_end = level_start;
  auto next_progress = level_start + m_options.progress_interval;
  int next = 0;
  int started = 0;
  int done = 0;
  int failed = 0;
  std::int64_t tokens = 0;
  std::size_t counted = 0;
  const auto report = [&](bool finished) {
    if (!m_options.on_progress) {
      return;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - level_start).count();
    // Tokens of finished requests plus what the ones in flight received so far: a smooth tok/s.
    std::int64_t live = tokens;
    for (const Stream* stream : m_busy) {
      live += stream->tokens_so_far();
    }
    m_options.on_progress(Progress{plan.phase, done, plan.count, failed, live, elapsed,
                                   elapsed > 0 ? static_cast<double>(live) / elapsed : 0.0, finished});
  };
  while (true) {
    auto now = Clock::now();
    if (stop_requested()) {
      m_ended = Ended::interrupted;
      level.interrupted = true;
      abandon_all(level.records, FailureKind::interrupted, "the run was stopped while the request was in flight");
      break;
    }
    if (m_options.deadline && now >= *m_options.deadline) {
      m_ended = Ended::timed_out;
      level.timed_out = true;
      abandon_all(level.records, FailureKind::timeout,
                  "the benchmark's time limit passed while the request was in flight");
      break;
    }
    const bool held = m_options.hold != nullptr && m_options.hold->load(std::memory_order_relaxed);
    while (!held && next < plan.count && static_cast<int>(m_busy.size()) < limit) {
      auto intended = now;
      if (open_loop) {
        intended = level_start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(plan.arrivals[static_cast<std::size_t>(next)]));
        if (intended > now) {
          break;
        }
      }
      start(plan.phase, next, level_start, intended, open_loop ? Stream::Origin::scheduled : Stream::Origin::send);
      ++next;
      ++started;
      level.concurrency = std::max(level.concurrency, static_cast<int>(m_busy.size()));
    }
    if (started > 0) {
      // Send the new requests now, before other streams' reads are handled:
      // their clocks are already running.
      started = 0;
      int running = 0;
      curl_multi_socket_action(m_multi.get(), CURL_SOCKET_TIMEOUT, 0, &running);
      now = Clock::now();
    }
    if (next >= plan.count && m_busy.empty()) {
      break;
    }
    auto until = now + k_stop_poll;
    if (m_options.deadline) {
      until = std::min(until, *m_options.deadline);
    }
    if (m_curl_deadline) {
      until = std::min(until, *m_curl_deadline);
    }
    if (open_loop && next < plan.count && static_cast<int>(m_busy.size()) < limit) {
      until = std::min(until, level_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                                plan.arrivals[static_cast<std::size_t>(next)])));
    }
    if (m_options.on_progress) {
      until = std::min(until, next_progress);
    }
    poll_once(until);
    const int collected = collect(level.records);
    if (collected + end_stalled(level.records) > 0) {
      last_end = Clock::now();
      for (; counted < level.records.size(); ++counted) {
        const auto& record = level.records[counted];
        ++done;
        if (record.ok()) {
          tokens += record.output_tokens;
        } else {
          ++failed;
          if (m_options.on_request_failed) {
            m_options.on_request_failed(*record.failure);
          }
        }
      }
    }
    if (m_options.on_progress && Clock::now() >= next_progress) {
      report(false);
      next_progress = Clock::now() + m_options.progress_interval;
    }
  }
  if (level.interrupted || level.timed_out) {
    last_end = Clock::now();
  }
  level.client_cpu_s = thread_cpu_seconds() - cpu_before;
  std::int64_t events_after = 0;
  for (const auto& stream : m_streams) {
    events_after += stream->events();
  }
  level.events = events_after - events_before;
  level.duration_s = std::chrono::duration<double>(last_end - level_start).count();
  std::sort(level.records.begin(), level.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  aggregate(level);
  report(true);
  return level;
}

} // namespace specctl::bench::detail
