#pragma once

#include <chrono>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::sim {

// The failures specsim can stage on request (`--sim-fault KIND[:ARG]`), each
// one a way a real inference server goes wrong that specctl must survive.
enum class FaultKind {
  crash_load,       // traceback while loading, exit 1
  oom,              // torch.OutOfMemoryError while loading, exit 1
  hang,             // loading stops, the log goes quiet, never ready
  port_in_use,      // [Errno 98] when binding after the load, exit 1
  die_after,        // dies halfway through request N+1
  garbled,          // a fraction of stream events carry broken JSON
  cut_stream,       // a fraction of streams end before usage and [DONE]
  slow_first_token, // every request waits this long before its first token
  http_500,         // a fraction of generation requests answer 500
  orphan_workers,   // TP workers detach (setsid) and outlive the server
  ignore_sigterm,   // the server ignores SIGTERM (only SIGKILL stops it)
  power_cap,        // GPUs power-capped from user request A's arrival until B have completed
};

struct Fault {
  FaultKind kind = FaultKind::crash_load;
  // Fraction of the load time (crash-load, oom, hang) or of events/streams/requests.
  double fraction = 0.0;
  // Requests served before dying (die-after); power-cap: from request `count`'s arrival
  // until `until` requests have completed (user generation requests, counted from 1).
  int count = 0;
  int until = 0;
  // Model time before the first token (slow-first-token), divided by --sim-speed.
  std::chrono::milliseconds delay{0};
};

// Parses "crash-load", "crash-load:0.3", "die-after:5", "slow-first-token:10s", ...
// The error names the spec and, for a misspelt kind, suggests the closest one.
std::expected<Fault, std::string> parse_fault(std::string_view spec);

std::string_view fault_name(FaultKind kind);

// The faults of one run, looked up by kind (the last one given wins).
class FaultSet {
public:
  FaultSet() = default;
  explicit FaultSet(std::vector<Fault> faults) : m_faults(std::move(faults)) {}

  const Fault* find(FaultKind kind) const;
  bool has(FaultKind kind) const { return find(kind) != nullptr; }
  const std::vector<Fault>& all() const { return m_faults; }

private:
  std::vector<Fault> m_faults;
};

// Picks a fraction of a sequence of events, spread evenly and exactly:
// of the first n calls, floor(n * fraction) return true (error diffusion), so
// tests can count the faults instead of hoping a random draw hits.
class FractionPicker {
public:
  explicit FractionPicker(double fraction) : m_fraction(fraction) {}
  bool next();

private:
  double m_fraction;
  double m_accumulated = 0.0;
};

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

} // namespace specctl::sim
