#include <specctl/sim/faults.hpp>
#include <specctl/util/duration.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <numeric>

namespace specctl::sim {
namespace {

enum class ArgKind { none, fraction, count, duration, range };

struct FaultInfo {
  FaultKind kind;
  std::string_view name;
  ArgKind arg;
  double default_fraction;
};

// Defaults: load faults strike halfway (OOM late, when the KV cache is
// allocated); per-event faults hit some events, per-stream faults every stream.
constexpr std::array k_faults{
    FaultInfo{FaultKind::crash_load, "crash-load", ArgKind::fraction, 0.5},
    FaultInfo{FaultKind::oom, "oom", ArgKind::fraction, 0.9},
    FaultInfo{FaultKind::hang, "hang", ArgKind::fraction, 0.5},
    FaultInfo{FaultKind::port_in_use, "port-in-use", ArgKind::none, 0.0},
    FaultInfo{FaultKind::die_after, "die-after", ArgKind::count, 0.0},
    FaultInfo{FaultKind::garbled, "garbled", ArgKind::fraction, 0.1},
    FaultInfo{FaultKind::cut_stream, "cut-stream", ArgKind::fraction, 1.0},
    FaultInfo{FaultKind::slow_first_token, "slow-first-token", ArgKind::duration, 0.0},
    FaultInfo{FaultKind::http_500, "http-500", ArgKind::fraction, 0.5},
    FaultInfo{FaultKind::orphan_workers, "orphan-workers", ArgKind::none, 0.0},
    FaultInfo{FaultKind::ignore_sigterm, "ignore-sigterm", ArgKind::none, 0.0},
    FaultInfo{FaultKind::power_cap, "power-cap", ArgKind::range, 0.0},
};

constexpr std::chrono::milliseconds k_default_first_token_delay{5000};

std::string known_kinds() {
  std::string out;
  for (const auto& info : k_faults) {
    out += out.empty() ? "" : ", ";
    out += info.name;
  }
  return out;
}

std::string suggestion(std::string_view kind) {
  const FaultInfo* best = nullptr;
  std::size_t best_distance = 3;
  for (const auto& info : k_faults) {
    const auto distance = edit_distance(kind, info.name);
    if (distance < best_distance) {
      best_distance = distance;
      best = &info;
    }
  }
  return best ? fmt::format(" (did you mean \"{}\"?)", best->name) : std::string{};
}

} // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string_view fault_name(FaultKind kind) {
  for (const auto& info : k_faults) {
    if (info.kind == kind) {
      return info.name;
    }
  }
  return "?";
}

std::expected<Fault, std::string> parse_fault(std::string_view spec) {
  const auto colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  const bool has_arg = colon != std::string_view::npos;
  const std::string_view arg = has_arg ? spec.substr(colon + 1) : std::string_view{};

  const auto it = std::ranges::find(k_faults, kind, &FaultInfo::name);
  if (it == k_faults.end()) {
    return std::unexpected(
        fmt::format("unknown fault \"{}\"{}; known faults: {}", kind, suggestion(kind), known_kinds()));
  }
  Fault fault{.kind = it->kind, .fraction = it->default_fraction};
  switch (it->arg) {
  case ArgKind::none:
    if (has_arg) {
      return std::unexpected(fmt::format("fault \"{}\" takes no argument, got \"{}\"", kind, arg));
    }
    break;
  case ArgKind::fraction:
    if (has_arg) {
      double value = 0.0;
      const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), value);
      if (ec != std::errc{} || end != arg.data() + arg.size() || !std::isfinite(value) || value < 0.0 || value > 1.0) {
        return std::unexpected(fmt::format("fault \"{}\": expected a fraction between 0 and 1, got \"{}\"", kind, arg));
      }
      fault.fraction = value;
    }
    break;
  case ArgKind::count: {
    int value = -1;
    const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), value);
    if (!has_arg || ec != std::errc{} || end != arg.data() + arg.size() || value < 0) {
      return std::unexpected(
          fmt::format("fault \"{}\": expected a request count, e.g. \"{}:10\", got \"{}\"", kind, kind, arg));
    }
    fault.count = value;
    break;
  }
  case ArgKind::range: {
    const auto dash = arg.find('-');
    int from = 0;
    int until = 0;
    const auto a = dash == std::string_view::npos ? arg : arg.substr(0, dash);
    const auto b = dash == std::string_view::npos ? std::string_view{} : arg.substr(dash + 1);
    const auto [end_a, ec_a] = std::from_chars(a.data(), a.data() + a.size(), from);
    const auto [end_b, ec_b] = std::from_chars(b.data(), b.data() + b.size(), until);
    if (!has_arg || dash == std::string_view::npos || ec_a != std::errc{} || end_a != a.data() + a.size() ||
        ec_b != std::errc{} || end_b != b.data() + b.size() || from < 1 || until < from) {
      return std::unexpected(fmt::format(
          "fault \"{}\": expected requests FIRST-LAST (1 or more, FIRST <= LAST), e.g. \"{}:10-20\", got \"{}\"", kind,
          kind, arg));
    }
    fault.count = from;
    fault.until = until;
    break;
  }
  case ArgKind::duration:
    fault.delay = k_default_first_token_delay;
    if (has_arg) {
      auto delay = util::parse_duration(arg);
      if (!delay) {
        return std::unexpected(fmt::format("fault \"{}\": {}", kind, delay.error()));
      }
      fault.delay = *delay;
    }
    break;
  }
  return fault;
}

const Fault* FaultSet::find(FaultKind kind) const {
  const auto it = std::find_if(m_faults.rbegin(), m_faults.rend(), [kind](const Fault& f) { return f.kind == kind; });
  return it == m_faults.rend() ? nullptr : &*it;
}

bool FractionPicker::next() {
  // The tiny slack keeps 0.1 * 10 from landing just under 1 in binary.
  constexpr double k_slack = 1e-9;
  m_accumulated += m_fraction;
  if (m_accumulated >= 1.0 - k_slack) {
    m_accumulated -= 1.0;
    return true;
  }
  return false;
}

} // namespace specctl::sim
