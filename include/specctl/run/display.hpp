#pragma once

#include <specctl/bench/bench.hpp>
#include <specctl/util/reporter.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specctl::run {

// --quiet shows only errors, finished variants and the final table; --verbose
// adds every informational message to what a normal run shows.
enum class Verbosity { quiet, normal, verbose };

// Severity of a message; util::Severity has no `info`, which the display needs
// for --verbose.
enum class Severity { info, warning, error };

struct RunHeader {
  std::string experiment;
  int variants = 0;
  std::string out_dir;
  // From earlier runs' recorded durations, when the results history has them.
  std::optional<std::chrono::seconds> estimate;
  // The variants' names, when known, so that the table of finished variants can
  // size its first column before the first row; names not listed still fit, later
  // rows just stick out.
  std::vector<std::string> variant_names;
  // The plan in a few lines (variants and hosts, benchmarks, the time bound), printed under the header.
  std::vector<std::string> plan;
};

// One finished variant, a row of the table of finished variants.
struct FinishedRow {
  std::string variant;
  bool ok = true;
  // Why it failed; empty when ok. Only its first line is shown.
  std::string reason;
  std::optional<double> load_s;
  // Column -> formatted value, in column order: {"1-stream tok/s", "92.6"}, {"accept", "1.97"}.
  std::vector<std::pair<std::string, std::string>> figures;
};

using Clock = std::function<std::chrono::system_clock::time_point()>;

// What `specctl run` shows while it runs. On a terminal a live block at the bottom
// (one line per variant in flight and a footer with elapsed and remaining time),
// redrawn in place, with messages and finished variants printed above it; otherwise
// plain timestamped lines, for CI logs and nohup.
//
// Thread-safe: several variants may be in flight at once (one per host). A
// variant is in flight from its first phase() until its variant_finished().
class Display {
public:
  Display() = default;
  Display(const Display&) = delete;
  Display& operator=(const Display&) = delete;
  virtual ~Display() = default;

  virtual void run_started(const RunHeader& header) = 0;
  // `phase`: "cleanup", "launch", "load", "warmup", "bench single-stream", "teardown", ...;
  // `index` is the variant's 1-based position of `total`.
  virtual void phase(std::string_view variant, int index, int total, std::string_view phase) = 0;
  virtual void load_progress(std::string_view variant, double percent, std::optional<std::chrono::seconds> eta) = 0;
  virtual void bench_progress(std::string_view variant, const bench::Progress& progress) = 0;
  // `variant` may be empty for messages about the whole run.
  virtual void message(std::string_view variant, Severity severity, std::string_view text) = 0;
  virtual void variant_finished(const FinishedRow& row) = 0;
  // Prints the final table or text verbatim; nothing is drawn after it.
  virtual void run_finished(std::string_view summary) = 0;

  // A util::Reporter for one variant, for the lifecycle functions: info and
  // warning become message(), progress becomes load_progress() (its label is
  // dropped: the display already knows the variant and its phase). The display
  // must outlive it.
  std::unique_ptr<util::Reporter> reporter_for(std::string variant);
};

// `out` is normally stderr; the live display is used when it is a terminal or
// `force_tty` says so. `clock` is the time source for timestamps, throttling and
// estimates (tests inject one); system_clock::now when empty.
std::unique_ptr<Display> make_display(std::FILE* out, Verbosity verbosity, std::optional<bool> force_tty = std::nullopt,
                                      Clock clock = {});

// Compact durations for progress lines, steady in width as they count down:
// "45s", "3m10s", "12m03s", "1h05m".
std::string short_duration(std::chrono::seconds d);

} // namespace specctl::run
