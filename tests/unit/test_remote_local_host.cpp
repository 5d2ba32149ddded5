#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/local_host.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace specctl::remote;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

using specctl::test::TempDir;

namespace {

// Polls `condition` until it holds or `limit` passes.
template <typename F> bool eventually(F condition, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

// Zombies count as dead: this machine's init may never reap re-parented processes.
bool pid_alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

} // namespace

TEST_CASE("local exec") {
  LocalHost host;
  SUBCASE("output and exit code") {
    auto r = host.exec("echo out; echo err >&2; exit 3");
    REQUIRE(r);
    CHECK(r->out == "out\n");
    CHECK(r->err == "err\n");
    CHECK(r->exit_code == 3);
    CHECK_FALSE(r->timed_out);
  }
  SUBCASE("large output is intact") {
    auto r = host.exec("head -c 5000000 /dev/zero | tr '\\0' x");
    REQUIRE(r);
    CHECK(r->out.size() == 5'000'000);
    CHECK(r->out.find_first_not_of('x') == std::string::npos);
  }
  SUBCASE("a timeout kills the whole group") {
    TempDir dir;
    auto pid_file = (dir / "bg.pid").string();
    // 2 s so that a loaded machine still forks and writes the pid file in time.
    auto r = host.exec("sleep 30 & echo $! > " + pid_file + "; sleep 30", 2s);
    REQUIRE(r);
    CHECK(r->timed_out);
    int bg = 0;
    {
      std::ifstream in(pid_file);
      in >> bg;
    }
    REQUIRE(bg > 0);
    CHECK(eventually([&] { return !pid_alive(bg); }));
  }
}

TEST_CASE("detached launch, liveness, tags, signals and exit codes") {
  LocalHost host;
  TempDir dir;
  RunFiles files{(dir / "run").string()};
  DetachSpec spec{{"/bin/sh", "-c", "echo \"started $GREETING\"; sleep 1 & sleep 30"},
                  {{"GREETING", "it's $(not run)"}},
                  files.dir,
                  "test-tag-" + std::to_string(getpid())};
  auto pid = start_detached(host, spec);
  REQUIRE(pid);
  CHECK(getpgid(*pid) == *pid);
  CHECK(getsid(*pid) == *pid);
  CHECK(is_alive(host, *pid).value());
  CHECK(eventually([&] { return read_file_from(host, files.log(), 0, 1000).value() == "started it's $(not run)\n"; }));
  CHECK(read_file_from(host, files.log(), 8, 3).value() == "it'");
  CHECK(read_file_from(host, files.log(), 1000, 10).value().empty());

  auto tagged = find_tagged(host, spec.tag);
  REQUIRE(tagged);
  CHECK(std::find(tagged->begin(), tagged->end(), *pid) != tagged->end());
  CHECK(tagged->size() >= 2);
  CHECK(find_tagged(host, "no-such-tag").value().empty());

  auto info = process_info(host, {*pid, 999'999'999});
  REQUIRE(info);
  REQUIRE(info->size() == 1);
  CHECK(info->front().pid == *pid);
  CHECK(info->front().pgid == *pid);

  CHECK_FALSE(read_exit_code(host, files).value().has_value());
  REQUIRE(signal_group(host, *pid, SIGTERM));
  CHECK(eventually([&] { return !is_alive(host, *pid).value(); }));
  for (int p : *tagged) {
    CHECK(eventually([&] { return !pid_alive(p); }));
  }
  CHECK_FALSE(signal_group(host, 1, SIGTERM));
}

TEST_CASE("a detached command's exit code is recorded") {
  LocalHost host;
  TempDir dir;
  RunFiles files{(dir / "run").string()};
  auto pid = start_detached(host, {{"/bin/sh", "-c", "exit 7"}, {}, files.dir, "exit-tag"});
  REQUIRE(pid);
  CHECK(eventually([&] { return read_exit_code(host, files).value() == 7; }));
  auto missing = start_detached(host, {{"/no/such/program"}, {}, files.dir, "missing-tag"});
  REQUIRE(missing);
  CHECK(eventually([&] { return read_exit_code(host, files).value() == 127; }));
  CHECK(read_file_from(host, files.log(), 0, 10000).value().find("/no/such/program") != std::string::npos);
}

TEST_CASE("port holders") {
  LocalHost host;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  auto holders = port_holders(host, port);
  ::close(fd);
  REQUIRE(holders);
  CHECK(*holders == std::vector<int>{getpid()});
  CHECK(port_holders(host, port).value().empty());
}

TEST_CASE("copy back: a 1 GiB log comes back in bounded memory, cut to log_keep with a line saying what was cut") {
  LocalHost host;
  TempDir dir;
  auto source = dir / "server.log";
  {
    std::ofstream out(source, std::ios::binary);
    out << "first line of the load\n";
  }
  // Sparse: a gigabyte of log without a gigabyte of disk, then its last line.
  fs::resize_file(source, 1ull << 30);
  {
    std::ofstream out(source, std::ios::binary | std::ios::app);
    out << "\nthe last line\n";
  }
  auto target = dir / "copy.log";
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  auto copied = copy_back(host, source.string(), target.string(), 8ull << 20);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  REQUIRE_MESSAGE(copied, copied.error().what());
  CHECK(copied->size == (1ull << 30) + 15);
  CHECK(copied->cut == copied->size - (8ull << 20));
  auto kept = fs::file_size(target);
  CHECK(kept > (8ull << 20));
  CHECK(kept < (8ull << 20) + 300);
  std::ifstream in(target, std::ios::binary);
  std::string head(23, '\0');
  in.read(head.data(), 23);
  CHECK(head == "first line of the load\n");
  std::string copy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(copy.ends_with("\nthe last line\n"));
  CHECK(copy.find(fmt::format("[specctl: {} bytes of {} cut here (8.0 MiB of 1.0 GiB kept: the first 1.0 MiB and the "
                              "last 7.0 MiB)]",
                              copied->cut, source.string())) != std::string::npos);
  // Chunks of 8 MiB at most were ever held: the peak of this process grew by far less than the log.
  CHECK((after.ru_maxrss - before.ru_maxrss) * 1024 < (64l << 20));
  CHECK_FALSE(fs::exists(target.string() + ".part"));
}

TEST_CASE("copy back and host facts") {
  LocalHost host;
  TempDir dir;
  auto source = dir / "source.log";
  std::string content(300'000, 'q');
  content += "\nend it's done\n";
  std::ofstream(source, std::ios::binary) << content;
  auto target = dir / "copy.log";
  REQUIRE(copy_back(host, source.string(), target.string()));
  std::ifstream in(target, std::ios::binary);
  std::string copied((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(copied == content);
  CHECK_FALSE(fs::exists(target.string() + ".part"));
  auto missing = copy_back(host, (dir / "nope").string(), target.string());
  REQUIRE_FALSE(missing);
  CHECK(std::string(missing.error().what()).starts_with("local: cannot copy "));

  auto facts = host_facts(host);
  REQUIRE(facts);
  char name[256] = {};
  ::gethostname(name, sizeof name);
  CHECK(facts->hostname == name);
  CHECK_FALSE(facts->kernel.empty());
  CHECK(facts->free_disk_mib.has_value());
}
