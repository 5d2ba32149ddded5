#include <doctest/doctest.h>

#include "../support/shell_capture.hpp"
#include "../support/ssh_testing.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/remote/openssh_host.hpp>
#include <specctl/util/shell.hpp>

#include <chrono>
#include <csignal>
#include <expected>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

// The OpenSSH transport against a real sshd on 127.0.0.1, through this
// machine's own `ssh` client; its ~/.ssh/config is kept out by a generated -F file.

namespace {

using namespace std::chrono_literals;
using namespace specctl::test;
using specctl::ErrorKind;
using specctl::remote::Host;
using specctl::remote::OpenSshTarget;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Generous: on a loaded CI machine a login shell alone can take a second.
constexpr auto k_command_timeout = std::chrono::seconds{20};

// Says why the case cannot run here (no sshd, no ssh client), if it cannot.
bool skipped() {
  std::optional<std::string> why = TestSshd::unavailable();
  if (!why && (pretend_missing("ssh") || ::access(find_program("ssh").c_str(), X_OK) != 0)) {
    why = "no ssh client (ssh is not in PATH; scripts/setup.sh --tests installs openssh-client)";
  }
  if (why) {
    skip(*why);
  }
  return why.has_value();
}

// The live processes (zombies count as gone) that `keep` accepts.
std::vector<pid_t> processes(const std::function<bool(pid_t)>& keep) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    auto name = entry.path().filename().string();
    if (std::all_of(name.begin(), name.end(), ::isdigit) && process_alive(std::stoi(name)) && keep(std::stoi(name))) {
      found.push_back(std::stoi(name));
    }
  }
  return found;
}

// The masters of `control_dir`: OpenSSH titles them "ssh: <ControlPath> [mux]".
std::vector<pid_t> masters_of(const std::string& control_dir) {
  return processes([&](pid_t pid) {
    auto cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    return cmdline.starts_with("ssh: " + control_dir + "/") && cmdline.find("[mux]") != std::string::npos;
  });
}

pid_t the_master(const std::string& control_dir) {
  std::vector<pid_t> masters;
  wait_until([&] { return (masters = masters_of(control_dir)).size() == 1; });
  REQUIRE_MESSAGE(masters.size() == 1, "masters of " << control_dir << ": " << masters.size());
  return masters.front();
}

// This process's children that are ssh clients.
std::vector<pid_t> ssh_children() {
  return processes([](pid_t pid) {
    auto status = read_file("/proc/" + std::to_string(pid) + "/status");
    return comm_of(pid) == "ssh" && status.find("\nPPid:\t" + std::to_string(::getpid()) + "\n") != std::string::npos;
  });
}

} // namespace

