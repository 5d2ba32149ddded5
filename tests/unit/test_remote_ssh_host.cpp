#include <doctest/doctest.h>

#include "../support/shell_capture.hpp"
#include "../support/ssh_testing.hpp"

#include <specctl/remote/ssh_host.hpp>
#include <specctl/util/shell.hpp>

#include <chrono>
#include <expected>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

// Commands, host keys, authentication and connection errors against a real
// sshd on 127.0.0.1; tunnels and reconnection are in test_remote_ssh_tunnel.cpp.

namespace {

using namespace std::chrono_literals;
using namespace specctl::test;
using specctl::ErrorKind;
using specctl::remote::HostKeyPolicy;
using specctl::remote::SshTarget;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Generous: on a loaded CI machine a login shell alone can take a second.
constexpr auto k_ssh_command_timeout = std::chrono::seconds{20};

} // namespace

TEST_CASE("ssh host runs commands and reports output and exit codes") {
  auto sshd = require_sshd();
  auto host = require_host(sshd->target(), *sshd);
  CHECK(host->describe() == "testnode (" + sshd->user() + "@127.0.0.1:" + std::to_string(sshd->port()) + ")");

  SUBCASE("stdout, stderr and the exit code come back separately") {
    auto result = host->exec("echo out; echo err >&2; exit 3", k_ssh_command_timeout);
    REQUIRE(result);
    CHECK(result->out == "out\n");
    CHECK(result->err == "err\n");
    CHECK(result->exit_code == 3);
    CHECK_FALSE(result->timed_out);
    auto ok = host->exec("true", k_ssh_command_timeout);
    REQUIRE(ok);
    CHECK(ok->exit_code == 0);
  }
  SUBCASE("a command killed by a signal reports 128 + the signal, as a shell does") {
    auto result = host->exec("kill -TERM $$", k_ssh_command_timeout);
    REQUIRE(result);
    CHECK(result->exit_code == 143);
  }
  SUBCASE("stdin is empty, so a command reading it does not hang") {
    auto result = host->exec("cat; echo after", k_ssh_command_timeout);
    REQUIRE(result);
    CHECK(result->out == "after\n");
  }
  SUBCASE("the exit status survives a command that closes its output early") {
    auto result = host->exec("exec >/dev/null 2>&1; sleep 1; exit 7", k_ssh_command_timeout);
    REQUIRE(result);
    CHECK(result->exit_code == 7);
  }
  SUBCASE("nasty strings reach the command intact through shell_quote") {
    std::vector<std::string> words = {"",      " ",         "two words", "'",        "\"",
                                      "it's",  "$HOME",     "`id`",      "$(id)",    "\\",
                                      "a\nb",  "tab\t",     "*",         "~",        "; rm -rf /nonexistent",
                                      "-n",    "--",        "!",         "&& false", "|",
                                      ">file", "ünïcödé ✓", "%s %d",     "{a,b}",    "#comment",
                                      "=x"};
    std::vector<std::string> argv = {"printf", "%s\\0"};
    argv.insert(argv.end(), words.begin(), words.end());
    auto result = host->exec(specctl::util::shell_join(argv), k_ssh_command_timeout);
    REQUIRE(result);
    CHECK(result->exit_code == 0);
    CHECK(split_nul(result->out) == words);
  }
  SUBCASE("several MiB of stdout and stderr arrive intact") {
    auto data = random_bytes(6 * 1024 * 1024, 7);
    auto file = sshd->dir() / "blob";
    write_file(file, data);
    auto q = specctl::util::shell_quote(file.string());
    auto result = host->exec("cat " + q + "; cat " + q + " >&2", 60s);
    REQUIRE(result);
    CHECK(result->exit_code == 0);
    CHECK(result->out.size() == data.size());
    CHECK(result->err.size() == data.size());
    CHECK((result->out == data));
    CHECK((result->err == data));
  }
  SUBCASE("commands from several threads at once all complete") {
    // More than the 8 channels run at once, so some wait their turn.
    constexpr int k_threads = 12;
    std::vector<std::future<std::expected<specctl::remote::CommandResult, specctl::Error>>> results;
    for (int i = 0; i < k_threads; ++i) {
      results.push_back(std::async(std::launch::async,
                                   [&host, i] { return host->exec("sleep 0.2; echo " + std::to_string(i), 30s); }));
    }
    for (int i = 0; i < k_threads; ++i) {
      auto result = results[static_cast<std::size_t>(i)].get();
      REQUIRE(result);
      CHECK(result->out == std::to_string(i) + "\n");
    }
  }
}

