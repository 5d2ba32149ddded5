// The experiment loader and validator (`specctl validate`), and for a file
// that passes, the plan (`specctl plan`, `plan --json`): every launch command
// rendered through its template.

#include "fuzz_support.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/experiment/plan.hpp>
#include <specctl/util/diagnostics.hpp>
#include <specctl/util/error.hpp>

#include <cstdlib>

using namespace specctl;

namespace {

constexpr std::string_view k_template_mark = "\n#template\n";

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Templates come from the source tree only, and the ~/.ssh/config of the
  // machine running the fuzzer does not change what an input means: this one does.
  const auto& dir = fuzz::ScratchDir::path();
  ::setenv("HOME", dir.c_str(), 1);
  ::setenv("XDG_CONFIG_HOME", (dir / "config").c_str(), 1);
  fuzz::write_file(dir / "ssh_config", "Host gpu-* !gpu-bad\n  HostName %h.cluster\n  User bench\n  Port 2222\n"
                                       "  IdentityFile ~/.ssh/id_fuzz\n");
  ::setenv("SPECCTL_SSH_CONFIG", (dir / "ssh_config").c_str(), 1);
  ::setenv("USER", "fuzz", 1);
  ::unsetenv("SPECCTL_TEMPLATE_PATH");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > fuzz::k_max_input) {
    return -1;
  }
  static const std::string path = (fuzz::ScratchDir::path() / "experiment.yaml").string();
  static const auto custom = fuzz::ScratchDir::path() / "templates" / "custom.yaml";
  // After a line "#template", the input goes on as a template of its own that
  // the experiment names "custom": odd templates meet the resolver too.
  std::string_view text = fuzz::as_text(data, size);
  std::string_view tmpl;
  if (auto at = text.find(k_template_mark); at != std::string_view::npos) {
    tmpl = text.substr(at + k_template_mark.size());
    text = text.substr(0, at + 1);
  }
  fuzz::write_file(path, text);
  fuzz::write_file(custom, tmpl);
  try {
    util::Diagnostics diag;
    auto experiment = experiment::load_experiment(path, diag);
    for (const auto& d : diag.sorted()) {
      (void)d.str();
    }
    if (diag.has_errors()) {
      return 0;
    }
    for (const auto& [name, host] : experiment.hosts) {
      (void)host.describe();
    }
    for (const auto& benchmark : experiment.benchmarks) {
      (void)benchmark.describe();
      (void)experiment::metrics_of(benchmark);
    }
    for (const auto& variant : experiment.variants) {
      for (const auto& node : experiment::hosts_for(experiment, variant)) {
        (void)experiment::slot_of(experiment, node);
        (void)experiment::machine_of(experiment, node);
      }
    }
    auto plan = experiment::make_plan(experiment, server::RenderOptions{"/usr/local/bin", "0.5.16"});
    (void)experiment::format_plan(plan);
    (void)experiment::plan_to_json(plan).dump(2);
    for (const auto& planned : plan.variants) {
      (void)planned.launch.shell_line();
    }
  } catch (const Error&) {
    // specctl's one error type is a clean refusal; anything else escapes and is a finding.
  }
  return 0;
}