TEST_CASE("openssh host runs commands and reports output and exit codes") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto host = require_openssh(openssh_target_for(*sshd), *sshd);
  CHECK(host->describe() == "testnode (openssh: " + sshd->user() + "@127.0.0.1:" + std::to_string(sshd->port()) + ")");

  SUBCASE("stdout, stderr and the exit code come back separately") {
    auto result = host->exec("echo out; echo err >&2; exit 3", k_command_timeout);
    REQUIRE(result);
    CHECK(result->out == "out\n");
    CHECK(result->err == "err\n");
    CHECK(result->exit_code == 3);
    CHECK_FALSE(result->timed_out);
    auto ok = host->exec("true", k_command_timeout);
    REQUIRE(ok);
    CHECK(ok->exit_code == 0);
    CHECK(ok->out.empty());
    CHECK(ok->err.find("specctl-") == std::string::npos); // no marker left over
  }
  SUBCASE("a signal, empty stdin, output closed early and stderr without a final newline come back as run") {
    auto killed = host->exec("kill -TERM $$", k_command_timeout);
    REQUIRE(killed);
    CHECK(killed->exit_code == 143); // 128 + the signal, as a shell reports it
    CHECK(killed->err.find("Terminated") == std::string::npos);
    auto reader = host->exec("cat; echo after", k_command_timeout);
    REQUIRE(reader);
    CHECK(reader->out == "after\n");
    auto closer = host->exec("exec >/dev/null 2>&1; sleep 1; exit 7", k_command_timeout);
    REQUIRE(closer);
    CHECK(closer->exit_code == 7);
    auto partial = host->exec("printf 'no newline' >&2; printf '\\n\\n' >&2; printf 'x' >&2", k_command_timeout);
    REQUIRE(partial);
    CHECK(partial->err == "no newline\n\nx");
  }
  SUBCASE("nasty strings reach the command intact through shell_quote") {
    std::vector<std::string> words = {"",          " ",
                                      "two words", "'",
                                      "\"",        "it's",
                                      "$HOME",     "`id`",
                                      "$(id)",     "\\",
                                      "a\nb",      "tab\t",
                                      "*",         "~",
                                      "-n",        "--",
                                      "!",         "|",
                                      ">file",     "ünïcödé ✓",
                                      "%s %d",     "{a,b}",
                                      "#c",        "=x",
                                      "%C",        "specctl-exit-0 1"};
    std::vector<std::string> argv = {"printf", "%s\\0"};
    argv.insert(argv.end(), words.begin(), words.end());
    auto result = host->exec(specctl::util::shell_join(argv), k_command_timeout);
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
    // More than sshd's MaxSessions (10) on one master: some wait their turn.
    constexpr int k_threads = 12;
    std::vector<std::future<std::expected<specctl::remote::CommandResult, specctl::Error>>> results;
    for (int i = 0; i < k_threads; ++i) {
      results.push_back(std::async(std::launch::async,
                                   [&host, i] { return host->exec("sleep 0.2; echo " + std::to_string(i), 30s); }));
    }
    for (int i = 0; i < k_threads; ++i) {
      auto result = results[static_cast<std::size_t>(i)].get();
      REQUIRE_MESSAGE(result, (result ? "" : result.error().what()));
      CHECK(result->out == std::to_string(i) + "\n");
      CHECK(result->err.find("specctl-") == std::string::npos); // (rc files may add noise)
    }
  }
  SUBCASE("a command that exits 255 is a result, ssh failing is an error") {
    // Even when the command prints what ssh would print.
    auto result =
        host->exec("echo 'ssh: connect to host x port 22: Connection refused' >&2; exit 255", k_command_timeout);
    REQUIRE(result);
    CHECK(result->exit_code == 255);
    CHECK(result->err == "ssh: connect to host x port 22: Connection refused\n");
    // Now ssh fails: sshd and the master's connection are gone.
    sshd->stop();
    auto started = Clock::now();
    auto failed = host->exec("exit 255", k_command_timeout);
    CHECK(Clock::now() - started < 10s);
    REQUIRE_FALSE(failed);
    std::string message = failed.error().what();
    CHECK(message.starts_with(host->describe() + ": "));
    CHECK(message.find("Connection refused") != std::string::npos);
    CHECK(failed.error().kind() == ErrorKind::unreachable);
  }
  SUBCASE("a non-positive timeout is refused") {
    CHECK(host->exec("true", 0s).error().kind() == ErrorKind::bad_input);
  }
}

TEST_CASE("openssh host pays the user's shell start-up once per shell, not once per command") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  write_file(sshd->session_home() / ".bashrc", "echo start >> \"$HOME/rc-count\"; sleep 2\n");
  auto host = require_openssh(openssh_target_for(*sshd), *sshd);
  for (int i = 0; i < 10; ++i) {
    auto result = host->exec("echo " + std::to_string(i), 30s);
    REQUIRE(result);
    CHECK(result->out == std::to_string(i) + "\n");
  }
  // The master's own check is a login too; then one shell served all ten.
  CHECK(read_file(sshd->session_home() / "rc-count") == "start\nstart\n");
}

