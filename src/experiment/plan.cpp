#include <specctl/experiment/plan.hpp>

#include <specctl/remote/slurm.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <map>

namespace specctl::experiment {

namespace {

// Stopping a server: TERM, the grace period, KILL, then checking the GPUs.
util::Duration teardown_bound(const server::CleanupSpec& cleanup) {
  return cleanup.grace + cleanup.timeout;
}

std::string gpus_text(const ServerConfig& server) {
  if (!server.gpus) {
    return "all GPUs";
  }
  std::vector<std::string> ids;
  for (int gpu : *server.gpus) {
    ids.push_back(std::to_string(gpu));
  }
  return fmt::format("GPU{} {}", server.gpus->size() == 1 ? "" : "s", util::join(ids, ","));
}

std::string knobs_text(const ServerConfig& server) {
  std::vector<std::string> set;
  std::vector<std::string> derived;
  for (const auto& def : server.tmpl->knobs) {
    auto it = server.knobs.find(def.name);
    if (it == server.knobs.end()) {
      continue;
    }
    const nlohmann::json& value = *it->second.value;
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    (it->second.derived ? derived : set).push_back(fmt::format("{}={}", def.name, text));
  }
  std::string out = set.empty() ? "(none)" : util::join(set, " ");
  if (!derived.empty()) {
    out += fmt::format(" (derived: {})", util::join(derived, " "));
  }
  return out;
}

std::string health_url(const ServerConfig& server) {
  std::string path = server.health.path.value_or(server.tmpl->health_path);
  bool v6 = server.listen.find(':') != std::string::npos;
  std::string host = server.listen == "0.0.0.0" ? "127.0.0.1" : server.listen;
  return fmt::format("http://{}{}{}:{}{}", v6 ? "[" : "", host, v6 ? "]" : "", server.port, path);
}

const HostSpec& host_of(const Experiment& experiment, const Variant& variant) {
  static const HostSpec k_local{};
  auto it = experiment.hosts.find(variant.server.host);
  return it == experiment.hosts.end() ? k_local : it->second;
}

// What each job asks Slurm for, and what it runs.
std::string describe_job(const Variant& variant, const HostSpec& host) {
  const auto& sl = host.slurm;
  std::vector<std::string> parts;
  parts.push_back(sl.gpus ? fmt::format("--gres=gpu:{}", *sl.gpus) : "no GPUs requested");
  if (sl.time_limit) {
    parts.push_back("--time=" + remote::slurm_time(*sl.time_limit));
  }
  if (sl.partition) {
    parts.push_back("--partition=" + *sl.partition);
  }
  if (sl.account) {
    parts.push_back("--account=" + *sl.account);
  }
  for (const auto& arg : sl.sbatch_args) {
    parts.push_back(arg);
  }
  return fmt::format("sbatch {} on {}; the job runs `specctl job` for {} on the node Slurm picks, with the GPUs "
                     "it allocates",
                     util::join(parts, " "), sl.login.empty() ? "this machine" : sl.login, variant.name);
}

std::vector<std::string> variant_names(const Plan& plan) {
  std::vector<std::string> names;
  for (const auto& planned : plan.variants) {
    names.push_back(planned.variant->name);
  }
  return names;
}

int measured_count(const Plan& plan, const History& history) {
  int n = 0;
  for (const auto& planned : plan.variants) {
    n += history.durations.contains(planned.variant->name) ? 1 : 0;
  }
  return n;
}

// "from history: about 25m for 4 variants one after another (3 measured before in results/x; ...)":
// what the sweep took before, beside the bound from timeouts.
std::string history_line(const Plan& plan, const History& history) {
  auto estimate = history.estimate(variant_names(plan));
  if (!estimate) {
    return fmt::format("from history: none (no earlier run in {} recorded these variants' durations)\n", history.dir);
  }
  const auto n = plan.variants.size();
  const int measured = measured_count(plan, history);
  std::string basis = static_cast<std::size_t>(measured) == n
                          ? fmt::format("each as its newest run in {} took", history.dir)
                          : fmt::format("{} of them as their newest run in {} took, the other{} at their mean",
                                        measured, history.dir, n - static_cast<std::size_t>(measured) == 1 ? "" : "s");
  return fmt::format("from history: about {} for {} variant{} one after another ({})\n",
                     util::format_duration(std::chrono::round<std::chrono::seconds>(*estimate)), n, n == 1 ? "" : "s",
                     basis);
}

} // namespace

std::string host_kind_name(HostKind kind) {
  switch (kind) {
  case HostKind::local:
    return "local";
  case HostKind::ssh:
    return "ssh";
  case HostKind::pool:
    return "pool";
  case HostKind::slurm:
    break;
  }
  return "slurm";
}

std::optional<util::Duration> History::estimate(const std::vector<std::string>& variants) const {
  util::Duration sum{0};
  long known = 0;
  for (const auto& name : variants) {
    if (auto it = durations.find(name); it != durations.end()) {
      sum += it->second;
      ++known;
    }
  }
  if (known == 0) {
    return std::nullopt;
  }
  return sum + sum / known * (static_cast<long>(variants.size()) - known);
}

util::Duration History::mean() const {
  util::Duration sum{0};
  for (const auto& [name, d] : durations) {
    sum += d;
  }
  return durations.empty() ? sum : sum / static_cast<long>(durations.size());
}

util::Duration History::longest() const {
  util::Duration out{0};
  for (const auto& [name, d] : durations) {
    out = std::max(out, d);
  }
  return out;
}

util::Duration Plan::makespan() const {
  util::Duration longest{0};
  for (const auto& h : schedule) {
    longest = std::max(longest, h.busy);
  }
  return longest;
}

util::Duration Plan::total() const {
  util::Duration sum{0};
  for (const auto& v : variants) {
    sum += v.estimate.total();
  }
  return sum;
}

std::vector<HostSchedule> make_schedule(const Experiment& experiment, const std::vector<PlannedVariant>& variants,
                                        const std::vector<std::size_t>& which) {
  // A Slurm cluster runs up to max_jobs variants at once (every one when
  // unlimited): one lane each, folded back into one entry at the end.
  std::map<std::string, int> lanes;
  for (std::size_t i : which) {
    const auto& host = host_of(experiment, *variants.at(i).variant);
    if (host.kind == HostKind::slurm) {
      lanes[host.name] += 1;
    }
  }
  for (auto& [name, count] : lanes) {
    int max_jobs = experiment.hosts.at(name).slurm.max_jobs;
    count = max_jobs > 0 ? std::min(count, max_jobs) : count;
  }
  struct Lane {
    std::string host;
    util::Duration busy{0};
  };
  std::vector<HostSchedule> schedule;
  std::vector<Lane> lane_of;
  // List scheduling, as the runner does it: in queue order, to the candidate host free first.
  for (std::size_t i : which) {
    const auto& planned = variants.at(i);
    auto candidates = hosts_for(experiment, *planned.variant);
    for (const auto& name : candidates) {
      if (std::none_of(schedule.begin(), schedule.end(), [&](const auto& h) { return h.host == name; })) {
        schedule.push_back(HostSchedule{name, {}, util::Duration{0}});
        for (int k = 0; k < (lanes.contains(name) ? lanes[name] : 1); ++k) {
          lane_of.push_back(Lane{name});
        }
      }
    }
    Lane* best = nullptr;
    for (auto& lane : lane_of) {
      bool candidate = std::find(candidates.begin(), candidates.end(), lane.host) != candidates.end();
      if (candidate && (best == nullptr || lane.busy < best->busy)) {
        best = &lane;
      }
    }
    best->busy += planned.estimate.total();
    auto& h = *std::find_if(schedule.begin(), schedule.end(), [&](const auto& s) { return s.host == best->host; });
    h.variants.push_back(i);
    h.busy = std::max(h.busy, best->busy);
  }
  return schedule;
}

Plan make_plan(const Experiment& experiment, const server::RenderOptions& options) {
  Plan plan;
  plan.experiment = &experiment;
  for (const auto& variant : experiment.variants) {
    PlannedVariant planned;
    planned.variant = &variant;
    planned.launch = server::render_launch(variant.server, options);
    planned.estimate.cleanup = variant.server.cleanup.grace + variant.server.cleanup.timeout;
    planned.estimate.load = variant.server.health.timeout;
    for (const auto& name : variant.benchmarks) {
      if (const auto* bench = experiment.find_benchmark(name)) {
        planned.estimate.benchmarks += bench->timeout;
      }
    }
    planned.estimate.teardown = teardown_bound(variant.server.cleanup);
    plan.variants.push_back(std::move(planned));
  }
  std::vector<std::size_t> all(plan.variants.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i] = i;
  }
  plan.schedule = make_schedule(experiment, plan.variants, all);
  return plan;
}

