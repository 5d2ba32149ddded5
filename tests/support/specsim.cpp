#include "specsim.hpp"

#include <specctl/util/spawn.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <thread>

extern char** environ;

namespace specctl::test {
namespace {

// How often a waiting test checks whether a child has exited.
constexpr std::chrono::milliseconds k_reap_interval{5};
// The longest one curl_multi_poll call sleeps.
constexpr int k_multi_poll_ms = 100;

// One global libcurl initialisation for the whole test binary.
struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};
const CurlGlobal k_curl_global;

std::vector<std::string> environment_with(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto name = std::string(text.substr(0, text.find('=')));
    if (!overrides.contains(name)) {
      env.emplace_back(text);
    }
  }
  for (const auto& [name, value] : overrides) {
    env.push_back(name + "=" + value);
  }
  return env;
}

pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& output,
            const std::map<std::string, std::string>& env, const std::string& argv0) {
  util::SpawnSetup setup;
  setup.add_open(0, "/dev/null", O_RDONLY);
  setup.add_open(1, output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  setup.add_dup2(1, 2);
  setup.set_group(util::ProcessGroup::own_group);
  auto args = argv;
  if (!argv0.empty()) {
    args.front() = argv0;
  }
  auto pid = setup.spawn(argv.front(), args, environment_with(env));
  if (!pid) {
    throw std::runtime_error("cannot start " + argv.front() + ": " + std::strerror(pid.error()));
  }
  return *pid;
}

size_t append_to_string(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// Collects a streaming body and splits it into events as bytes arrive.
struct StreamState {
  StreamResult result;
  std::string pending;
};

size_t on_stream_data(char* data, size_t size, size_t count, void* user) {
  auto& state = *static_cast<StreamState*>(user);
  const auto now = Clock::now();
  state.result.raw.append(data, size * count);
  state.pending.append(data, size * count);
  for (auto end = state.pending.find("\n\n"); end != std::string::npos; end = state.pending.find("\n\n")) {
    std::string event = state.pending.substr(0, end);
    state.pending.erase(0, end + 2);
    if (event.starts_with("data: ")) {
      event.erase(0, 6);
    }
    state.result.events.push_back(Event{event, now});
  }
  return size * count;
}

CURL* new_stream_handle(const std::string& url, const std::string& json, StreamState& state, curl_slist* headers,
                        std::chrono::milliseconds timeout) {
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_stream_data);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  return curl;
}

// The JSON content-type header list, freed by scope.
class JsonHeaders {
public:
  JsonHeaders() : m_list(curl_slist_append(nullptr, "Content-Type: application/json")) {}
  ~JsonHeaders() { curl_slist_free_all(m_list); }
  JsonHeaders(const JsonHeaders&) = delete;
  JsonHeaders& operator=(const JsonHeaders&) = delete;
  curl_slist* get() const { return m_list; }

private:
  curl_slist* m_list;
};

void finish_stream(StreamState& state) {
  auto& r = state.result;
  r.done = !r.events.empty() && r.events.back().data == "[DONE]";
}

bool is_worker_cmdline(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmdline;
  std::getline(in, cmdline, '\0');
  return cmdline.starts_with("sglang::scheduler") || cmdline.starts_with("VLLM::");
}

} // namespace

Process::Process(const std::vector<std::string>& argv, const std::filesystem::path& output,
                 const std::map<std::string, std::string>& env, const std::string& argv0)
    : m_pid(spawn(argv, output, env, argv0)) {}

Process::~Process() {
  kill_group();
}

bool Process::running() {
  return !wait_exit(std::chrono::milliseconds{0}).has_value();
}

std::optional<int> Process::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!m_status) {
    int status = 0;
    const pid_t done = ::waitpid(m_pid, &status, WNOHANG);
    if (done == m_pid) {
      m_status = status;
      break;
    }
    if (Clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(k_reap_interval);
  }
  return m_status;
}

