// Measures how many tokens a second specsim's flood profile streams from one
// CPU core at one token per event. Starts specsim pinned to one CPU, drains N
// concurrent streams from another with plain sockets (so the client is never
// the bottleneck), and reports tokens per second of wall time and per second
// of the server's CPU time. See bench/README.md.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

constexpr double k_target_tokens_per_s = 500'000.0;
constexpr std::chrono::seconds k_ready_timeout{30};
constexpr std::chrono::seconds k_run_timeout{120};
constexpr std::chrono::milliseconds k_ready_poll_interval{50};
constexpr int k_drain_poll_ms = 1000;
constexpr std::size_t k_read_buffer = 1 << 20;
constexpr std::size_t k_tail_keep = 4096;

struct Settings {
  std::string specsim = SPECSIM_BINARY;
  int streams = 4;
  long tokens = 250'000;
  int runs = 5;
  int server_cpu = 0;
  int client_cpu = 1;
};

class Fd {
public:
  explicit Fd(int fd = -1) : m_fd(fd) {}
  ~Fd() {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
  }
  Fd(Fd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return m_fd; }

private:
  int m_fd;
};

// The specsim child; killed (with its process group) on scope exit.
class Child {
public:
  explicit Child(pid_t pid) : m_pid(pid) {}
  ~Child() {
    ::kill(-m_pid, SIGKILL);
    ::waitpid(m_pid, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return m_pid; }

private:
  pid_t m_pid;
};

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    std::cerr << "warning: cannot pin to CPU " << cpu << ": " << std::strerror(errno) << "\n";
  }
}