TEST_CASE("ssh host pays the user's shell start-up once per shell, not once per command") {
  auto sshd = require_sshd();
  // As `pyenv init` or `conda init` in root's ~/.bashrc on a GPU node: seconds per shell.
  write_file(sshd->session_home() / ".bashrc", "echo start >> \"$HOME/rc-count\"; sleep 2\n");
  auto host = require_host(sshd->target(), *sshd);
  const auto started = Clock::now();
  for (int i = 0; i < 10; ++i) {
    auto result = host->exec("echo " + std::to_string(i), k_ssh_command_timeout);
    REQUIRE(result);
    CHECK(result->out == std::to_string(i) + "\n");
  }
  // A channel per command would have read it ten times, for 20 s.
  CHECK(read_file(sshd->session_home() / "rc-count") == "start\n");
  CHECK(Clock::now() - started < 15s);
}

TEST_CASE("ssh host kills a command that outlives its timeout") {
  auto sshd = require_sshd();
  auto host = require_host(sshd->target(), *sshd);
  auto tag = std::to_string(::getpid()) + std::to_string(Clock::now().time_since_epoch().count() % 100000);
  auto child = "sleep 40." + tag;
  auto main = "sleep 41." + tag;
  auto started = Clock::now();
  // 3 s, not 1: on a loaded 2-core CI machine sshd, the shell and `echo`
  // once took more than a second to answer, and the output kept was empty.
  auto result = host->exec("echo started; " + child + " & " + main + "; wait", 3s);
  auto took = Clock::now() - started;
  REQUIRE(result);
  CHECK(result->timed_out);
  CHECK(result->exit_code == -1);
  CHECK(result->out == "started\n");
  CHECK(took >= 2900ms);
  CHECK(took < 10s);
  // The remote timeout kills the command's whole process group a moment later.
  CHECK(wait_until([&] { return !process_running(child) && !process_running(main); }));
  auto after = host->exec("echo still usable", k_ssh_command_timeout);
  REQUIRE(after);
  CHECK(after->out == "still usable\n");
  SUBCASE("a non-positive timeout is refused") {
    auto refused = host->exec("true", 0s);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind() == ErrorKind::bad_input);
  }
}

TEST_CASE("ssh host checks the host key against known_hosts") {
  auto sshd = require_sshd();
  auto target = sshd->target();
  auto fingerprint = sshd->host_key_fingerprint();
  REQUIRE(fingerprint.starts_with("SHA256:"));

  SUBCASE("strict: an unknown host is refused, naming the host and the fingerprint") {
    target.known_hosts = (sshd->dir() / "missing_known_hosts").string();
    auto host = specctl::remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    CHECK(message.starts_with(target.describe() + ": host key for [127.0.0.1]:" + std::to_string(sshd->port())));
    CHECK(message.find("is not in") != std::string::npos);
    CHECK(message.find("ssh-ed25519 " + fingerprint) != std::string::npos);
    CHECK(host.error().kind() == ErrorKind::failed);
  }
  SUBCASE("strict and accept-new: a changed host key is refused") {
    REQUIRE(generate_key(sshd->dir() / "other_host_key"));
    auto file = sshd->dir() / "changed_known_hosts";
    write_file(file, "# an old key\n[127.0.0.1]:" + std::to_string(sshd->port()) + " " +
                         public_key_of(sshd->dir() / "other_host_key.pub") + "\n");
    target.known_hosts = file.string();
    for (auto policy : {HostKeyPolicy::strict, HostKeyPolicy::accept_new}) {
      target.host_key_policy = policy;
      auto host = specctl::remote::connect_ssh(target);
      REQUIRE_FALSE(host);
      std::string message = host.error().what();
      CHECK(message.find("HOST KEY CHANGED for [127.0.0.1]:" + std::to_string(sshd->port())) != std::string::npos);
      CHECK(message.find(fingerprint) != std::string::npos);
      CHECK(message.find("ssh-keygen -R") != std::string::npos);
    }
    // Nothing was appended to the file.
    CHECK(read_file(file).find(public_key_of(sshd->dir() / "host_key.pub")) == std::string::npos);
  }
  SUBCASE("accept-new records an unknown key, creating the file, and the key then passes strict checking") {
    auto file = sshd->dir() / "fresh" / "ssh" / "known_hosts";
    target.known_hosts = file.string();
    target.host_key_policy = HostKeyPolicy::accept_new;
    {
      auto host = require_host(target, *sshd);
      auto result = host->exec("echo hello", k_ssh_command_timeout);
      REQUIRE(result);
      CHECK(result->out == "hello\n");
    }
    CHECK(read_file(file) == sshd->known_hosts_line());
    target.host_key_policy = HostKeyPolicy::strict;
    auto again = require_host(target, *sshd);
    CHECK(again->exec("true", k_ssh_command_timeout));
  }
  SUBCASE("hashed known_hosts entries are understood") {
    auto file = sshd->dir() / "hashed_known_hosts";
    write_file(file, sshd->known_hosts_line());
    auto hashed = run_program({"ssh-keygen", "-H", "-f", file.string()}, sshd->dir());
    REQUIRE(hashed.exit_code == 0);
    REQUIRE(read_file(file).starts_with("|1|"));
    target.known_hosts = file.string();
    auto host = require_host(target, *sshd);
    CHECK(host->exec("true", k_ssh_command_timeout));
  }
  SUBCASE("a plain host entry does not vouch for another port of that host") {
    auto file = sshd->dir() / "port22_known_hosts";
    write_file(file, "127.0.0.1 " + public_key_of(sshd->dir() / "host_key.pub") + "\n");
    target.known_hosts = file.string();
    auto host = specctl::remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    CHECK(std::string(host.error().what()).find("is not in") != std::string::npos);
  }
}