TEST_CASE("openssh host kills a command that outlives its timeout") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto host = require_openssh(openssh_target_for(*sshd), *sshd);
  auto pid_file = sshd->dir() / "pid";
  auto started = Clock::now();
  // 3 s, not 1: on a loaded 2-core machine the login shell alone took a second.
  auto result =
      host->exec("echo started; sleep 40 & echo $! > " + specctl::util::shell_quote(pid_file.string()) + "; wait", 3s);
  auto took = Clock::now() - started;
  REQUIRE(result);
  CHECK(result->timed_out);
  CHECK(result->exit_code == -1);
  CHECK(result->out == "started\n");
  CHECK(took >= 2900ms);
  CHECK(took < 10s);
  // The remote `timeout -s KILL` kills the command's process group a moment later.
  auto remote_pid = static_cast<pid_t>(std::stoi(read_file(pid_file)));
  CHECK(wait_until([&] { return !process_alive(remote_pid); }));
  CHECK(ssh_children().empty());
  auto after = host->exec("echo still usable", k_command_timeout);
  REQUIRE(after);
  CHECK(after->out == "still usable\n");
}

TEST_CASE("openssh host never prompts") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto target = openssh_target_for(*sshd);

  // A key the node does not know, and one it knows that has a passphrase.
  REQUIRE(generate_key(sshd->dir() / "wrong_key"));
  auto locked = sshd->dir() / "locked_key";
  REQUIRE(run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", locked.string()}, sshd->dir())
              .exit_code == 0);
  write_file(sshd->dir() / "authorized_keys",
             read_file(sshd->dir() / "authorized_keys") + public_key_of(locked.string() + ".pub") + "\n");
  for (const auto& key : {sshd->dir() / "wrong_key", locked}) {
    CAPTURE(key);
    target.identities = {key.string()};
    auto started = Clock::now();
    auto host = specctl::remote::connect_openssh(target);
    CHECK(Clock::now() - started < 10s);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    CHECK(message == target.describe() + ": " + sshd->user() + "@127.0.0.1: Permission denied (publickey).");
    CHECK(host.error().kind() == ErrorKind::failed);
    CHECK(message.find(public_key_of(key.string() + ".pub").substr(12, 20)) == std::string::npos);
  }
}

TEST_CASE("openssh host checks the host key") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto target = openssh_target_for(*sshd);
  auto port = std::to_string(sshd->port());

  SUBCASE("yes: an unknown host is refused, naming the host") {
    target.known_hosts = (sshd->dir() / "missing_known_hosts").string();
    auto host = specctl::remote::connect_openssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    CHECK(message == target.describe() +
                         ": Host key verification failed. (No ED25519 host key is known for [127.0.0.1]:" + port +
                         " and you have requested strict checking)");
    CHECK(host.error().kind() == ErrorKind::failed);
  }
  SUBCASE("accept-new: a changed host key is refused with the key the host sent") {
    REQUIRE(generate_key(sshd->dir() / "other_host_key"));
    auto file = sshd->dir() / "changed_known_hosts";
    write_file(file, "[127.0.0.1]:" + port + " " + public_key_of(sshd->dir() / "other_host_key.pub") + "\n");
    target.known_hosts = file.string();
    target.strict_host_key_checking = "accept-new";
    auto host = specctl::remote::connect_openssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    CHECK(message.find("Host key for [127.0.0.1]:" + port + " has changed") != std::string::npos);
    CHECK(message.find(sshd->host_key_fingerprint()) != std::string::npos);
    CHECK(message.find("ssh-keygen -f") != std::string::npos);
  }
  SUBCASE("accept-new records an unknown key, quietly") {
    auto file = sshd->dir() / "fresh_known_hosts";
    target.known_hosts = file.string();
    target.strict_host_key_checking = "accept-new";
    auto host = require_openssh(target, *sshd);
    auto result = host->exec("echo hello", k_command_timeout);
    REQUIRE(result);
    CHECK(result->out == "hello\n");
    CHECK(result->err.find("Permanently added") == std::string::npos);
    CHECK(read_file(file).find(public_key_of(sshd->dir() / "host_key.pub")) != std::string::npos);
  }
}

