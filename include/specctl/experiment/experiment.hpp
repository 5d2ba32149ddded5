#pragma once

#include <specctl/bench/workload_spec.hpp>
#include <specctl/server/server_config.hpp>
#include <specctl/tune/search.hpp>
#include <specctl/util/diagnostics.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/json_box.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::bench {
struct Workload;
} // namespace specctl::bench

namespace specctl::experiment {

using server::ServerConfig;

// pool: not a machine but a set of hosts a sweep spreads its variants over.
// slurm: a cluster that runs each variant as a batch job on a node it picks.
enum class HostKind { local, ssh, pool, slurm };
// strict: the host key must already be in known_hosts; accept_new: unknown hosts are added, changed keys refused.
enum class HostKeyPolicy { strict, accept_new };

// Slurm states after which a job is submitted again, within --retries.
enum class SlurmRetry { preempted, node_fail, boot_fail, timeout };

// How a slurm host submits its jobs (hosts.NAME.slurm).
struct SlurmSpec {
  std::optional<std::string> partition;
  std::optional<std::string> account;
  // GPUs per job (--gres=gpu:N); the variant gets the ones Slurm allocates.
  std::optional<int> gpus;
  std::optional<util::Duration> time_limit;
  // Extra sbatch arguments, one argv word each.
  std::vector<std::string> sbatch_args;
  // Shell lines the batch script runs before specctl (module load, a venv, ...).
  std::vector<std::string> setup;
  // A local or SSH host of the experiment where sbatch, scontrol and scancel
  // run; empty: this machine.
  std::string login;
  // A folder on the cluster's shared filesystem for the jobs' files; by default
  // the run's result folder (which must then be shared).
  std::optional<std::string> work_dir;
  // The specctl the jobs run; by default this one.
  std::optional<std::string> specctl;
  // At most this many jobs submitted at once; 0: every variant at once.
  int max_jobs = 0;
  util::Duration poll = std::chrono::seconds{10};
  std::vector<SlurmRetry> retry_on = {SlurmRetry::preempted, SlurmRetry::node_fail, SlurmRetry::boot_fail};
};

// libssh2: specctl's own SSH client. openssh: the system `ssh` with a
// ControlMaster of specctl's own, for what libssh2 cannot do (Kerberos,
// hardware keys, certificates, a master authenticated with a second factor).
enum class SshTransport { libssh2, openssh };

struct HostSpec {
  std::string name;
  HostKind kind = HostKind::local;
  // SSH only, after ~/.ssh/config is applied.
  std::string user;
  std::string hostname;
  int port = 22;
  // The experiment's identity, else every IdentityFile of the ssh config, in order.
  std::vector<std::string> identities;
  bool identities_only = false;
  HostKeyPolicy host_key = HostKeyPolicy::strict;
  std::string known_hosts = "~/.ssh/known_hosts";
  std::optional<std::string> host_key_alias;
  // ProxyCommand (tokens expanded) or the hops of `jump:` / ProxyJump, each
  // resolved like a host of its own; at most one of the two.
  std::optional<std::string> proxy_command;
  std::vector<HostSpec> jumps;
  // ConnectTimeout, ServerAliveInterval and ServerAliveCountMax; unset: specctl's defaults.
  std::optional<util::Duration> connect_timeout;
  std::optional<util::Duration> keepalive;
  std::optional<int> keepalive_count;
  SshTransport transport = SshTransport::libssh2;
  // As the experiment wrote them, for the OpenSSH transport, which hands the
  // rest to ssh and the user's config: the host or alias, and the user and
  // port only where given; each jump hop as `ssh -J` takes it.
  std::string destination;
  std::optional<std::string> given_user;
  std::optional<int> given_port;
  std::vector<std::string> given_jumps;
  // The ~/.ssh/config alias this host was resolved from, if any.
  std::optional<std::string> ssh_alias;
  // Keywords of the ssh config this host uses that change how a connection is
  // made and that the libssh2 transport does not implement ("GSSAPIAuthentication yes").
  std::vector<std::string> unsupported_config;
  // Where specctl keeps its servers' records on this host; the run's --state-dir
  // when unset. Nodes that share a home directory over NFS need one each.
  std::optional<std::string> state_dir;
  // Pool only: the hosts (local or SSH) it schedules across, in order.
  std::vector<std::string> members;
  // Local and SSH only: disjoint sets of GPU indices, each running a variant of
  // its own at the same time ("node1#0", "node1#1", ... to the scheduler).
  std::vector<std::vector<int>> slots;
  // Slurm only.
  SlurmSpec slurm;
  util::Location where;