std::string describe_cleanup(const Variant& variant, const HostSpec& host) {
  const auto& server = variant.server;
  const auto& cleanup = server.cleanup;
  std::string names = cleanup.allow.empty() ? "(no names: nothing may be killed)" : util::join(cleanup.allow, ", ");
  std::string gpus = host.kind == HostKind::slurm ? "the GPUs Slurm allocated"
                     : !host.slots.empty()        ? "the slot's GPUs"
                                                  : gpus_text(server);
  std::string action;
  switch (cleanup.policy) {
  case server::CleanupPolicy::kill:
    action = fmt::format("kill GPU processes named {} on {} (TERM to the process group, {} grace, then KILL); "
                         "report any other GPU process, never kill it",
                         names, gpus, util::format_duration(cleanup.grace));
    break;
  case server::CleanupPolicy::wait:
    action = fmt::format("wait up to {} for GPU processes on {} to exit; kill nothing",
                         util::format_duration(cleanup.timeout), gpus);
    break;
  case server::CleanupPolicy::fail:
    action = fmt::format("refuse to start while any process uses {}; kill nothing", gpus);
    break;
  }
  std::string busy = cleanup.busy == server::BusyPolicy::wait
                         ? fmt::format("wait up to {} while a live specctl run's server holds the port or GPUs",
                                       util::format_duration(cleanup.timeout))
                         : "fail while a live specctl run's server holds the port or GPUs";
  return fmt::format("{}; stop the servers dead specctl runs left on {}; {}; then wait until each GPU uses < {} MiB "
                     "(at most {}); port {} must be free",
                     busy,
                     host.name.empty()              ? "the host"
                     : host.kind == HostKind::pool  ? "the pool's host it runs on"
                     : host.kind == HostKind::slurm ? "the job's node"
                                                    : host.name,
                     action, cleanup.gpu_free_below_mib, util::format_duration(cleanup.timeout), server.port);
}

