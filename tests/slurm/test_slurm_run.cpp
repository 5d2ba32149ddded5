// `specctl run` on a real Slurm cluster (tests/support/slurm_cluster.hpp): two
// nodes, n1 and n2, both this machine, four fake GPUs each. Every variant is a
// batch job whose payload is `specctl job`, running specsim on the node Slurm
// picked with the GPUs it allocated. Each node's fake GPUs are a folder of its
// own (the jobs' setup line picks it by $SLURMD_NODENAME), so a job that
// looked at the other node's GPUs, or at GPUs it was not given, would show.
// The sweep's world is slurm_sweep.hpp's.

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "../support/gpu_watcher.hpp"
#include "../support/result_folder.hpp"
#include "../support/sshd.hpp"
#include "slurm_sweep.hpp"

#include <doctest/doctest.h>

#include <specctl/sim/gpu_state.hpp>

#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

using namespace specctl::test;
using namespace slurm_test;

TEST_CASE("a 4-variant sweep runs as Slurm jobs, two at once on n1 and n2, each on its allocated GPUs") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // Three of four GPUs per job: one job fits a node, so two run at once, one per node.
  sweep.write({"a", "b", "c", "d"}, "2s", 10, 3);
  GpuWatcher watcher(sweep.gpu_dirs());
  int code = sweep.run();
  watcher.stop();
  INFO(sweep.output());
  REQUIRE(code == 0);

  std::set<std::string> nodes;
  for (const auto& name : {"a", "b", "c", "d"}) {
    check_ok_variant(sweep.out(), name);
    auto result = read_json(sweep.out() / "variants" / name / "result.json");
    auto allocation = result["slurm"]["allocation"];
    INFO("variant " << name << ": " << allocation.dump());
    // The job saw the three GPUs Slurm gave it, and the server was told exactly those.
    CHECK(allocation["gpus"].size() == 3);
    CHECK(allocation["node"] == result["slurm"]["node"]);
    nodes.insert(result["slurm"]["node"].get<std::string>());
  }
  CHECK(nodes == std::set<std::string>{"n1", "n2"});
  CHECK(watcher.most_nodes_at_once() == 2);
  // specsim's tp-2 workers took the first two of the three visible GPUs; GPU 3 was never given.
  for (const auto& [node, gpus] : watcher.gpus_used()) {
    INFO("node " << node);
    CHECK(gpus == std::set<int>{0, 1});
  }
  // Slurm's answers, in the journal: one submission per variant, each followed to COMPLETED.
  CHECK(journal_events(sweep.out(), "slurm_submitted").size() == 4);
  for (const auto& e : journal_events(sweep.out(), "slurm_finished")) {
    CHECK(e.value("state", "") == "COMPLETED");
  }
  auto provenance = read_json(sweep.out() / "provenance.json");
  CHECK(provenance["variants"]["a"].value("slurm_job", "") != "");
  auto report = read_file(sweep.out() / "report.md");
  for (const auto& name : {"a", "b", "c", "d"}) {
    CHECK(report.find(std::string("| ") + name) != std::string::npos);
  }
  CHECK(sweep.drained());
}

TEST_CASE("a job past its time limit is a failed variant with Slurm's reason") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // The load takes ten minutes; the job has one.
  sweep.write({"slow"}, "10m", 1, 1, "      time_limit: 1m\n", "30m");
  auto specctl = sweep.start_run({});
  auto code = specctl->wait_exit_code(k_time_limit_sweep_timeout).value_or(-1);
  INFO(sweep.output());
  REQUIRE(code == 1);
  auto result = read_json(sweep.out() / "variants" / "slow" / "result.json");
  CHECK(result["status"] == "failed");
  CHECK(result["slurm"]["state"] == "TIMEOUT");
  CHECK(result["failure"]["kind"] == "timed_out");
  CHECK(result.value("reason", "").find("time limit") != std::string::npos);
  // What the job did before Slurm stopped it is kept: it launched and was loading.
  CHECK(result["phases"].contains("launch"));
  // Not retried by default: a second try would hit the same limit.
  const auto submitted = journal_events(sweep.out(), "slurm_submitted");
  REQUIRE(submitted.size() == 1);
  CHECK(sweep.drained());
  // Slurm's own record of the job, which the cluster's suite once checked in a case of its
  // own (another 90 s of a 1-minute limit): the limit as set, and why the job ended.
  const auto id = submitted.front().value("job_id", "");
  const auto record = sweep.cluster().run("scontrol show job --oneliner " + id).output;
  INFO(record);
  CHECK(record.find("JobState=TIMEOUT ") != std::string::npos);
  CHECK(record.find("Reason=TimeLimit ") != std::string::npos);
  CHECK(record.find("TimeLimit=00:01:00 ") != std::string::npos);
  const auto job_output =
      read_file(std::filesystem::path(result["slurm"]["job_dir"].get<std::string>()) / ("slurm-" + id + ".out"));
  CHECK(job_output.find("DUE TO TIME LIMIT") != std::string::npos);
}

