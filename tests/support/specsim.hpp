#pragma once

// Test support: specsim under test. Real processes, real sockets on 127.0.0.1,
// libcurl as the client: a child process killed with its group, a fake GPU
// folder that kills its orphaned workers, one specsim server on a free port,
// and HTTP requests (plain, streamed, many streams at once). Every wait has a
// deadline and every process started here is killed by a destructor, even when
// a test fails.

#include "binaries.hpp"
#include "files.hpp"
#include "net.hpp"
#include "temp_dir.hpp"
#include "wait.hpp"

#include <curl/curl.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace specctl::test {

// Whether a request streams, and whether a stream ends with a usage chunk.
enum class Stream { no, yes };
enum class Usage { no, yes };
// Whether Server passes its default flags (model path, port, GPU directory, ...).
enum class Defaults { no, yes };

// Generous bounds for a loaded two-core machine.
inline constexpr std::chrono::seconds k_short_request_timeout{2};
inline constexpr std::chrono::seconds k_request_timeout{60};
inline constexpr std::chrono::seconds k_exit_timeout{15};

// A child process in its own process group, output to a file; killed with
// its whole group when destroyed.
class Process {
public:
  Process(const std::vector<std::string>& argv, const std::filesystem::path& output,
          const std::map<std::string, std::string>& env = {}, const std::string& argv0 = "");
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return m_pid; }
  bool running();
  // The wait status once the process has exited, within the timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // The exit code (or 128 + signal) within the timeout.
  std::optional<int> wait_exit_code(std::chrono::milliseconds timeout);
  void signal(int sig);
  void kill_group();

private:
  pid_t m_pid = -1;
  std::optional<int> m_status;
};

// Runs a command to completion and captures its stdout.
struct CommandResult {
  int exit_code = -1;
  std::string out;
};
CommandResult run_command(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                          const std::string& argv0 = "");

// The fake GPU state directory of a test; kills the worker processes still
// registered there (orphans) on destruction.
class GpuDir {
public:
  GpuDir() = default;
  ~GpuDir();
  GpuDir(const GpuDir&) = delete;
  GpuDir& operator=(const GpuDir&) = delete;
  const std::filesystem::path& path() const { return m_dir.path(); }
  void kill_workers();
  // `specsim nvidia-smi ARGS` against this directory.
  CommandResult nvidia_smi(const std::vector<std::string>& args) const;

private:
  TempDir m_dir{"specsim-test"};
};

// One specsim server under test, on a free port with its own GPU directory.
// Unless `defaults` is Defaults::no, the model path, port, GPU directory and a
// 0.2 s load time at speed 10 are passed first (later flags win, as with argparse).
// "{port}" and "{gpu_dir}" in the arguments are replaced; `gpu_config` is
// written to the GPU directory's config file before the server starts.
class Server {
public:
  explicit Server(std::vector<std::string> extra_args, Defaults defaults = Defaults::yes,
                  const std::string& gpu_config = "", const std::map<std::string, std::string>& env = {});
  ~Server();

  int port() const { return m_port; }
  std::string url(const std::string& path) const;
  Process& process() { return *m_process; }
  GpuDir& gpus() { return m_gpus; }
  std::string log() const;
  // /health answers 200 within the timeout.
  bool wait_ready(std::chrono::milliseconds timeout = k_ready_timeout);
  // /health answers `status` within the timeout.
  bool wait_health(long status, std::chrono::milliseconds timeout = k_ready_timeout);
  // The log contains `text` within the timeout.
  bool wait_log(const std::string& text, std::chrono::milliseconds timeout = k_ready_timeout);

private:
  GpuDir m_gpus;
  TempDir m_logs{"specsim-test"};
  int m_port = 0;
  std::optional<Process> m_process;
};

struct HttpResult {
  CURLcode curl = CURLE_OK;
  long status = 0;
  std::string body;
  long new_connections = 0;
};

// One server-sent event and when its last byte arrived.
struct Event {
  std::string data;
  Clock::time_point arrived;
};

struct StreamResult {
  CURLcode curl = CURLE_OK;
  long status = 0;
  std::string raw;
  std::vector<Event> events;
  std::string content_type;
  Clock::time_point sent;
  bool done = false; // the last event was [DONE]
};

// A libcurl easy handle reused across requests (so connections are kept alive).
class HttpClient {
public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult get(const std::string& url, std::chrono::milliseconds timeout = k_request_timeout);
  HttpResult post(const std::string& url, const std::string& json,
                  std::chrono::milliseconds timeout = k_request_timeout);

private:
  HttpResult perform(std::chrono::milliseconds timeout);
  CURL* m_curl;
};

HttpResult http_get(const std::string& url, std::chrono::milliseconds timeout = k_request_timeout);
HttpResult http_post(const std::string& url, const std::string& json,
                     std::chrono::milliseconds timeout = k_request_timeout);
StreamResult stream_post(const std::string& url, const std::string& json,
                         std::chrono::milliseconds timeout = k_request_timeout);
// Many streams at once on one curl multi handle (one connection each).
std::vector<StreamResult> stream_post_many(const std::string& url, const std::vector<std::string>& jsons,
                                           std::chrono::milliseconds timeout = k_request_timeout);

std::string completion_body(int max_tokens, Stream stream, Usage usage = Usage::yes,
                            const std::string& prompt = "Explain the theory of general relativity in detail.");

// Lets this process hold the descriptors of a thousand connections.
void raise_descriptor_limit();

// Tokens in a piece of specsim's text: every token is one word with a
// leading space, or a bare "," or ".".
int count_tokens(const std::string& text);

// The "Threads:" line of /proc/PID/status.
int thread_count(pid_t pid);

} // namespace specctl::test
