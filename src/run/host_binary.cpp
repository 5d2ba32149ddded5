// This specctl on a benchmark host, for `specctl bench-job` there: found on
// the host's PATH, or uploaded into the state folder once per run when the host
// can run this build (same machine, glibc as new).

#include "bench_client.hpp"

#include <specctl/util/hash.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <charconv>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <gnu/libc-version.h>
#include <sys/utsname.h>

namespace specctl::run::detail {

namespace {

// Probing and checking a copy of specctl on a host.
constexpr util::Duration k_probe_timeout = std::chrono::seconds{30};
// How much of a file's name the content fingerprint takes.
constexpr std::size_t k_hash_chars = 12;
std::string version_line() {
  return std::string("specctl ") + SPECCTL_VERSION;
}

// "glibc 2.36" or "2.36" as (2, 36); nullopt for anything else.
std::optional<std::pair<int, int>> glibc_of(std::string_view text) {
  auto words = std::string(util::trim(std::string(text)));
  auto space = words.rfind(' ');
  std::string_view version =
      space == std::string::npos ? std::string_view(words) : std::string_view(words).substr(space + 1);
  auto dot = version.find('.');
  if (dot == std::string_view::npos) {
    return std::nullopt;
  }
  int major = 0;
  int minor = 0;
  auto [end1, ec1] = std::from_chars(version.data(), version.data() + dot, major);
  auto [end2, ec2] = std::from_chars(version.data() + dot + 1, version.data() + version.size(), minor);
  if (ec1 != std::errc() || ec2 != std::errc() || end1 != version.data() + dot) {
    return std::nullopt;
  }
  return std::pair{major, minor};
}

std::mutex g_mutex;
// By node and state folder: what was found or uploaded there in this run.
std::map<std::string, HostBinary> g_found;

std::expected<std::string, Error> read_own_binary() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) {
    return std::unexpected(Error("cannot read this specctl's own binary (/proc/self/exe)"));
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Finds or puts a specctl that runs on the host; never throws.
HostBinary provision(remote::Host& host, const std::string& state_dir) {
  auto probe = host.exec("v=$(specctl --version 2>/dev/null | head -n 1); printf '%s\\n' \"$v\"; uname -m; "
                         "getconf GNU_LIBC_VERSION 2>/dev/null; true",
                         k_probe_timeout);
  if (!probe || probe->exit_code != 0) {
    return {false, "",
            fmt::format("could not ask {} what it runs: {}", host.describe(),
                        probe ? util::first_line(probe->err) : probe.error().what())};
  }
  std::istringstream lines(probe->out);
  std::string on_path;
  std::string machine;
  std::string glibc;
  std::getline(lines, on_path);
  std::getline(lines, machine);
  std::getline(lines, glibc);
  if (util::trim(on_path) == version_line()) {
    return {true, "specctl", fmt::format("{} on the host's PATH", version_line())};
  }
  if (auto why = host_incompatibility(build_machine(), util::trim(machine), build_glibc(), util::trim(glibc))) {
    return {false, "", *why};
  }
  auto bytes = read_own_binary();
  if (!bytes) {
    return {false, "", bytes.error().what()};
  }
  const std::string name =
      fmt::format("specctl-{}-{}", SPECCTL_VERSION, util::fingerprint(*bytes).substr(0, k_hash_chars));
  const std::string path = state_dir + "/bin/" + name;
  auto there = host.exec(fmt::format("wc -c < {} 2>/dev/null || true", util::shell_quote(path)), k_probe_timeout);
  bool present = there && there->exit_code == 0 && util::trim(there->out) == std::to_string(bytes->size());
  std::string how = "found from an earlier run";
  if (!present) {
    if (auto written = host.write_file(path, *bytes); !written) {
      return {false, "", fmt::format("cannot upload specctl: {}", written.error().what())};
    }
    how = "uploaded";
  }
  auto check = host.exec(fmt::format("chmod 755 {0} && {0} --version", util::shell_quote(path)), k_probe_timeout);
  if (!check || check->exit_code != 0 || util::first_line(check->out) != version_line()) {
    std::string said = !check ? check.error().what() : util::first_line(check->err.empty() ? check->out : check->err);
    return {false, "",
            fmt::format("the copy of specctl at {} does not run on {}: {}", path, host.describe(),
                        said.empty() ? "no output" : said)};
  }
  return {true, path, fmt::format("a copy of this specctl ({}, {})", name, how)};
}

} // namespace

std::optional<std::string> host_incompatibility(std::string_view local_machine, std::string_view host_machine,
                                                std::string_view build_glibc, std::string_view host_glibc) {
  if (host_machine.empty()) {
    return "the host did not say its machine (uname -m)";
  }
  if (host_machine != local_machine) {
    return fmt::format("the host is {} and this specctl is built for {}", host_machine, local_machine);
  }
  auto have = glibc_of(host_glibc);
  auto need = glibc_of(build_glibc);
  if (!have) {
    return fmt::format("the host has no GNU libc this specctl can use (getconf GNU_LIBC_VERSION said \"{}\")",
                       host_glibc);
  }
  if (need && *have < *need) {
    return fmt::format("the host has glibc {}.{} and this specctl needs {}.{} or later", have->first, have->second,
                       need->first, need->second);
  }
  return std::nullopt;
}

std::string build_machine() {
  utsname names{};
  if (::uname(&names) != 0) {
    return "unknown";
  }
  return names.machine;
}

std::string build_glibc() {
  return fmt::format("{}.{}", __GLIBC__, __GLIBC_MINOR__);
}

HostBinary host_binary(remote::Host& host, const std::string& node, const std::string& state_dir) {
  const std::string key = node + "\n" + state_dir;
  // Held while looking: the slots of one host share its copy.
  std::lock_guard lock(g_mutex);
  auto it = g_found.find(key);
  if (it != g_found.end()) {
    return it->second;
  }
  HostBinary found = provision(host, state_dir);
  g_found.emplace(key, found);
  found.fresh = true;
  return found;
}

} // namespace specctl::run::detail