TEST_CASE("Ctrl-C of the coordinator cancels the running jobs and leaves no process") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a", "b", "c"}, "10m", 1, 3, "", "30m");
  auto specctl = sweep.start_run({});
  // Ctrl-C comes when both nodes' jobs are loading, their servers launched (each
  // job's own journal says so), and the third job waits in the queue. Not as soon as
  // Slurm says RUNNING: the payloads may still be starting then, and a payload killed
  // while it starts its server leaves that server behind (it runs detached, out of
  // reach of the cluster's proctrack/linuxproc). Nor before all three are submitted:
  // each variant submits from its own thread, and on a loaded machine the third
  // sbatch may come after the first two jobs run.
  std::vector<nlohmann::json> submitted;
  std::vector<std::string> waiting;
  bool loading = wait_until(
      [&] {
        submitted = journal_events(sweep.out(), "slurm_submitted");
        waiting.clear();
        for (const auto& e : submitted) {
          if (journal_events(std::filesystem::path(e.value("job_dir", "")) / "run", "launched").empty()) {
            waiting.push_back(e.value("job_id", ""));
          }
        }
        return submitted.size() == 3 && waiting.size() == 1;
      },
      k_phase_timeout);
  INFO(sweep.output());
  INFO(sweep.jobs_report());
  REQUIRE(loading);
  // The waiting job stays queued until specctl cancels it: otherwise a node freed by
  // the first cancellations may start it just as its own scancel comes (specctl
  // cancels each job from its variant's thread, seconds apart under load), and its
  // payload would be killed while it starts its server, as above.
  REQUIRE(sweep.job_state(waiting.front()) == "PENDING");
  auto held = sweep.cluster().run("scontrol hold " + waiting.front());
  INFO(held.output);
  REQUIRE(held.exit_code == 0);
  specctl->signal(SIGINT);
  auto code = specctl->wait_exit_code(k_signal_exit_timeout);
  REQUIRE(code.has_value());
  CHECK(*code == 130);
  for (const auto& e : submitted) {
    INFO("job " << e.value("job_id", ""));
    CHECK(sweep.job_state(e.value("job_id", "")) == "CANCELLED");
  }
  CHECK(journal_events(sweep.out(), "slurm_cancelled").size() == 3);
  bool drained = sweep.drained();
  INFO("left: " << describe(job_processes(sweep.cluster())));
  CHECK(drained);
  for (const auto& node : {"n1", "n2"}) {
    CHECK(specctl::sim::live_app_entries(sweep.gpu_dir(node)).empty());
  }
}

TEST_CASE("kill -9 of the coordinator, then --resume adopts the jobs and completes the table") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // A 4 s load (speed 1): the kill comes while the jobs run.
  sweep.write({"a", "b", "c", "d"}, "4s", 1, 3);
  auto specctl = sweep.start_run({});
  // Every variant submitted, and a job running: kill -9 catches the sweep mid-flight.
  bool running = wait_until(
      [&] {
        return journal_events(sweep.out(), "slurm_submitted").size() == 4 &&
               !journal_events(sweep.out(), "slurm_running").empty();
      },
      k_phase_timeout);
  INFO(sweep.output());
  INFO(sweep.jobs_report());
  REQUIRE(running);
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit(std::chrono::seconds{10}).has_value());
  // The jobs go on without the coordinator.
  auto first = journal_events(sweep.out(), "slurm_submitted");
  // The jobs of variants not yet finished when the kill came: those the resumed run must adopt.
  std::set<std::string> finished;
  std::size_t failed_before_kill = 0;
  for (const auto& e : journal_events(sweep.out(), "variant_finished")) {
    finished.insert(e.value("variant", ""));
    failed_before_kill += e.value("status", "") != "ok" ? 1 : 0;
  }
  INFO("finished before the kill: " << journal_events(sweep.out(), "variant_finished").size() << ", "
                                    << failed_before_kill << " not ok");
  std::set<std::string> ids;
  for (const auto& e : first) {
    if (!finished.contains(e.value("variant", ""))) {
      ids.insert(e.value("job_id", ""));
    }
  }
  REQUIRE_FALSE(ids.empty());

  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  for (const auto& name : {"a", "b", "c", "d"}) {
    check_ok_variant(sweep.out(), name);
  }
  // Nothing was submitted again: the resumed run followed the same four jobs, and
  // submitted anew only a variant that had failed before the kill (on a loaded machine
  // a load can miss its deadline), as --resume does.
  auto all = journal_events(sweep.out(), "slurm_submitted");
  CHECK(all.size() == 4 + failed_before_kill);
  std::set<std::string> adopted;
  for (const auto& e : journal_events(sweep.out(), "slurm_adopted")) {
    adopted.insert(e.value("job_id", ""));
  }
  CHECK(adopted == ids);
  auto report = read_file(sweep.out() / "report.md");
  for (const auto& name : {"a", "b", "c", "d"}) {
    CHECK(report.find(std::string("| ") + name) != std::string::npos);
  }
  CHECK(sweep.drained());
}

