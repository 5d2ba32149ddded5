// Every --sim-fault, staged on a real server and observed from outside.

#include "../support/specsim.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace specctl::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::vector<std::string> k_apps_query{"--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                                            "--format=csv,noheader,nounits"};

int content_events(const StreamResult& stream) {
  int count = 0;
  for (const auto& event : stream.events) {
    count += event.data.find("\"text\":") != std::string::npos ? 1 : 0;
  }
  return count;
}

// A listening socket that holds a port, as another server would.
class PortHolder {
public:
  PortHolder() : m_fd(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(m_fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(m_fd, 1) == 0);
    socklen_t length = sizeof address;
    ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&address), &length);
    m_port = ntohs(address.sin_port);
  }
  ~PortHolder() { ::close(m_fd); }
  PortHolder(const PortHolder&) = delete;
  PortHolder& operator=(const PortHolder&) = delete;
  int port() const { return m_port; }

private:
  int m_fd;
  int m_port = 0;
};

} // namespace

TEST_CASE("fault crash-load: a traceback, exit 1, workers gone") {
  Server server({"--tp-size", "2", "--sim-load-time", "1s", "--sim-fault", "crash-load:0.5"});
  CHECK(server.process().wait_exit_code(k_ready_timeout) == 1);
  const auto log = server.log();
  CHECK(log.find("Scheduler hit an exception: Traceback (most recent call last):") != std::string::npos);
  CHECK(log.find("\nRuntimeError: ") != std::string::npos);
  CHECK(log.find("Received sigquit from a child process. It usually means the child failed.") != std::string::npos);
  CHECK(log.find("Load weight end") == std::string::npos);
  CHECK(log.find("Uvicorn running") == std::string::npos);
  CHECK(connection_refused(server.port()));
  CHECK(wait_until([&] { return server.gpus().nvidia_smi(k_apps_query).out.empty(); }, k_exit_timeout));
}

TEST_CASE("fault oom: torch.OutOfMemoryError, then exit 1") {
  Server server({"--sim-load-time", "0.5s", "--sim-fault", "oom"});
  CHECK(server.process().wait_exit_code(k_ready_timeout) == 1);
  const auto log = server.log();
  CHECK(log.find("\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.") != std::string::npos);
  CHECK(log.find("The server is fired up") == std::string::npos);
}

TEST_CASE("fault hang: loading stops, the log goes quiet, the port never opens") {
  Server server({"--sim-load-time", "0.4s", "--sim-fault", "hang:0.5"});
  REQUIRE(server.wait_log("Multi-thread loading shards:"));
  // Three load times later it is still there, still refusing, still silent.
  std::this_thread::sleep_for(1200ms);
  const auto log = server.log();
  std::this_thread::sleep_for(500ms);
  CHECK(server.process().running());
  CHECK(connection_refused(server.port()));
  CHECK(server.log() == log);
  CHECK(log.find("Load weight end") == std::string::npos);
}

TEST_CASE("fault port-in-use: SGLang's Errno 98 line, exit 1") {
  SUBCASE("a port another process holds") {
    PortHolder holder;
    Server server({"--port", std::to_string(holder.port())});
    CHECK(server.process().wait_exit_code(k_ready_timeout) == 1);
    CHECK(server.log().find("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', " +
                            std::to_string(holder.port()) + "): address already in use") != std::string::npos);
  }
  SUBCASE("staged on a free port") {
    Server server({"--host", "0.0.0.0", "--sim-fault", "port-in-use"});
    CHECK(server.process().wait_exit_code(k_ready_timeout) == 1);
    CHECK(server.log().find("[Errno 98] error while attempting to bind on address ('0.0.0.0', " +
                            std::to_string(server.port()) + "): address already in use") != std::string::npos);
    CHECK(connection_refused(server.port()));
  }
}

TEST_CASE("fault die-after: the server dies halfway through request N+1") {
  Server server({"--tp-size", "2", "--sim-speed", "20", "--sim-fault", "die-after:2"});
  REQUIRE(server.wait_ready());
  for (int i = 0; i < 2; ++i) {
    const auto ok = stream_post(server.url("/v1/completions"), completion_body(10, Stream::yes));
    CHECK(ok.done);
  }
  const auto cut = stream_post(server.url("/v1/completions"), completion_body(100, Stream::yes));
  CHECK_FALSE(cut.done);
  CHECK(content_events(cut) >= 1);
  CHECK(content_events(cut) < 100);
  CHECK(server.process().wait_exit_code(k_exit_timeout) == 1);
  CHECK(server.log().find("RuntimeError: CUDA error: an illegal memory access was encountered") != std::string::npos);
  CHECK(connection_refused(server.port()));
  CHECK(wait_until([&] { return server.gpus().nvidia_smi(k_apps_query).out.empty(); }, k_exit_timeout));
}