  // "local", "ssh root@gpu-node-1:22", "pool of node-1, node-2", or
  // "slurm partition gpu, 8 GPUs per job, ...".
  std::string describe() const;
  // SSH only: "laptop → bastion → gpu-node-1"; "laptop → gpu-node-1" without hops.
  std::string route() const;
};

struct Variant {
  std::string name;
  // The variant as written (before matrix expansion) and the matrix point: {"spec_steps": 3}.
  std::string base_name;
  std::vector<std::pair<std::string, util::JsonBox>> matrix_point;
  std::string description;
  ServerConfig server;
  // Names of the benchmarks this variant runs (all by default).
  std::vector<std::string> benchmarks;
  // Set on an A/A repeat: the variant whose server and benchmarks it runs again,
  // to measure how far two runs of the same thing differ.
  std::optional<std::string> repeat_of;
  util::Location where;
};

enum class BenchmarkKind { single_stream, concurrency, rate, command };
// "single_stream", "concurrency", "rate", "command": the names experiment files use.
std::string_view kind_name(BenchmarkKind kind);
enum class Endpoint { completions, chat };

struct PromptSpec {
  // "seeds" (the three prompts of the original sessions), "long", a file, inline texts, or synthetic.
  std::string builtin = "seeds";
  std::vector<std::string> inline_prompts;
  std::optional<std::string> file;
  std::optional<int> synthetic_input_tokens;
  // A workload source (sharegpt, jsonl, random, shared_prefix, specdec); dataset paths resolved.
  std::optional<bench::WorkloadSpec> workload;
  // The workload as made when the experiment was read: every variant sends exactly
  // these requests, and the dataset is read once.
  std::shared_ptr<const bench::Workload> loaded;

  // Some of the workload's requests are chats (messages): they need the chat endpoint.
  bool chat() const;
  // The most output tokens a request asks for: its own length where the workload
  // gives one, else max_tokens.
  int longest_output(int max_tokens) const;
  std::string describe() const;
};

enum class ExtractKind { regex, json };
struct MetricExtractor {
  std::string metric;
  ExtractKind kind = ExtractKind::regex;
  std::string pattern;
};

enum class CommandWhere { local, host };

// Where the built-in benchmark's client runs when the server is on an SSH (or
// pool) host: on the host beside the server, so the SSH link is no part of a
// figure (the default), or on this machine through the SSH tunnel (`local`).
// Local and Slurm hosts always run it where the server is.
enum class ClientWhere { host, local };

struct BenchmarkSpec {
  std::string name;
  BenchmarkKind kind = BenchmarkKind::single_stream;
  util::Location where;
  Endpoint endpoint = Endpoint::completions;
  int max_tokens = 512;
  PromptSpec prompts;
  int warmup = 1;
  bool ignore_eos = true;
  // Built-in kinds: every request's prompt gets a prefix of its own, so none is
  // served from the server's prefix cache or repeats another exactly.
  bool unique_prompts = true;
  // Concurrency and rate: times each level is measured, interleaved (every
  // level once, then again). `repeats:` as written; `repeats` is what runs: by
  // default 3 when the experiment asks for a verdict (two or more variants), else 1.
  std::optional<int> repeats_written;
  int repeats = 1;
  // single_stream
  int runs = 5;
  // concurrency: requests per level default to max(2 * level, 10)
  std::vector<int> levels;
  std::optional<int> requests;
  // rate
  std::vector<double> rates;
  util::Duration duration = std::chrono::seconds{60};
  std::optional<int> max_concurrency;
  double burstiness = 1.0;
  // Concurrency and rate: `slo:`, upper bounds on level metrics ("ttft_p99_ms" -> 2000),
  // in the order written. Each level is judged on them, and its goodput counted.
  std::vector<std::pair<std::string, double>> slo;
  // Rate only: `bisect: N`, the most rates measured by bisection, after the listed
  // ones, for the highest rate that meets the SLO; 0: no search.
  int bisect = 0;
  // command
  std::string run;
  CommandWhere run_on = CommandWhere::local;
  std::vector<MetricExtractor> extract;
  // Every benchmark is bounded; by default from its size at a pessimistic speed.
  util::Duration timeout = util::Duration{0};
  // `timeout:` as written; unset: `timeout` is the default, which follows `repeats`.
  std::optional<util::Duration> timeout_written;
  // A request with no byte of answer for this long fails as stalled (built-in kinds).
  util::Duration idle_timeout = std::chrono::seconds{60};
  // `client:` of this benchmark (built-in kinds); unset: the experiment's `bench: {client:}`.
  std::optional<ClientWhere> client;