std::string format_plan(const Plan& plan) {
  const Experiment& e = *plan.experiment;
  std::string out;
  out += fmt::format("experiment: {} ({})\n", e.name, e.file);
  if (!e.description.empty()) {
    out += fmt::format("  {}\n", e.description);
  }
  out += "hosts:\n";
  for (const auto& [name, host] : e.hosts) {
    out += fmt::format("  {}: {}\n", name, host.describe());
  }
  out += fmt::format("baseline: {}\n", e.report.baseline.value_or("(none)"));
  out += fmt::format("{} variant{}, {} benchmark{}, run in this order:\n", plan.variants.size(),
                     plan.variants.size() == 1 ? "" : "s", e.benchmarks.size(), e.benchmarks.size() == 1 ? "" : "s");
  std::size_t index = 0;
  for (const auto& planned : plan.variants) {
    const Variant& v = *planned.variant;
    const ServerConfig& s = v.server;
    const HostSpec& host = host_of(e, v);
    out += fmt::format("\n[{}/{}] {}\n", ++index, plan.variants.size(), v.name);
    if (!v.description.empty()) {
      out += fmt::format("  about:      {}\n", v.description);
    }
    if (v.repeat_of) {
      out += fmt::format("  repeats:    {} (the same server and benchmarks, measured again for the noise between "
                         "runs)\n",
                         *v.repeat_of);
    }
    out += fmt::format("  host:       {} ({})\n", host.name,
                       !host.slots.empty()            ? host.describe()
                       : host.kind == HostKind::local ? "local"
                       : host.kind == HostKind::ssh   ? "ssh"
                                                      : host.describe());
    if (auto nodes = hosts_for(e, v); !nodes.empty() && slot_of(e, nodes.front())) {
      std::vector<std::string> where;
      for (const auto& node : nodes) {
        if (auto slot = slot_of(e, node)) {
          auto in_slot = slot->server_in_slot(s);
          where.push_back(fmt::format("{} (GPUs {}, port {})", node,
                                      fmt::join(in_slot.gpus.value_or(std::vector<int>{}), ","), in_slot.port));
        }
      }
      out += fmt::format("  slots:      runs in whichever GPU slot is free: {}\n", util::join(where, "; "));
    }
    if (host.kind == HostKind::slurm) {
      out += fmt::format("  job:        {}\n", describe_job(v, host));
    }
    out += fmt::format("  template:   {} ({})\n", s.tmpl->name, s.tmpl->file);
    out += fmt::format("  model:      {}\n", s.model);
    out += fmt::format("  knobs:      {}\n", knobs_text(s));
    out += fmt::format("  command:    {}\n", planned.launch.shell_line());
    std::vector<std::string> env;
    for (const auto& [name, value] : planned.launch.env) {
      env.push_back(fmt::format("{}={}", name, value));
    }
    out += fmt::format("  env:        {}\n", env.empty() ? "(inherited only)" : util::join(env, " "));
    out += fmt::format("  cleanup:    {}\n", describe_cleanup(v, host));
    out += fmt::format("  ready:      GET {}{} every {}, up to {}; fail at once if the server exits or logs a fatal "
                       "line, or after {} without load progress\n",
                       health_url(s), host.kind == HostKind::ssh ? " (through an SSH tunnel)" : "",
                       util::format_duration(s.health.interval), util::format_duration(s.health.timeout),
                       util::format_duration(s.health.stall));
    bool first = true;
    std::size_t width = 0;
    for (const auto& name : v.benchmarks) {
      width = std::max(width, name.size());
    }
    for (const auto& name : v.benchmarks) {
      const auto* bench = e.find_benchmark(name);
      if (bench == nullptr) {
        continue;
      }
      out += fmt::format("  {:<12}{:<{}}  {} (timeout {})\n", first ? "benchmarks:" : "", bench->name, width,
                         bench->describe(), util::format_duration(bench->timeout));
      first = false;
    }
    for (const auto& warning : planned.launch.warnings) {
      out += fmt::format("  warning:    {}\n", warning);
    }
    if (host.kind == HostKind::slurm && host.slurm.time_limit && *host.slurm.time_limit < planned.estimate.total()) {
      out +=
          fmt::format("  warning:    the job's time limit {} is below this variant's bound {}: Slurm ends a slow "
                      "run at its limit, and the variant fails with that reason\n",
                      util::format_duration(*host.slurm.time_limit), util::format_duration(planned.estimate.total()));
    }
    const auto& est = planned.estimate;
    out += fmt::format("  at most:    {} (cleanup {}, load {}, benchmarks {}, teardown {})\n",
                       util::format_duration(est.total()), util::format_duration(est.cleanup),
                       util::format_duration(est.load), util::format_duration(est.benchmarks),
                       util::format_duration(est.teardown));
  }
  if (!e.report.expect.empty()) {
    out += "\nexpectations:\n";
    for (const auto& x : e.report.expect) {
      std::string where = x.level ? fmt::format(" @ {}", *x.level) : x.rate ? fmt::format(" @ {} req/s", *x.rate) : "";
      out += fmt::format("  {} / {}{}: {} = {} ± {}%\n", x.variant, x.benchmark, where, x.metric, x.value,
                         x.tolerance_pct);
    }
  }
  if (plan.schedule.size() > 1) {
    out += "\nschedule (one variant per host or GPU slot at a time, all at once):\n";
    for (const auto& h : plan.schedule) {
      std::string names;
      for (auto i : h.variants) {
        names += (names.empty() ? "" : ", ") + plan.variants[i].variant->name;
      }
      out += fmt::format("  {}: {} (at most {})\n", h.host, names.empty() ? "-" : names, util::format_duration(h.busy));
    }
  }
  out += fmt::format("\nestimate: at most {} for {} variant{}", util::format_duration(plan.makespan()),
                     plan.variants.size(), plan.variants.size() == 1 ? "" : "s");
  if (plan.schedule.size() > 1) {
    out += fmt::format(" on {} hosts ({} on one)", plan.schedule.size(), util::format_duration(plan.total()));
  }
  out += " (every wait to its timeout, streams as slow as 2 tok/s); a healthy sweep is much faster\n";
  if (plan.history) {
    out += history_line(plan, *plan.history);
  }
  return out;
}

