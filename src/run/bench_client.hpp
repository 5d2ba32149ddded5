#pragma once

// Private to src/run: where a variant's built-in benchmarks run their client.
//
// On an SSH host the client runs on the host by default, as `specctl bench-job`
// started detached beside the server (src/run/bench_job.cpp): the SSH link
// carries no measured byte, and a dropped or stalled connection only delays
// reading the result back. With `client: local` (and always on a local host)
// it runs here; through an SSH tunnel, each level's tunnel round trip is
// measured and recorded beside TTFT, and a level during which the control
// connection dropped or stalled is thrown away and measured once more (and
// flagged when that happens again).

#include "server_watch.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/remote/host_ops.hpp>
#include <specctl/run/bench_job.hpp>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace specctl::run::detail {

// What a measured window opened on: the server log's size and its Prometheus
// text when the measured requests began (read on the host by a host job).
struct ClientWindow {
  std::optional<std::uint64_t> log_from;
  std::optional<std::string> metrics_before;
};
using WindowFn = std::function<void(const ClientWindow&)>;

// Why a host cannot run this specctl's bundle (self_bundle.cpp), or nullopt when
// it can: its machine (`uname -m`) against this build's. The bundle brings its own
// C library, so the host's glibc, or its having none, does not matter.
std::optional<std::string> host_incompatibility(std::string_view local_machine, std::string_view host_machine);

// The machine this binary was built for ("x86_64").
std::string build_machine();

// This specctl, its shared libraries and its dynamic loader as one tar archive:
// specctl, ld.so and lib/ (self_bundle.cpp).
inline constexpr const char* k_bundle_loader = "ld.so";
inline constexpr const char* k_bundle_libraries = "lib";
std::expected<std::string, Error> self_bundle();
// The command that runs the bundle unpacked in `dir`: its loader, given its libraries.
std::vector<std::string> bundle_command(const std::string& dir);

// This specctl on a host (host_binary.cpp), for `specctl bench-job` there: the
// one on its PATH when it is this version, else this one's bundle, uploaded into
// the state folder and unpacked. Looked for once per node and state folder in a
// run (a host's slots share it); never throws.
struct HostBinary {
  bool ok = false;
  // (Braces: GCC 12's -Wmissing-field-initializers spares designated initializers then.)
  std::string binary{};               // the specctl it runs, to report; empty unless ok
  std::vector<std::string> command{}; // the words that run it; empty unless ok
  std::string why{};                  // how it was found, or why none runs there
  bool fresh = false;                 // this call looked; an earlier one did not
};
HostBinary host_binary(remote::Host& host, const std::string& node, const std::string& state_dir);

// How one kind of benchmark runs here, its mode as a host job, and where the
// job's result holds it.
template <typename Result, typename Options> struct ModeCalls {
  BenchJob::Mode job_mode;
  Result (*run_here)(const bench::Target&, const Options&);
  Result (*from_wire)(const nlohmann::json&);
  const char* key;
};

class BenchClient {
public:
  struct Setup {
    remote::Host* host = nullptr;
    // The default from the experiment's `bench: {client:}`.
    experiment::ClientWhere default_where = experiment::ClientWhere::host;
    std::string node;
    std::string state_dir;
    std::string variant;
    // The server: its tag, run files and pid on the host, its port there, and
    // the path of its Prometheus text ("" when the template reads none).
    std::string server_tag;
    remote::RunFiles server_files;
    int server_pid = 0;
    int server_port = 0;
    std::string metrics_path;
    const std::atomic<bool>* stop = nullptr;
    // The target through the tunnel (resolved on first use) for a local client.
    std::function<const bench::Target&()> target;
    std::function<void(const std::string&)> warn;
    std::function<void(const std::string&)> flag;
    std::function<void(std::string_view, nlohmann::json)> journal;
  };

  explicit BenchClient(Setup setup);

  // Each runs one benchmark call (the variant runs one level per call) where
  // `spec` says, with the same options and results as the bench::run_* it
  // stands for. A host job hands its measured window to `window`; a local run
  // opens it through options.common.on_measured_start as before. Throws
  // specctl::Error when a host job could not be run or read back.
  bench::SingleStreamResult single_stream(const experiment::BenchmarkSpec& spec,
                                          const bench::SingleStreamOptions& options, ServerWatch& watch,
                                          const WindowFn& window);
  bench::ConcurrencyResult concurrency(const experiment::BenchmarkSpec& spec, const bench::ConcurrencyOptions& options,
                                       ServerWatch& watch, const WindowFn& window);
  bench::RateResult rate(const experiment::BenchmarkSpec& spec, const bench::RateOptions& options, ServerWatch& watch,
                         const WindowFn& window);

  // For the benchmark's entry: {"ran_on": "host"|"local", "binary", "why", and
  // the control connection's trouble seen during the benchmark}.
  nlohmann::json describe(const experiment::BenchmarkSpec& spec);

private:
  struct Where {
    bool on_host = false;
    std::string binary;
    std::string why;
    std::vector<std::string> command{};
  };
  Where where_for(const experiment::BenchmarkSpec& spec);
  bool tunnelled() const;
  int reconnects() const;
  std::optional<double> tunnel_rtt();
  // Runs a benchmark call where `spec` says: here, through measure_locally, or
  // on the host as `job`.
  template <typename Result, typename Options>
  Result run_mode(const experiment::BenchmarkSpec& spec, const Options& options, const std::string& label, BenchJob job,
                  ServerWatch& watch, const WindowFn& window, const ModeCalls<Result, Options>& mode);
  nlohmann::json run_job(const experiment::BenchmarkSpec& spec, const std::vector<std::string>& command, BenchJob job,
                         const bench::RunOptions& common, ServerWatch& watch, const WindowFn& window);
  // Runs `measure` here; again once when the control connection was in
  // trouble during it. `label` names the level in messages.
  template <typename Result, typename Measure>
  Result measure_locally(const experiment::BenchmarkSpec& spec, const std::string& label, ServerWatch& watch,
                         Measure&& measure);

  Setup m_s;
  int m_jobs = 0;
  // Per benchmark, for describe(): the control connection's trouble during it.
  std::string m_benchmark;
  int m_failed_polls = 0;
  int m_reconnects_seen = 0;
  int m_remeasured = 0;
  std::optional<Where> m_local_fallback;
};

} // namespace specctl::run::detail
