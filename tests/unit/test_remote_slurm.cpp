#include <doctest/doctest.h>

#include <specctl/remote/slurm.hpp>

#include "../support/shell_capture.hpp"

using namespace specctl::remote;
using namespace std::chrono_literals;

namespace {

// A job as Slurm 22.05's `scontrol show job --oneliner` prints it (trimmed of
// fields nobody reads), with a Command path and a Comment that hold spaces.
constexpr const char* k_timeout_job =
    "JobId=12 JobName=specctl-slurm-slow UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 "
    "Nice=0 Account=(null) QOS=(null) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:01:31 TimeLimit=00:01:00 TimeMin=N/A "
    "SubmitTime=2026-12-01T18:04:07 NodeList=n1 BatchHost=n1 NumNodes=1 NumCPUs=1 "
    "TRES=cpu=1,mem=1M,node=1,billing=1,gres/gpu=1 Comment=two words "
    "Command=/shared/my runs/job.sh WorkDir=/shared/my runs StdOut=/shared/my runs/slurm-12.out";

} // namespace

TEST_CASE("scontrol's one-line job is read field by field") {
  auto job = parse_scontrol_job(k_timeout_job);
  REQUIRE(job);
  CHECK(job->id == "12");
  CHECK(job->state == "TIMEOUT");
  CHECK(job->reason == "TimeLimit");
  CHECK(job->exit_code == "0:15");
  CHECK(job->nodes == "n1");
  CHECK(job->run_time == "00:01:31");
  CHECK(job->time_limit == "00:01:00");
  CHECK(job->restarts == 0);
  CHECK(job->finished());
  SUBCASE("values with spaces stay whole, and a value's own '=' is no key") {
    CHECK(job->fields.at("Comment") == "two words");
    CHECK(job->fields.at("Command") == "/shared/my runs/job.sh");
    CHECK(job->fields.at("WorkDir") == "/shared/my runs");
    CHECK(job->fields.at("TRES") == "cpu=1,mem=1M,node=1,billing=1,gres/gpu=1");
  }
  SUBCASE("a running or pending job is not finished") {
    auto running = parse_scontrol_job("JobId=3 JobState=RUNNING Reason=None NodeList=n2 Restarts=1");
    REQUIRE(running);
    CHECK(running->active());
    CHECK(running->restarts == 1);
    CHECK_FALSE(parse_scontrol_job("JobId=4 JobState=PENDING Reason=Resources")->finished());
    CHECK_FALSE(parse_scontrol_job("JobId=4 JobState=COMPLETING")->finished());
    CHECK_FALSE(parse_scontrol_job("JobId=4 JobState=REQUEUED")->finished());
  }
  SUBCASE("no job id or no state is no job") {
    CHECK_FALSE(parse_scontrol_job("slurm_load_jobs error: Invalid job id specified"));
    CHECK_FALSE(parse_scontrol_job("JobId=5 Reason=None"));
    CHECK_FALSE(parse_scontrol_job(""));
  }
}

TEST_CASE("Slurm's final states") {
  for (const char* state : {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL",
                            "OUT_OF_MEMORY", "DEADLINE"}) {
    CAPTURE(state);
    CHECK(is_finished_state(state));
  }
  for (const char* state : {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING",
                            "SIGNALING", "STAGE_OUT", ""}) {
    CAPTURE(state);
    CHECK_FALSE(is_finished_state(state));
  }
}

TEST_CASE("sbatch --parsable's job id") {
  CHECK(parse_parsable("12\n") == "12");
  CHECK(parse_parsable("12;cluster-a\n") == "12");
  CHECK(parse_parsable("sbatch: warning: can't honor --ntasks-per-node\n345\n") == "345");
  CHECK_FALSE(parse_parsable(""));
  CHECK_FALSE(parse_parsable("Submitted batch job 12"));
  CHECK_FALSE(parse_parsable("sbatch: error: Batch job submission failed: Invalid account"));
}

TEST_CASE("Slurm time limits are whole minutes, rounded up") {
  CHECK(slurm_time(1min) == "0-00:01:00");
  CHECK(slurm_time(90s) == "0-00:02:00");
  CHECK(slurm_time(1h + 30min) == "0-01:30:00");
  CHECK(slurm_time(std::chrono::hours{50}) == "2-02:00:00");
  CHECK(slurm_time(10s) == "0-00:01:00");
}

// A real shell must hand sbatch every word exactly as written, and run nothing else.
TEST_CASE("sbatch's command line survives a real shell") {
  SbatchRequest request;
  request.script = "/shared/my runs/a'b/job.sh";
  request.job_name = "specctl-x-$(touch /tmp/specctl-pwned)";
  request.output = "/shared/my runs/slurm-%j.out";
  request.workdir = "/shared/my runs";
  request.partition = "gpu";
  request.account = "team";
  request.gpus = 8;
  request.time_limit = 3h;
  request.extra_args = {"--exclusive", "--qos=a; b", "--mem=0"};
  request.comment = "specctl:0123abcd:2";
  auto words = specctl::test::run_shell("sbatch() { printf '%s\\0' \"$@\"; }; " + sbatch_command(request));
  CHECK(words == std::vector<std::string>{"--parsable", "--job-name=specctl-x-$(touch /tmp/specctl-pwned)",
                                          "--output=/shared/my runs/slurm-%j.out", "--chdir=/shared/my runs",
                                          "--partition=gpu", "--account=team", "--gres=gpu:8", "--time=0-03:00:00",
                                          "--comment=specctl:0123abcd:2", "--exclusive", "--qos=a; b", "--mem=0",
                                          "/shared/my runs/a'b/job.sh"});
  SUBCASE("what the experiment leaves out is not passed") {
    SbatchRequest bare;
    bare.script = "job.sh";
    bare.job_name = "j";
    bare.output = "o";
    bare.workdir = "w";
    auto plain = specctl::test::run_shell("sbatch() { printf '%s\\0' \"$@\"; }; " + sbatch_command(bare));
    CHECK(plain == std::vector<std::string>{"--parsable", "--job-name=j", "--output=o", "--chdir=w", "job.sh"});
  }
}