nlohmann::ordered_json plan_to_json(const Plan& plan) {
  const Experiment& e = *plan.experiment;
  nlohmann::ordered_json out;
  out["experiment"] = e.name;
  out["file"] = e.file;
  out["description"] = e.description;
  out["baseline"] = e.report.baseline ? nlohmann::ordered_json(*e.report.baseline) : nlohmann::ordered_json();
  out["noise"] = e.report.noise;
  out["max_failed_pct"] = e.report.max_failed_pct;
  out["hosts"] = nlohmann::ordered_json::object();
  for (const auto& [name, host] : e.hosts) {
    nlohmann::ordered_json h;
    h["kind"] = host_kind_name(host.kind);
    if (host.kind == HostKind::pool) {
      h["members"] = host.members;
    }
    if (host.state_dir) {
      h["state_dir"] = *host.state_dir;
    }
    if (!host.slots.empty()) {
      h["slots"] = host.slots;
    }
    if (host.kind == HostKind::slurm) {
      const auto& sl = host.slurm;
      auto opt = [](const std::optional<std::string>& v) {
        return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
      };
      h["partition"] = opt(sl.partition);
      h["account"] = opt(sl.account);
      h["gpus"] = sl.gpus ? nlohmann::ordered_json(*sl.gpus) : nlohmann::ordered_json();
      h["time_limit_s"] = sl.time_limit ? nlohmann::ordered_json(std::chrono::duration<double>(*sl.time_limit).count())
                                        : nlohmann::ordered_json();
      h["sbatch_args"] = sl.sbatch_args;
      h["setup"] = sl.setup;
      h["login"] = sl.login.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(sl.login);
      h["work_dir"] = opt(sl.work_dir);
      h["max_jobs"] = sl.max_jobs;
    }
    if (host.kind == HostKind::ssh) {
      h["user"] = host.user;
      h["hostname"] = host.hostname;
      h["port"] = host.port;
      h["identity"] =
          host.identities.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(host.identities.front());
      if (host.identities.size() > 1) {
        h["identities"] = host.identities;
      }
      h["host_key"] = host.host_key == HostKeyPolicy::strict ? "strict" : "accept-new";
      h["known_hosts"] = host.known_hosts;
      h["transport"] = host.transport == SshTransport::openssh ? "openssh" : "libssh2";
      h["route"] = host.route();
    }
    out["hosts"][name] = h;
  }
  auto seconds = [](util::Duration d) { return std::chrono::duration<double>(d).count(); };
  out["variants"] = nlohmann::ordered_json::array();
  for (const auto& planned : plan.variants) {
    const Variant& v = *planned.variant;
    const ServerConfig& s = v.server;
    nlohmann::ordered_json j;
    j["name"] = v.name;
    j["base_name"] = v.base_name;
    j["repeat_of"] = v.repeat_of ? nlohmann::ordered_json(*v.repeat_of) : nlohmann::ordered_json();
    j["matrix"] = nlohmann::ordered_json::object();
    for (const auto& [knob, value] : v.matrix_point) {
      j["matrix"][knob] = nlohmann::ordered_json(*value);
    }
    j["host"] = s.host;
    j["template"] = s.tmpl->name;
    j["template_file"] = s.tmpl->file;
    j["template_hash"] = s.tmpl->content_hash;
    j["model"] = s.model;
    j["port"] = s.port;
    j["knobs"] = nlohmann::ordered_json::object();
    for (const auto& def : s.tmpl->knobs) {
      if (auto it = s.knobs.find(def.name); it != s.knobs.end()) {
        j["knobs"][def.name] = nlohmann::ordered_json(*it->second.value);
      }
    }
    j["argv"] = planned.launch.argv;
    j["env"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : planned.launch.env) {
      j["env"][name] = value;
    }
    j["command_line"] = planned.launch.shell_line();
    const auto& c = s.cleanup;
    j["cleanup"] = {{"policy", c.policy == server::CleanupPolicy::kill   ? "kill"
                               : c.policy == server::CleanupPolicy::wait ? "wait"
                                                                         : "fail"},
                    {"allow", c.allow},
                    {"gpus", s.gpus ? nlohmann::ordered_json(*s.gpus) : nlohmann::ordered_json()},
                    {"gpu_free_below_mib", c.gpu_free_below_mib},
                    {"busy", c.busy == server::BusyPolicy::wait ? "wait" : "fail"},
                    {"grace_s", seconds(c.grace)},
                    {"timeout_s", seconds(c.timeout)}};
    j["health"] = {{"url", health_url(s)},
                   {"interval_s", seconds(s.health.interval)},
                   {"timeout_s", seconds(s.health.timeout)},
                   {"stall_s", seconds(s.health.stall)}};
    j["benchmarks"] = v.benchmarks;
    j["warnings"] = planned.launch.warnings;
    j["estimate_s"] = seconds(planned.estimate.total());
    out["variants"].push_back(j);
  }
  out["benchmarks"] = nlohmann::ordered_json::array();
  for (const auto& b : e.benchmarks) {
    nlohmann::ordered_json j = {{"name", b.name},
                                {"kind", kind_name(b.kind)},
                                {"description", b.describe()},
                                {"timeout_s", seconds(b.timeout)}};
    if (b.kind == BenchmarkKind::concurrency) {
      j["levels"] = b.levels;
    }
    if (b.kind == BenchmarkKind::rate) {
      j["rates"] = b.rates;
    }
    if (b.kind == BenchmarkKind::concurrency || b.kind == BenchmarkKind::rate) {
      j["repeats"] = b.repeats;
    }
    if (!b.slo.empty()) {
      // The bounds in the order written; the report shows them beside the goodput.
      j["slo"] = nlohmann::ordered_json::object();
      for (const auto& [metric, bound] : b.slo) {
        j["slo"][metric] = bound;
      }
    }
    if (b.bisect > 0) {
      j["bisect"] = b.bisect;
    }
    if (b.kind != BenchmarkKind::command) {
      j["unique_prompts"] = b.unique_prompts;
    }
    out["benchmarks"].push_back(j);
  }
  out["expectations"] = nlohmann::ordered_json::array();
  for (const auto& x : e.report.expect) {
    nlohmann::ordered_json j = {{"variant", x.variant},
                                {"benchmark", x.benchmark},
                                {"metric", x.metric},
                                {"value", x.value},
                                {"tolerance_pct", x.tolerance_pct}};
    if (x.level) {
      j["level"] = *x.level;
    }
    if (x.rate) {
      j["rate"] = *x.rate;
    }
    out["expectations"].push_back(j);
  }
  out["report_formats"] = e.report.formats;
  out["schedule"] = nlohmann::ordered_json::object();
  for (const auto& h : plan.schedule) {
    std::vector<std::string> names;
    for (auto i : h.variants) {
      names.push_back(plan.variants[i].variant->name);
    }
    out["schedule"][h.host] = names;
  }
  out["estimate_s"] = seconds(plan.makespan());
  if (plan.history) {
    auto names = variant_names(plan);
    auto estimate = plan.history->estimate(names);
    out["history"] = {{"dir", plan.history->dir},
                      {"measured", measured_count(plan, *plan.history)},
                      {"estimate_s", estimate ? nlohmann::ordered_json(seconds(*estimate)) : nlohmann::ordered_json()}};
  }
  return out;
}

} // namespace specctl::experiment