TEST_CASE("ssh host authenticates with an identity file, ssh-agent or the default keys") {
  auto sshd = require_sshd();
  auto target = sshd->target();
  auto home = sshd->dir() / "home";
  fs::create_directories(home / ".ssh");
  EnvGuard no_agent("SSH_AUTH_SOCK", std::nullopt);
  EnvGuard fake_home("HOME", home.string());

  SUBCASE("a key the server does not know is refused cleanly, without key material in the message") {
    REQUIRE(generate_key(sshd->dir() / "wrong_key"));
    target.identities = {(sshd->dir() / "wrong_key").string()};
    auto host = specctl::remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    CHECK(message.starts_with(target.describe() + ": public key authentication as \"" + sshd->user() + "\" failed"));
    CHECK(message.find("wrong_key (refused by the server)") != std::string::npos);
    auto private_key = read_file(sshd->dir() / "wrong_key");
    auto public_key = public_key_of(sshd->dir() / "wrong_key.pub");
    CHECK(message.find(public_key.substr(12, 20)) == std::string::npos);
    CHECK(message.find("PRIVATE KEY") == std::string::npos);
  }
  SUBCASE("a missing identity file is named") {
    target.identities = {(sshd->dir() / "no_such_key").string()};
    auto host = specctl::remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    CHECK(std::string(host.error().what()).find("no_such_key (no such file)") != std::string::npos);
  }
  SUBCASE("the identity's public half is derived when no .pub file is beside it") {
    fs::copy_file(sshd->user_key(), sshd->dir() / "lonely_key");
    target.identities = {(sshd->dir() / "lonely_key").string()};
    auto host = require_host(target, *sshd);
    CHECK(host->exec("true", k_ssh_command_timeout));
  }
  SUBCASE("~ in the identity is the home directory") {
    fs::copy_file(sshd->user_key(), home / ".ssh" / "custom");
    target.identities = {"~/.ssh/custom"};
    auto host = require_host(target, *sshd);
    CHECK(host->exec("true", k_ssh_command_timeout));
  }
  SUBCASE("without an identity, ssh-agent is used") {
    auto agent = TestSshAgent::start(sshd->dir());
    REQUIRE_MESSAGE(agent, (agent ? "" : agent.error()));
    auto added = (*agent)->add(sshd->user_key());
    REQUIRE_MESSAGE(added, (added ? "" : added.error()));
    EnvGuard with_agent("SSH_AUTH_SOCK", (*agent)->socket().string());
    target.identities.clear();
    auto host = require_host(target, *sshd);
    CHECK(host->exec("true", k_ssh_command_timeout));
  }
  SUBCASE("without an identity or agent, ~/.ssh/id_ed25519 is used") {
    fs::copy_file(sshd->user_key(), home / ".ssh" / "id_ed25519");
    target.identities.clear();
    auto host = require_host(target, *sshd);
    CHECK(host->exec("true", k_ssh_command_timeout));
  }
  SUBCASE("with nothing to try, the message says what was looked for") {
    target.identities.clear();
    auto host = specctl::remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    CHECK(message.find("SSH_AUTH_SOCK is not set") != std::string::npos);
    CHECK(message.find("no default key") != std::string::npos);
  }
}

TEST_CASE("ssh host reports an unreachable node clearly and within the connect timeout") {
  SshTarget target;
  target.name = "ghost";
  target.user = "root";
  target.hostname = "127.0.0.1";
  target.connect_timeout = 1s;

  SUBCASE("nothing listens on the port") {
    target.port = free_port();
    auto started = Clock::now();
    auto host = specctl::remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    CHECK(Clock::now() - started < 5s);
    CHECK(std::string(host.error().what()) == "ghost (root@127.0.0.1:" + std::to_string(target.port) +
                                                  "): cannot connect to 127.0.0.1 port " + std::to_string(target.port) +
                                                  ": Connection refused");
    CHECK(host.error().kind() == ErrorKind::unreachable);
  }
  SUBCASE("a port that accepts but never speaks SSH times out") {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    target.port = ntohs(address.sin_port);
    auto started = Clock::now();
    auto host = specctl::remote::connect_ssh(target);
    auto took = Clock::now() - started;
    ::close(fd);
    REQUIRE_FALSE(host);
    CHECK(host.error().kind() == ErrorKind::timed_out);
    CHECK(std::string(host.error().what()).find("timed out after 1s in the SSH handshake") != std::string::npos);
    CHECK(took >= 900ms);
    CHECK(took < 5s);
  }
}