TEST_CASE("openssh host reports an unreachable node clearly and within the connect timeout") {
  if (skipped()) {
    return;
  }
  TempDir dir("specctl-ossh");
  OpenSshTarget target;
  target.name = "ghost";
  target.destination = "127.0.0.1";
  target.user = "root";
  target.config_file = "/dev/null";
  target.control_dir = (dir / "cm").string();
  target.connect_timeout = 1s;

  SUBCASE("nothing listens on the port") {
    target.port = free_port();
    auto started = Clock::now();
    auto host = specctl::remote::connect_openssh(target);
    REQUIRE_FALSE(host);
    CHECK(Clock::now() - started < 5s);
    auto port = std::to_string(*target.port);
    CHECK(std::string(host.error().what()) == "ghost (openssh: root@127.0.0.1:" + port +
                                                  "): ssh: connect to host 127.0.0.1 port " + port +
                                                  ": Connection refused");
    CHECK(host.error().kind() == ErrorKind::unreachable);
  }
  SUBCASE("a port that accepts but never speaks SSH times out") {
    specctl::util::UniqueFd owned(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int fd = owned.get();
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    target.port = ntohs(address.sin_port);
    auto started = Clock::now();
    auto host = specctl::remote::connect_openssh(target);
    auto took = Clock::now() - started;
    owned.reset();
    REQUIRE_FALSE(host);
    CHECK(host.error().kind() == ErrorKind::timed_out);
    CHECK(std::string(host.error().what()).find("Connection timed out during banner exchange") != std::string::npos);
    CHECK(took >= 900ms);
    CHECK(took < 5s);
  }
  SUBCASE("targets ssh cannot use are refused before it runs") {
    auto refused = [&](const std::function<void(OpenSshTarget&)>& change) {
      auto t = target;
      change(t);
      auto host = specctl::remote::connect_openssh(t);
      return !host && host.error().kind() == ErrorKind::bad_input;
    };
    CHECK(refused([](OpenSshTarget& t) { t.destination.clear(); }));
    CHECK(refused([](OpenSshTarget& t) { t.strict_host_key_checking = "ask"; }));
    CHECK(refused([&](OpenSshTarget& t) { t.control_dir = (dir / std::string(60, 'c')).string(); }));
    CHECK(refused([](OpenSshTarget& t) { t.ssh_program = "no-such-ssh-client"; }));
  }
}

TEST_CASE("openssh host re-establishes a master that died") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto target = openssh_target_for(*sshd);
  // A hung master is given up after the connect timeout and 10 s.
  target.connect_timeout = 2s;
  auto host = require_openssh(target, *sshd);
  const pid_t master = the_master(target.control_dir);
  // The control folder holds the master's socket and nothing else.
  REQUIRE_FALSE(fs::is_empty(target.control_dir));

  SUBCASE("killed with SIGKILL, its stale socket left behind: the next command makes a new one") {
    REQUIRE(::kill(master, SIGKILL) == 0);
    REQUIRE(wait_until([&] { return !process_alive(master); }));
    CHECK_FALSE(fs::is_empty(target.control_dir));
    auto result = host->exec("echo again", k_command_timeout);
    REQUIRE_MESSAGE(result, (result ? "" : result.error().what()));
    CHECK(result->out == "again\n");
    CHECK(result->err.find("ControlSocket") == std::string::npos);
    CHECK(the_master(target.control_dir) != master);
  }
  SUBCASE("a command running when the master dies is reported and never run twice") {
    auto runs = sshd->dir() / "runs";
    auto command = "echo run >> " + specctl::util::shell_quote(runs.string()) + "; sleep 4";
    auto pending = std::async(std::launch::async, [&] { return host->exec(command, 6s); });
    REQUIRE(wait_until([&] { return fs::exists(runs); }));
    REQUIRE(::kill(master, SIGKILL) == 0);
    REQUIRE(pending.wait_for(k_wait_timeout) == std::future_status::ready);
    auto result = pending.get();
    REQUIRE_FALSE(result);
    std::string message = result.error().what();
    CHECK(message.starts_with(target.describe() + ": connection lost while running"));
    CHECK(message.find("it was not run again") != std::string::npos);
    CHECK(result.error().kind() == ErrorKind::unreachable);
    auto after = host->exec("echo back", k_command_timeout);
    REQUIRE_MESSAGE(after, (after ? "" : after.error().what()));
    CHECK(after->out == "back\n");
    CHECK(read_file(runs) == "run\n");
  }
  // OpenSSH 9.2's client waits on a hung master until specctl gives up on the start and makes
  // a new master. OpenSSH 10's gives up itself after a few seconds and logs in on its own
  // ("disabling multiplexing"): a shell of the pool then works without a master, and a
  // command of its own (a file written) runs, after which specctl leaves the hung master so
  // that the next one makes a new master instead of paying that wait again.
  SUBCASE("a master that hangs is left behind and the commands after it run on a new one") {
    REQUIRE(::kill(master, SIGSTOP) == 0);
    struct Reaper {
      pid_t pid;
      ~Reaper() { ::kill(pid, SIGKILL); }
    } reaper{master};
    auto started = Clock::now();
    auto result = host->exec("echo fresh", k_command_timeout);
    REQUIRE_MESSAGE(result, (result ? "" : result.error().what()));
    CHECK(result->out == "fresh\n");
    const auto file = (sshd->dir() / "written").string();
    for (const char* text : {"one", "two"}) {
      auto written = host->write_file(file, text, k_command_timeout);
      REQUIRE_MESSAGE(written, (written ? "" : written.error().what()));
      CHECK(read_file(file) == text);
    }
    auto again = host->exec("echo again", k_command_timeout);
    REQUIRE_MESSAGE(again, (again ? "" : again.error().what()));
    CHECK(again->out == "again\n");
    CHECK(Clock::now() - started < 40s);
    // The new master runs while the hung one is still there: it was not waited for.
    const auto masters = masters_of(target.control_dir);
    ::kill(master, SIGKILL);
    CHECK(masters.size() == 2);
    CHECK(the_master(target.control_dir) != master);
  }
}

