// This specctl on a benchmark host, for `specctl bench-job` there: found on
// the host's PATH, or its bundle (self_bundle.cpp) uploaded into the state folder
// once per version and content, and unpacked there with the host's `tar`.

#include "bench_client.hpp"

#include <specctl/util/hash.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <chrono>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include <sys/utsname.h>
#include <unistd.h>

namespace specctl::run::detail {

namespace {

// Probing and checking a copy of specctl on a host.
constexpr util::Duration k_probe_timeout = std::chrono::seconds{30};
// How much of a file's name the content fingerprint takes.
constexpr std::size_t k_hash_chars = 12;
std::string version_line() {
  return std::string("specctl ") + SPECCTL_VERSION;
}

std::mutex g_mutex;
// By node and state folder: what was found or uploaded there in this run.
std::map<std::string, HostBinary> g_found;
// The bundle's folder name, the same for every host: its bytes are read and hashed
// once for it, and read again only where a host has no copy yet. Guarded by g_mutex.
std::optional<std::string> g_bundle_name;

// The command that runs the bundle in `dir` and what it printed for --version,
// as one shell line that prints nothing when the bundle is not there.
std::string version_check(const std::string& dir) {
  auto words = bundle_command(dir);
  words.push_back("--version");
  return fmt::format("test -x {} && {} 2>&1 | head -n 1", util::shell_quote(dir + "/specctl"), util::shell_join(words));
}

// Finds or puts a specctl that runs on the host; never throws.
HostBinary provision(remote::Host& host, const std::string& state_dir) {
  auto probe = host.exec("v=$(specctl --version 2>/dev/null | head -n 1); printf '%s\\n' \"$v\"; uname -m; true",
                         k_probe_timeout);
  if (!probe || probe->exit_code != 0) {
    return {.why = fmt::format("could not ask {} what it runs: {}", host.describe(),
                               probe ? util::first_line(probe->err) : probe.error().what())};
  }
  std::istringstream lines(probe->out);
  std::string on_path;
  std::string machine;
  std::getline(lines, on_path);
  std::getline(lines, machine);
  if (util::trim(on_path) == version_line()) {
    return {.ok = true,
            .binary = "specctl",
            .command = {"specctl"},
            .why = fmt::format("{} on the host's PATH", version_line())};
  }
  if (auto why = host_incompatibility(build_machine(), util::trim(machine))) {
    return {.why = *why};
  }
  // The bundle's bytes, made at most once here: to name it, or to upload it.
  std::optional<std::string> bundle;
  auto make_bundle = [&]() -> std::optional<std::string> {
    if (!bundle) {
      auto made = self_bundle();
      if (!made) {
        return made.error().what();
      }
      bundle = std::move(*made);
    }
    return std::nullopt;
  };
  if (!g_bundle_name) {
    if (auto why = make_bundle()) {
      return {.why = *why};
    }
    g_bundle_name = fmt::format("specctl-{}-{}", SPECCTL_VERSION, util::fingerprint(*bundle).substr(0, k_hash_chars));
  }
  const std::string& name = *g_bundle_name;
  const std::string dir = state_dir + "/bin/" + name;
  auto there = host.exec(version_check(dir), k_probe_timeout);
  std::string how = "found from an earlier run";
  if (!there || util::first_line(there->out) != version_line()) {
    if (auto why = make_bundle()) {
      return {.why = *why};
    }
    // A name of this upload's own, so that runs sharing the state folder never
    // write one file; the first to finish unpacking gives the folder its name.
    const std::string upload =
        fmt::format("{}.part-{}-{}", dir, ::getpid(), std::chrono::steady_clock::now().time_since_epoch().count());
    if (auto written = host.write_file(upload + ".tar", *bundle); !written) {
      return {.why = fmt::format("cannot upload specctl: {}", written.error().what())};
    }
    const std::string unpack = fmt::format(
        "mkdir -p {0} && tar -xf {1} -C {0} && rm -f {1} && {{ test -d {2} || mv -T {0} {2}; }}; rm -rf {0} {1}; {3}",
        util::shell_quote(upload), util::shell_quote(upload + ".tar"), util::shell_quote(dir), version_check(dir));
    there = host.exec(unpack, k_probe_timeout);
    how = fmt::format("uploaded, {} MiB", bundle->size() >> 20);
  }
  if (!there || util::first_line(there->out) != version_line()) {
    std::string said = !there ? there.error().what() : util::first_line(there->err.empty() ? there->out : there->err);
    return {.why = fmt::format("the copy of specctl at {} does not run on {}: {}", dir, host.describe(),
                               said.empty() ? "no output" : said)};
  }
  return {.ok = true,
          .binary = dir + "/specctl",
          .command = bundle_command(dir),
          .why = fmt::format("this specctl with its own libraries and loader ({}, {})", name, how)};
}

} // namespace

std::optional<std::string> host_incompatibility(std::string_view local_machine, std::string_view host_machine) {
  if (host_machine.empty()) {
    return "the host did not say its machine (uname -m)";
  }
  if (host_machine != local_machine) {
    return fmt::format("the host is {} and this specctl is built for {}", host_machine, local_machine);
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