TEST_CASE("through an SSH login node: sbatch, scontrol and the jobs' files all go over SSH") {
  // Asked first: a skip must not start (and wait for) a cluster it does not use.
  if (auto why = TestSshd::unavailable()) {
    skip(*why);
    return;
  }
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  // The login node: a test sshd whose sessions know the cluster.
  auto sshd = TestSshd::start(
      {.listen_address = "127.0.0.2",
       .session_env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", sweep.cluster().env().front()}});
  REQUIRE_MESSAGE(sshd, (sshd ? "" : sshd.error()));
  auto& login = **sshd;
  auto work = sweep.dir() / "shared-work";
  std::string login_host =
      fmt::format("  login1: {{ssh: \"{}@{}:{}\", identity: \"{}\", known_hosts: \"{}\"}}\n", login.user(),
                  login.address(), login.port(), login.user_key().string(), login.known_hosts().string());
  std::string slurm_lines = fmt::format("      login: login1\n      work_dir: \"{}\"\n      specctl: \"{}\"\n",
                                        work.string(), SPECCTL_BINARY);
  sweep.write({"a", "b"}, "2s", 10, 3, slurm_lines, "2m", login_host);
  int code = sweep.run({}, SlurmSweep::Reach::login_node_only);
  INFO(sweep.output());
  REQUIRE(code == 0);
  for (const auto& name : {"a", "b"}) {
    check_ok_variant(sweep.out(), name);
    auto result = read_json(sweep.out() / "variants" / name / "result.json");
    // The job's folder is in the work folder, in one folder for this run.
    auto job_dir = result["slurm"]["job_dir"].get<std::string>();
    CHECK(job_dir.starts_with((work / "slurm-out").string()));
    CHECK(std::filesystem::exists(std::filesystem::path(job_dir) / "job.sh"));
  }
  // The job read the experiment from the copy put beside the jobs.
  CHECK(std::filesystem::exists(work / "slurm-out" / "experiment.yaml"));
  CHECK(sweep.drained());
}

TEST_CASE("a job someone else cancels fails its variant with that reason, and the sweep goes on") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a", "b"}, "2s", 10, 3, "", "30m");
  // Variant a loads for ten minutes: long enough to be cancelled by hand.
  auto text = read_file(sweep.file());
  text.replace(text.find("{name: a, "), 10, "{name: a, knobs: {sim_load_time: 10m, sim_speed: 1}, ");
  std::ofstream(sweep.file()) << text;
  auto specctl = sweep.start_run({});
  std::string job_a;
  bool running = wait_until(
      [&] {
        for (const auto& e : journal_events(sweep.out(), "slurm_running")) {
          if (e.value("variant", "") == "a") {
            job_a = e.value("job_id", "");
          }
        }
        return !job_a.empty();
      },
      k_phase_timeout);
  INFO(sweep.output());
  INFO(sweep.jobs_report());
  REQUIRE(running);
  auto cancelled = sweep.cluster().run("scancel " + job_a);
  REQUIRE(cancelled.exit_code == 0);
  auto code = specctl->wait_exit_code(k_sweep_timeout);
  REQUIRE(code.has_value());
  CHECK(*code == 1);
  auto a = read_json(sweep.out() / "variants" / "a" / "result.json");
  CHECK(a["status"] == "failed");
  CHECK(a["slurm"]["state"] == "CANCELLED");
  CHECK(a.value("reason", "").find("cancelled outside specctl") != std::string::npos);
  check_ok_variant(sweep.out(), "b");
  // A cancellation is somebody's decision: not retried.
  CHECK(journal_events(sweep.out(), "slurm_submitted").size() == 2);
  CHECK(sweep.drained());
}

TEST_CASE("a requeued job starts its variant over and is followed to its end") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a"}, "4s", 10, 3);
  auto specctl = sweep.start_run({});
  bool running = wait_until([&] { return journal_events(sweep.out(), "slurm_running").size() == 1; }, k_phase_timeout);
  INFO(sweep.output());
  INFO(sweep.jobs_report());
  REQUIRE(running);
  auto id = journal_events(sweep.out(), "slurm_running").front().value("job_id", "");
  // What a preemption with PreemptMode=REQUEUE does: the job goes back to the queue.
  auto requeued = sweep.cluster().run("scontrol requeue " + id);
  INFO(requeued.output);
  REQUIRE(requeued.exit_code == 0);
  // Slurm holds a requeued job back for two minutes (its BeginTime); let it go now.
  bool pending = wait_until([&] { return sweep.job_state(id) == "PENDING"; }, k_phase_timeout);
  REQUIRE(pending);
  auto released = sweep.cluster().run("scontrol update JobId=" + id + " StartTime=now");
  INFO(released.output);
  CHECK(released.exit_code == 0);
  auto code = specctl->wait_exit_code(k_sweep_timeout);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  check_ok_variant(sweep.out(), "a");
  auto result = read_json(sweep.out() / "variants" / "a" / "result.json");
  CHECK(result["slurm"]["restarts"] == 1);
  // Slurm ran it again; specctl did not submit it again.
  CHECK(journal_events(sweep.out(), "slurm_submitted").size() == 1);
  CHECK(journal_events(sweep.out(), "slurm_running").size() == 2);
  CHECK(sweep.drained());
}