TEST_CASE("openssh host returns promptly while the master it started lives on") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto target = openssh_target_for(*sshd);
  // The command that checks the node also becomes the master, which forks
  // into the background: it must let go of the pipes we read.
  auto started = Clock::now();
  auto host = require_openssh(target, *sshd);
  CHECK(Clock::now() - started < 5s);
  const pid_t master = the_master(target.control_dir);
  for (const char* fd : {"0", "1", "2"}) {
    CHECK(fs::read_symlink("/proc/" + std::to_string(master) + "/fd/" + fd) == "/dev/null");
  }
  for (int i = 0; i < 5; ++i) {
    auto before = Clock::now();
    auto result = host->exec("echo " + std::to_string(i), k_command_timeout);
    REQUIRE(result);
    CHECK(result->out == std::to_string(i) + "\n");
    CHECK(Clock::now() - before < 3s);
  }
  CHECK(the_master(target.control_dir) == master);
}

TEST_CASE("openssh host tunnels TCP connections to a port on the node") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto target = openssh_target_for(*sshd);
  auto host = require_openssh(target, *sshd);
  EchoServer echo;
  auto port = host->open_tunnel("127.0.0.1", echo.port());
  REQUIRE(port);
  CHECK(*port != echo.port());

  SUBCASE("MiBs each way, several connections at once, and across a master restart") {
    std::vector<std::future<bool>> done;
    for (int i = 0; i < 4; ++i) {
      done.push_back(std::async(std::launch::async, [&, i] {
        auto data = random_bytes(1024 * 1024 + static_cast<std::size_t>(i), static_cast<unsigned>(100 + i));
        auto back = round_trip(*port, data);
        return back && *back == data;
      }));
    }
    for (auto& d : done) {
      CHECK(d.get());
    }
    // A connection open when the master dies sees the break; the port stays.
    specctl::util::UniqueFd held_fd(connect_local(*port));
    int held = held_fd.get();
    REQUIRE(held >= 0);
    char byte = 'x';
    REQUIRE(send_retrying(held, &byte, 1) == 1);
    REQUIRE(recv_retrying(held, &byte, 1) == 1);
    const pid_t master = the_master(target.control_dir);
    REQUIRE(::kill(master, SIGKILL) == 0);
    CHECK(recv_retrying(held, &byte, 1) <= 0);
    held_fd.reset();
    auto data = random_bytes(2 * 1024 * 1024, 5);
    auto back = round_trip(*port, data);
    REQUIRE(back);
    CHECK((*back == data));
    CHECK(the_master(target.control_dir) != master);
    CHECK(host->exec("true", k_command_timeout));
  }
  SUBCASE("a connection to a closed port on the node is closed at once") {
    auto closed = host->open_tunnel("127.0.0.1", free_port());
    REQUIRE(closed);
    specctl::util::UniqueFd owned(connect_local(*closed));
    int fd = owned.get();
    REQUIRE(fd >= 0);
    auto started = Clock::now();
    char byte = 0;
    CHECK(recv_retrying(fd, &byte, 1) <= 0);
    owned.reset();
    CHECK(Clock::now() - started < 10s);
    // The other port still works.
    CHECK(ask(*port, "ping") == "ping");
  }
  SUBCASE("an invalid target is refused") {
    auto refused = host->open_tunnel("127.0.0.1", 0);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind() == ErrorKind::bad_input);
  }
}