int free_port() {
  Fd socket(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(socket.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

std::optional<Fd> connect_to(int port) {
  Fd socket(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(socket.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return std::nullopt;
  }
  return socket;
}

bool send_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t sent = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (sent <= 0) {
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

std::string request_text(long tokens) {
  const std::string body = "{\"prompt\":\"flood\",\"max_tokens\":" + std::to_string(tokens) +
                           ",\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
  return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

long completion_tokens(std::string_view tail) {
  const std::string_view key = "\"completion_tokens\":";
  const auto at = tail.rfind(key);
  if (at == std::string_view::npos) {
    return -1;
  }
  long value = -1;
  std::from_chars(tail.data() + at + key.size(), tail.data() + tail.size(), value);
  return value;
}

bool wait_ready(int port) {
  const auto deadline = Clock::now() + k_ready_timeout;
  while (Clock::now() < deadline) {
    if (auto socket = connect_to(port)) {
      send_all(socket->get(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      std::array<char, 256> buffer{};
      const ssize_t got = ::recv(socket->get(), buffer.data(), buffer.size(), 0);
      if (got > 12 && std::string_view(buffer.data(), static_cast<std::size_t>(got)).starts_with("HTTP/1.1 200")) {
        return true;
      }
    }
    std::this_thread::sleep_for(k_ready_poll_interval);
  }
  return false;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string skip;
  for (int field = 3; field <= 13; ++field) {
    fields >> skip;
  }
  double user = 0;
  double system = 0;
  fields >> user >> system;
  return (user + system) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct RunResult {
  long tokens = 0;
  double seconds = 0.0;
  double server_cpu_seconds = 0.0;
};

// Streams `streams` requests at once and drains them; tokens come from usage.
std::optional<RunResult> run_once(const Settings& settings, int port, pid_t server) {
  std::vector<Fd> sockets;
  std::vector<std::string> tails(static_cast<std::size_t>(settings.streams));
  const std::string request = request_text(settings.tokens);
  const double cpu_before = cpu_seconds(server);
  const auto start = Clock::now();
  for (int i = 0; i < settings.streams; ++i) {
    auto socket = connect_to(port);
    if (!socket || !send_all(socket->get(), request)) {
      return std::nullopt;
    }
    sockets.push_back(std::move(*socket));
  }
  std::vector<char> buffer(k_read_buffer);
  std::vector<bool> open(sockets.size(), true);
  std::size_t remaining = sockets.size();
  while (remaining > 0) {
    if (Clock::now() - start > k_run_timeout) {
      return std::nullopt;
    }
    std::vector<pollfd> fds;
    for (std::size_t i = 0; i < sockets.size(); ++i) {
      fds.push_back(pollfd{open[i] ? sockets[i].get() : -1, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), k_drain_poll_ms);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!open[i] || fds[i].revents == 0) {
        continue;
      }
      const ssize_t got = ::recv(sockets[i].get(), buffer.data(), buffer.size(), 0);
      if (got <= 0) {
        open[i] = false;
        --remaining;
        continue;
      }
      auto& tail = tails[i];
      tail.append(buffer.data(), static_cast<std::size_t>(got));
      if (tail.size() > k_tail_keep) {
        tail.erase(0, tail.size() - k_tail_keep);
      }
    }
  }
  RunResult result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.server_cpu_seconds = cpu_seconds(server) - cpu_before;
  for (const auto& tail : tails) {
    const long tokens = completion_tokens(tail);
    if (tokens < 0 || tail.find("data: [DONE]") == std::string::npos) {
      return std::nullopt;
    }
    result.tokens += tokens;
  }
  return result;
}

// Reads one small stream fully and checks every content event carries one token.
bool verify_one_token_per_event(int port) {
  constexpr long k_tokens = 20'000;
  auto socket = connect_to(port);
  if (!socket || !send_all(socket->get(), request_text(k_tokens))) {
    return false;
  }
  std::string body;
  std::vector<char> buffer(k_read_buffer);
  for (ssize_t got = 0; (got = ::recv(socket->get(), buffer.data(), buffer.size(), 0)) > 0;) {
    body.append(buffer.data(), static_cast<std::size_t>(got));
  }
  long events = 0;
  for (auto at = body.find("\"text\":"); at != std::string::npos; at = body.find("\"text\":", at + 1)) {
    ++events;
  }
  return events == k_tokens && completion_tokens(body) == k_tokens;
}

std::optional<Settings> parse(int argc, char** argv) {
  Settings settings;
  settings.client_cpu = std::thread::hardware_concurrency() > 1 ? 1 : 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "-h" || flag == "--help" || i + 1 >= argc) {
      return std::nullopt;
    }
    const std::string value = argv[++i];
    if (flag == "--specsim") {
      settings.specsim = value;
    } else if (flag == "--streams") {
      settings.streams = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--tokens") {
      settings.tokens = std::max(1L, std::atol(value.c_str()));
    } else if (flag == "--runs") {
      settings.runs = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--server-cpu") {
      settings.server_cpu = std::atoi(value.c_str());
    } else if (flag == "--client-cpu") {
      settings.client_cpu = std::atoi(value.c_str());
    } else {
      return std::nullopt;
    }
  }
  return settings;
}

} // namespace

int main(int argc, char** argv) {
  const auto settings = parse(argc, argv);
  if (!settings) {
    std::cerr << "usage: specsim_flood_bench [--specsim PATH] [--streams N] [--tokens N] [--runs N]\n"
                 "                           [--server-cpu CPU] [--client-cpu CPU]\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  const int port = free_port();
  char dir_template[] = "/tmp/specsim-flood-XXXXXX";
  const std::string gpu_dir = ::mkdtemp(dir_template);
  std::vector<std::string> args{settings->specsim, "--model-path", "/models/flood",   "--port", std::to_string(port),
                                "--sim-profile",   "flood",        "--sim-load-time", "0",      "--sim-gpu-dir",
                                gpu_dir,           "--log-level",  "warning"};
  std::vector<char*> arg_pointers;
  for (auto& arg : args) {
    arg_pointers.push_back(arg.data());
  }
  arg_pointers.push_back(nullptr);
  // The child inherits the affinity, so pin before spawning and re-pin after.
  pin_to(settings->server_cpu);
  // The server's log would drown the report; the benchmark only needs its port.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  const int error = ::posix_spawn(&pid, args.front().c_str(), &actions, &attr, arg_pointers.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    std::cerr << "cannot start " << args.front() << ": " << std::strerror(error) << "\n";
    return 1;
  }
  const Child server(pid);
  pin_to(settings->client_cpu);
  if (!wait_ready(port)) {
    std::cerr << "specsim did not become ready on port " << port << "\n";
    return 1;
  }
  const bool one_per_event = verify_one_token_per_event(port);
  std::cout << "specsim flood benchmark: " << settings->streams << " streams x " << settings->tokens
            << " tokens, server on CPU " << settings->server_cpu << ", client on CPU " << settings->client_cpu
            << "\none token per event: " << (one_per_event ? "verified" : "NOT verified") << "\n";
  std::vector<double> rates;
  std::vector<double> cpu_rates;
  for (int run = 1; run <= settings->runs; ++run) {
    const auto result = run_once(*settings, port, server.pid());
    if (!result) {
      std::cerr << "run " << run << " failed\n";
      return 1;
    }
    const double rate = static_cast<double>(result->tokens) / result->seconds;
    const double cpu_rate = static_cast<double>(result->tokens) / std::max(1e-9, result->server_cpu_seconds);
    rates.push_back(rate);
    cpu_rates.push_back(cpu_rate);
    std::cout << "run " << run << ": " << result->tokens << " tokens in " << result->seconds
              << " s = " << static_cast<long>(rate) << " tokens/s (server CPU " << result->server_cpu_seconds << " s, "
              << static_cast<long>(cpu_rate) << " tokens per CPU-second)\n";
  }
  std::ranges::sort(rates);
  std::ranges::sort(cpu_rates);
  const double median = rates[rates.size() / 2];
  std::cout << "median: " << static_cast<long>(median) << " tokens/s wall, "
            << static_cast<long>(cpu_rates[cpu_rates.size() / 2]) << " tokens per server CPU-second (target "
            << static_cast<long>(k_target_tokens_per_s) << ")\n";
  std::error_code ignored;
  std::filesystem::remove_all(gpu_dir, ignored);
  return median >= k_target_tokens_per_s && one_per_event ? 0 : 1;
}
