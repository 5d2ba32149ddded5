// Slurm's answers as specctl reads them: `sbatch --parsable`, `scontrol show
// job --oneliner` and `squeue --format=%i|%k`, each parsed directly and
// through SlurmClient over a host whose every command prints the input.
// The first byte picks the command's exit code (and whether it timed out).

#include "fuzz_support.hpp"

#include <specctl/remote/host.hpp>
#include <specctl/remote/slurm.hpp>

#include <algorithm>
#include <cstdlib>

using namespace specctl;

namespace {

class ReplayHost : public remote::Host {
public:
  explicit ReplayHost(remote::CommandResult answer) : m_answer(std::move(answer)) {}

  std::string describe() const override { return "login (fuzz)"; }
  std::expected<remote::CommandResult, Error> exec(const std::string& /*command_line*/,
                                                   util::Duration /*timeout*/) override {
    return m_answer;
  }
  std::expected<int, Error> open_tunnel(const std::string& /*target_host*/, int /*target_port*/) override {
    return std::unexpected(Error("no tunnels"));
  }

private:
  remote::CommandResult m_answer;
};

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > fuzz::k_max_input) {
    return -1;
  }
  const std::uint8_t mode = data[0];
  std::string_view text = fuzz::as_text(data + 1, size - 1);

  if (auto id = remote::parse_parsable(text); id && !all_digits(*id)) {
    std::abort();
  }
  if (auto job = remote::parse_scontrol_job(text)) {
    if (job->id.empty() || job->state.empty()) {
      std::abort();
    }
    (void)job->finished();
    (void)remote::is_finished_state(job->state);
  }

  remote::CommandResult answer;
  answer.exit_code = (mode & 0x3) == 0 ? 0 : (mode & 0x3) == 1 ? 1 : -1;
  answer.timed_out = (mode & 0x4) != 0;
  if ((mode & 0x8) != 0) {
    answer.err = std::string(text);
  } else {
    answer.out = std::string(text);
  }
  ReplayHost host(std::move(answer));
  remote::SlurmClient client(host);
  remote::SbatchRequest request{
      "/shared/job.sh",         "specctl-fuzz",  "/shared/%j.out",        "/shared", "gpu", std::nullopt, 8,
      std::chrono::minutes{90}, {"--exclusive"}, "specctl-fuzz attempt=1"};
  (void)remote::sbatch_command(request);
  if (auto id = client.submit(request); id && !all_digits(*id)) {
    std::abort();
  }
  if (auto job = client.query("12"); job && *job && (*job)->id.empty()) {
    std::abort();
  }
  (void)client.cancel("12");
  (void)client.jobs_named("specctl-fuzz");
  return 0;
}