TEST_CASE("openssh host writes files atomically") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto host = require_openssh(openssh_target_for(*sshd), *sshd);
  auto path = sshd->dir() / "deep" / "er" / "program.bin";
  // Every byte value, NULs and newlines included, and more than a pipe holds.
  auto data = random_bytes(3 * 1024 * 1024, 3);
  for (int b = 0; b < 256; ++b) {
    data.push_back(static_cast<char>(b));
  }
  auto written = host->write_file(path.string(), data);
  REQUIRE_MESSAGE(written, (written ? "" : written.error().what()));
  CHECK((read_file(path) == data));
  CHECK_FALSE(fs::exists(path.string() + ".part"));

  // Replaced by a rename: a reader holding the old file still sees it whole.
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  REQUIRE(host->write_file(path.string(), "second"));
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  CHECK(after.st_ino != before.st_ino);
  CHECK(read_file(path) == "second");
  REQUIRE(host->write_file(path.string(), ""));
  CHECK(read_file(path).empty());

  auto blocked = host->write_file((sshd->dir() / "deep" / "er" / "program.bin" / "x").string(), "y");
  REQUIRE_FALSE(blocked);
  CHECK(std::string(blocked.error().what()).starts_with(host->describe() + ": cannot write "));
}

TEST_CASE("openssh host closes promptly and leaves no ssh process behind") {
  if (skipped()) {
    return;
  }
  auto sshd = require_sshd();
  auto target = openssh_target_for(*sshd);
  auto host = require_openssh(target, *sshd);
  EchoServer echo;
  auto port = host->open_tunnel("127.0.0.1", echo.port());
  REQUIRE(port);
  specctl::util::UniqueFd held_fd(connect_local(*port));
  int held = held_fd.get();
  REQUIRE(held >= 0);
  char byte = 'x';
  REQUIRE(send_retrying(held, &byte, 1) == 1);
  REQUIRE(recv_retrying(held, &byte, 1) == 1);
  const pid_t master = the_master(target.control_dir);
  CHECK_FALSE(ssh_children().empty());

  SUBCASE("with the node answering") {}
  SUBCASE("with the node stopped dead") {
    for (pid_t pid : sshd->session_pids()) {
      ::kill(pid, SIGSTOP);
    }
  }
  auto started = Clock::now();
  host.reset();
  CHECK(Clock::now() - started < 5s);
  CHECK(ssh_children().empty());
  CHECK(wait_until([&] { return !process_alive(master); }, 10s));
  // The socket and its folder are gone with the host.
  CHECK_FALSE(fs::exists(target.control_dir));
  CHECK(recv_retrying(held, &byte, 1) <= 0);
  held_fd.reset();
  CHECK_FALSE(port_accepts(*port));
  for (pid_t pid : sshd->session_pids()) {
    ::kill(pid, SIGCONT);
  }
}