std::optional<int> Process::wait_exit_code(std::chrono::milliseconds timeout) {
  const auto status = wait_exit(timeout);
  if (!status) {
    return std::nullopt;
  }
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
}

void Process::signal(int sig) {
  if (!m_status) {
    ::kill(m_pid, sig);
  }
}

void Process::kill_group() {
  // The group holds the server and its tied workers; orphans left it (GpuDir kills those).
  ::kill(-m_pid, SIGKILL);
  (void)wait_exit(k_exit_timeout);
}

CommandResult run_command(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                          const std::string& argv0) {
  TempDir dir("specsim-test");
  const auto output = dir.path() / "out";
  Process process(argv, output, env, argv0);
  CommandResult result;
  result.exit_code = process.wait_exit_code(k_exit_timeout).value_or(-1);
  result.out = read_file(output);
  return result;
}

GpuDir::~GpuDir() {
  kill_workers();
}

void GpuDir::kill_workers() {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path() / "apps", ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.starts_with('.')) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid > 1 && is_worker_cmdline(pid)) {
      ::kill(pid, SIGKILL);
      (void)wait_until([pid] { return !is_worker_cmdline(pid); }, k_exit_timeout);
    }
  }
}

CommandResult GpuDir::nvidia_smi(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{specsim_binary(), "nvidia-smi"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, {{"SPECSIM_GPU_DIR", path().string()}});
}

Server::Server(std::vector<std::string> extra_args, Defaults defaults, const std::string& gpu_config,
               const std::map<std::string, std::string>& env)
    : m_port(free_port()) {
  if (!gpu_config.empty()) {
    std::ofstream(m_gpus.path() / "config") << gpu_config;
  }
  std::vector<std::string> argv{specsim_binary()};
  if (defaults == Defaults::yes) {
    argv.insert(argv.end(), {"--model-path", "/models/Kimi-K2.5-INT4", "--port", std::to_string(m_port),
                             "--sim-gpu-dir", m_gpus.path().string(), "--sim-load-time", "0.2s", "--sim-speed", "10"});
  }
  for (auto arg : extra_args) {
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"{port}", std::to_string(m_port)},
                                     {"{gpu_dir}", m_gpus.path().string()}}) {
      if (const auto at = arg.find(key); at != std::string::npos) {
        arg.replace(at, key.size(), value);
      }
    }
    argv.push_back(arg);
  }
  m_process.emplace(argv, m_logs.path() / "server.log", env);
}

Server::~Server() {
  m_process.reset();
  m_gpus.kill_workers();
}

std::string Server::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(m_port) + path;
}

std::string Server::log() const {
  return read_file(m_logs.path() / "server.log");
}

bool Server::wait_ready(std::chrono::milliseconds timeout) {
  return wait_until(
             [&] {
               if (!m_process->running()) {
                 return true;
               }
               return http_get(url("/health"), k_short_request_timeout).status == 200;
             },
             timeout) &&
         m_process->running();
}

bool Server::wait_health(long status, std::chrono::milliseconds timeout) {
  return wait_until([&] { return http_get(url("/health"), k_short_request_timeout).status == status; }, timeout);
}

bool Server::wait_log(const std::string& text, std::chrono::milliseconds timeout) {
  return wait_until([&] { return log().find(text) != std::string::npos; }, timeout);
}

HttpClient::HttpClient() : m_curl(curl_easy_init()) {}

HttpClient::~HttpClient() {
  curl_easy_cleanup(m_curl);
}