TEST_CASE("fault garbled: a fraction of events carry broken JSON") {
  SUBCASE("every event") {
    Server server({"--sim-fault", "garbled:1"});
    REQUIRE(server.wait_ready());
    const auto stream = stream_post(server.url("/v1/completions"), completion_body(10, Stream::yes));
    CHECK(stream.done);
    REQUIRE(stream.events.size() == 12);
    for (int i = 0; i < 10; ++i) {
      CHECK_FALSE(json::accept(stream.events[static_cast<std::size_t>(i)].data));
    }
    CHECK(json::parse(stream.events[10].data)["usage"]["completion_tokens"] == 10);
  }
  SUBCASE("half of them, exactly") {
    Server server({"--sim-fault", "garbled:0.5"});
    REQUIRE(server.wait_ready());
    const auto stream = stream_post(server.url("/v1/completions"), completion_body(10, Stream::yes, Usage::no));
    int broken = 0;
    for (const auto& event : stream.events) {
      broken += json::accept(event.data) || event.data == "[DONE]" ? 0 : 1;
    }
    CHECK(broken == 5);
  }
}

TEST_CASE("fault cut-stream: the stream ends before usage and [DONE]") {
  Server server({"--sim-fault", "cut-stream:0.5"});
  REQUIRE(server.wait_ready());
  const auto results =
      stream_post_many(server.url("/v1/completions"), std::vector<std::string>(4, completion_body(20, Stream::yes)));
  int cut = 0;
  for (const auto& stream : results) {
    CHECK(stream.curl == CURLE_OK);
    CHECK(stream.status == 200);
    if (!stream.done) {
      ++cut;
      CHECK(content_events(stream) == 10);
      CHECK(stream.raw.find("\"usage\"") == std::string::npos);
    }
  }
  CHECK(cut == 2);
}

TEST_CASE("fault slow-first-token: the first token waits, the rest flows") {
  Server server({"--sim-speed", "4", "--sim-fault", "slow-first-token:2s"});
  REQUIRE(server.wait_ready());
  const auto stream = stream_post(server.url("/v1/completions"), completion_body(8, Stream::yes));
  REQUIRE(stream.done);
  // 2 s of model time at speed 4 is at least half a second of wall time.
  CHECK(stream.events.front().arrived - stream.sent >= 500ms);
  const auto id = json::parse(stream.events.front().data)["id"];
  const auto all = json::parse(http_get(server.url("/sim/requests")).body);
  int found = 0;
  for (const auto& request : all["requests"]) {
    if (request["id"] == id) {
      ++found;
      CHECK(request["first_token_s"].get<double>() - request["arrival_s"].get<double>() >= 2.0);
    }
  }
  CHECK(found == 1);
}

TEST_CASE("fault http-500: a fraction of generation requests fail") {
  Server server({"--sim-speed", "20", "--sim-fault", "http-500:0.5"});
  REQUIRE(server.wait_ready());
  int failed = 0;
  for (int i = 0; i < 10; ++i) {
    const auto result = http_post(server.url("/v1/completions"), completion_body(2, Stream::no, Usage::no));
    if (result.status == 500) {
      ++failed;
      const auto body = json::parse(result.body);
      CHECK(body["object"] == "error");
      CHECK(body["code"] == 500);
    } else {
      CHECK(result.status == 200);
    }
  }
  CHECK(failed == 5);
  CHECK(http_get(server.url("/health")).status == 200);
}

TEST_CASE("fault ignore-sigterm: only SIGKILL stops the server") {
  Server server({"--sim-fault", "ignore-sigterm"});
  REQUIRE(server.wait_ready());
  server.process().signal(SIGTERM);
  std::this_thread::sleep_for(500ms);
  CHECK(server.process().running());
  CHECK(http_get(server.url("/health")).status == 200);
  server.process().signal(SIGKILL);
  CHECK(server.process().wait_exit_code(k_exit_timeout) == 128 + SIGKILL);
}
