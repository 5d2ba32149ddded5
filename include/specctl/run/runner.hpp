#pragma once

// `specctl run`: every variant of an experiment through cleanup, launch,
// readiness, warmup, benchmarks, server metrics and teardown, with a journal
// and per-variant results that survive a kill -9 at any moment.

#include <specctl/experiment/experiment.hpp>
#include <specctl/run/display.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/server/render.hpp>

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace specctl::run {

struct RunOptions {
  // The result folder; created when missing. With `resume` it must hold an earlier run.
  std::filesystem::path out_dir;
  // Only variants whose name matches this glob.
  std::optional<std::string> only;
  // Only these variants, in the experiment's order (`specctl tune`'s trials so far).
  std::optional<std::vector<std::string>> variants;
  // Keep a complete result already in the folder, as --resume does, even on a new
  // run: a trial `specctl tune --from` copied in from an earlier run.
  bool keep_complete = false;
  // Continue the run in out_dir: variants with a complete result are kept, the
  // rest run again; servers the earlier run left behind are stopped first.
  bool resume = false;
  // Resume even though the experiment file changed since.
  bool force = false;
  // Further attempts of a variant after a transient failure (the host was unreachable).
  int retries = 2;
  // Stop the sweep at the first failed variant.
  bool fail_fast = false;
  server::RenderOptions render;
  std::string state_dir = server::k_default_state_dir;
  // Set (by a signal handler) to stop: the running server is torn down, the
  // variant is recorded as interrupted, and run_experiment returns.
  const std::atomic<bool>* stop = nullptr;
  // The signal that set `stop` (SIGINT, SIGTERM, SIGHUP), 0 while none did.
  const std::atomic<int>* stop_signal = nullptr;
  // Where earlier runs of this experiment are (results/<experiment>/), for the time estimate.
  std::optional<std::filesystem::path> history_dir;
  // First retry waits this long, doubling each time.
  util::Duration retry_backoff = std::chrono::seconds{5};
};

// "SIGHUP: the terminal ... closed", "SIGINT (Ctrl-C)": why a run stopped, for its journal.
std::string stop_signal_text(int signal);

struct RunOutcome {
  std::filesystem::path dir;
  std::vector<std::string> variants;
  int ok = 0;
  int failed = 0;
  // Complete results an earlier run left, kept by --resume.
  int kept = 0;
  bool interrupted = false;
  // The signal that interrupted the run, 0 for none.
  int stop_signal = 0;
  // Expectations of the experiment the results did not reproduce.
  int missed_expectations = 0;
  std::string summary;
  // Set when the run's files could not all be written (a full disk): what failed,
  // what it needs, and that the run stopped launching.
  std::optional<std::string> write_error;

  // 0 all ok, 1 failed variants, missed expectations or files not written, 130 interrupted
  // (129 when by SIGHUP: the terminal or SSH session closed).
  int exit_code() const;
};

// Runs the experiment. Throws specctl::Error for what stops a run before it
// starts (an unusable result folder, a resumed run whose experiment changed);
// a failing variant is recorded and the sweep goes on.
RunOutcome run_experiment(const experiment::Experiment& experiment, const RunOptions& options, Display& display);

// results/<experiment>/<YYYYmmdd-HHMMSS>, in local time.
std::filesystem::path default_out_dir(const experiment::Experiment& experiment,
                                      std::chrono::system_clock::time_point now);

} // namespace specctl::run