HttpResult HttpClient::perform(std::chrono::milliseconds timeout) {
  HttpResult result;
  curl_easy_setopt(m_curl, CURLOPT_WRITEFUNCTION, append_to_string);
  curl_easy_setopt(m_curl, CURLOPT_WRITEDATA, &result.body);
  curl_easy_setopt(m_curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(m_curl, CURLOPT_NOSIGNAL, 1L);
  result.curl = curl_easy_perform(m_curl);
  curl_easy_getinfo(m_curl, CURLINFO_RESPONSE_CODE, &result.status);
  curl_easy_getinfo(m_curl, CURLINFO_NUM_CONNECTS, &result.new_connections);
  return result;
}

HttpResult HttpClient::get(const std::string& url, std::chrono::milliseconds timeout) {
  curl_easy_setopt(m_curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(m_curl, CURLOPT_HTTPGET, 1L);
  return perform(timeout);
}

HttpResult HttpClient::post(const std::string& url, const std::string& json, std::chrono::milliseconds timeout) {
  JsonHeaders headers;
  curl_easy_setopt(m_curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(m_curl, CURLOPT_POSTFIELDS, json.c_str());
  curl_easy_setopt(m_curl, CURLOPT_HTTPHEADER, headers.get());
  auto result = perform(timeout);
  curl_easy_setopt(m_curl, CURLOPT_HTTPHEADER, nullptr);
  return result;
}

HttpResult http_get(const std::string& url, std::chrono::milliseconds timeout) {
  HttpClient client;
  return client.get(url, timeout);
}

HttpResult http_post(const std::string& url, const std::string& json, std::chrono::milliseconds timeout) {
  HttpClient client;
  return client.post(url, json, timeout);
}

StreamResult stream_post(const std::string& url, const std::string& json, std::chrono::milliseconds timeout) {
  return std::move(stream_post_many(url, {json}, timeout).front());
}

std::vector<StreamResult> stream_post_many(const std::string& url, const std::vector<std::string>& jsons,
                                           std::chrono::milliseconds timeout) {
  JsonHeaders headers;
  std::vector<std::unique_ptr<StreamState>> states;
  std::vector<CURL*> handles;
  CURLM* multi = curl_multi_init();
  for (const auto& json : jsons) {
    states.push_back(std::make_unique<StreamState>());
    handles.push_back(new_stream_handle(url, json, *states.back(), headers.get(), timeout));
    curl_multi_add_handle(multi, handles.back());
  }
  const auto sent = Clock::now();
  for (auto& state : states) {
    state->result.sent = sent;
  }
  int running = 0;
  do {
    curl_multi_perform(multi, &running);
    if (running > 0) {
      curl_multi_poll(multi, nullptr, 0, k_multi_poll_ms, nullptr);
    }
  } while (running > 0);
  int left = 0;
  while (CURLMsg* message = curl_multi_info_read(multi, &left)) {
    if (message->msg != CURLMSG_DONE) {
      continue;
    }
    for (std::size_t j = 0; j < handles.size(); ++j) {
      if (handles[j] == message->easy_handle) {
        states[j]->result.curl = message->data.result;
      }
    }
  }
  std::vector<StreamResult> results;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    curl_easy_getinfo(handles[i], CURLINFO_RESPONSE_CODE, &states[i]->result.status);
    const char* content_type = nullptr;
    curl_easy_getinfo(handles[i], CURLINFO_CONTENT_TYPE, &content_type);
    states[i]->result.content_type = content_type != nullptr ? content_type : "";
    finish_stream(*states[i]);
    curl_multi_remove_handle(multi, handles[i]);
    curl_easy_cleanup(handles[i]);
    results.push_back(std::move(states[i]->result));
  }
  curl_multi_cleanup(multi);
  return results;
}

void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int count_tokens(const std::string& text) {
  int tokens = 0;
  for (char c : text) {
    tokens += (c == ' ' || c == ',' || c == '.') ? 1 : 0;
  }
  return tokens;
}

int thread_count(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("Threads:")) {
      return std::stoi(line.substr(8));
    }
  }
  return -1;
}

std::string completion_body(int max_tokens, Stream stream, Usage usage, const std::string& prompt) {
  return "{\"model\":\"kimi\",\"prompt\":\"" + prompt + "\",\"max_tokens\":" + std::to_string(max_tokens) +
         ",\"ignore_eos\":true,\"stream\":" + (stream == Stream::yes ? "true" : "false") +
         (usage == Usage::yes ? ",\"stream_options\":{\"include_usage\":true}" : "") + "}";
}

} // namespace specctl::test