  int requests_at(int level) const;
  // "512 tokens", or the workload's own lengths: "16-1024 tokens (each request its own)".
  std::string output_text() const;
  std::string describe() const;
  // ", x3 repeats", ", prompts sent verbatim", or nothing: describe()'s tail.
  std::string measures_text() const;
};

struct Expectation {
  std::string variant;
  std::string benchmark;
  std::optional<int> level;
  std::optional<double> rate;
  std::string metric;
  double value = 0;
  double tolerance_pct = 10;
  util::Location where;
};

struct ReportSpec {
  std::optional<std::string> baseline;
  // `noise: true`: a variant "<baseline>-again" repeats the baseline last.
  bool noise = false;
  // A measurement with more of its requests failed than this is not compared.
  double max_failed_pct = 5;
  std::vector<Expectation> expect;
  std::vector<std::string> formats = {"md", "csv", "json", "html", "junit"};
};

// What `specctl tune` optimises at each load point (tune.objective): output tok/s,
// one stream's tok/s (1000 / tpot_p50_ms), goodput (requests per second that
// completed within every per-request bound of the SLO: the level's goodput_rps), or
// tokens per joule. A new objective: this enum and the table in tune_block.cpp
// (its name in YAML and the level metric it reads); a derived one, objective_sample.
enum class TuneObjective { output_tok_s, per_user_tok_s, goodput, tok_per_j };
std::string_view objective_name(TuneObjective objective);
// The level metric (result.json's level "metrics") an objective reads.
std::string_view objective_metric(TuneObjective objective);

// A tuning file's `tune:` block. Its space is expanded into the experiment's
// variants (every configuration a grid would launch, each an ordinary variant), so
// `validate`, `plan` and `run` treat a tuning file as the grid it searches, and
// `specctl tune` launches only the ones the search asks for.
struct TuneSpec {
  std::vector<tune::Dimension> dimensions;
  // The concurrency or rate benchmark whose levels are the load points.
  std::string load;
  // Upper bounds on level metrics ("ttft_p99_ms" -> 2000), checked at each load point.
  // The load benchmark holds the same bounds (one of the two gives them to the other),
  // so its levels carry goodput_rps and a rate load can bisect for its highest rate.
  std::vector<std::pair<std::string, double>> slo;
  TuneObjective objective = TuneObjective::output_tok_s;
  // The most trials launched (a launch is a model load), and the time they may take.
  int max_loads = 12;
  std::optional<util::Duration> max_time;
  // `parallel:` as written: how many trials run at once; unset: as many as the
  // trials' host has machines or GPU slots (parallel_trials() in run/tuning.hpp).
  std::optional<int> parallel;
  // Differences below this share of a figure are ties (on top of the intervals).
  double noise_pct = 2;
  // The knob whose value "none" means no speculation: "speculative" where the space has it.
  std::optional<std::string> speculation;
  // The variant each configuration of the space is.
  std::map<tune::Config, std::string> trials;
  util::Location where;

  tune::Space space() const { return tune::Space(dimensions); }
  // The variant of a configuration; empty when the space has no such configuration.
  std::string trial_of(const tune::Config& config) const;
};

struct Experiment {
  std::string file;
  std::string name;
  std::string description;
  std::map<std::string, HostSpec> hosts;
  std::vector<Variant> variants;
  std::vector<BenchmarkSpec> benchmarks;
  ReportSpec report;
  // `bench: {client: host|local}`: where built-in benchmarks run their client by default.
  ClientWhere bench_client = ClientWhere::host;
  // Fingerprint of the file's content: a resumed run refuses a changed experiment.
  std::string content_hash;
  // A tuning file's search; its variants are the space's configurations.
  std::optional<TuneSpec> tune;

  const Variant* find_variant(const std::string& name) const;
  const BenchmarkSpec* find_benchmark(const std::string& name) const;
};

// The machines a variant may run on: its host, or every member of its pool;
// a host split into GPU slots stands for its slots ("node1#0", "node1#1").
std::vector<std::string> hosts_for(const Experiment& experiment, const Variant& variant);

// A slot of a host split into GPU slots: "node1#1" is slot 1 of node1.
struct Slot {
  std::string host;
  int index = 0;
  int count = 0;
  std::vector<int> gpus;

  // A variant's server in this slot: the slot's GPUs, and a port of its own
  // (the variant's plus the slot's index), so the slots of one host never
  // collide. The plan shows it and the run launches it.
  server::ServerConfig server_in_slot(const server::ServerConfig& server) const;
};
std::optional<Slot> slot_of(const Experiment& experiment, const std::string& node);

// The host a scheduler node names: the host itself, or the host of a slot; nullptr when none.
const HostSpec* machine_of(const Experiment& experiment, const std::string& node);

// "node1#1".
std::string slot_name(const std::string& host, int index);

// How many trials of a tuning run at once: tune.parallel, else one per machine or
// GPU slot of the trials' host (a pool's members, a host's slots), a Slurm
// cluster its max_jobs (1 when unlimited); 1 for anything else.
int parallel_trials(const Experiment& experiment);

// Metrics a benchmark of this kind produces, for checking expectations.
std::vector<std::string> metrics_of(const BenchmarkSpec& benchmark);

// Reads, checks and expands an experiment file. Every problem found is added to
// `diag`; the result is usable only when diag.has_errors() is false.
Experiment load_experiment(const std::string& path, util::Diagnostics& diag);

} // namespace specctl::experiment