TEST_CASE("a job whose payload cannot start fails with Slurm's exit code and the job's last output") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a"}, "2s", 10, 1, "      specctl: /nonexistent/bin/specctl\n");
  int code = sweep.run();
  INFO(sweep.output());
  CHECK(code == 1);
  auto result = read_json(sweep.out() / "variants" / "a" / "result.json");
  CHECK(result["status"] == "failed");
  CHECK(result["slurm"]["state"] == "FAILED");
  auto reason = result.value("reason", "");
  CHECK(reason.find("without a result") != std::string::npos);
  CHECK(reason.find("exit code 127") != std::string::npos);
  CHECK(reason.find("/nonexistent/bin/specctl") != std::string::npos);
  CHECK(sweep.output().find("without a result") != std::string::npos);
}

TEST_CASE("a job submitted just before kill -9 and never journaled is found with squeue and adopted") {
  SlurmSweep sweep;
  if (!sweep.start()) {
    return;
  }
  sweep.write({"a", "b"}, "4s", 10, 3);
  auto specctl = sweep.start_run({});
  bool running = wait_until(
      [&] {
        return journal_events(sweep.out(), "slurm_submitted").size() == 2 &&
               !journal_events(sweep.out(), "slurm_running").empty();
      },
      k_phase_timeout);
  INFO(sweep.output());
  REQUIRE(running);
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit(std::chrono::seconds{10}).has_value());
  // The kill came between sbatch and the journal's fsync for b: no line of b's job survives.
  std::string job_b;
  std::string kept;
  for (const auto& e : journal(sweep.out())) {
    if (e.value("variant", "") == "b" && e.value("event", "").starts_with("slurm_")) {
      job_b = e.value("job_id", job_b);
      continue;
    }
    kept += e.dump() + "\n";
  }
  REQUIRE_FALSE(job_b.empty());
  std::ofstream(sweep.out() / "journal.jsonl", std::ios::trunc) << kept;

  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  check_ok_variant(sweep.out(), "a");
  check_ok_variant(sweep.out(), "b");
  auto b = read_json(sweep.out() / "variants" / "b" / "result.json");
  CHECK(b["slurm"]["job_id"] == job_b);
  bool unrecorded = false;
  for (const auto& e : journal_events(sweep.out(), "slurm_adopted")) {
    unrecorded = unrecorded || (e.value("job_id", "") == job_b && e.value("unrecorded", false));
  }
  CHECK(unrecorded);
  // Nothing was submitted again: b's one job is the one that ran.
  CHECK(journal_events(sweep.out(), "slurm_submitted").size() == 1);
  CHECK(sweep.drained());
}
