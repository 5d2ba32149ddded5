// How GPU telemetry reads in a cell of the report, so it reads the same in
// Markdown, HTML, CSV, JUnit and the terminal.

#include "cells.hpp"

#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::report::detail {

bool has_energy(const SingleStreamTable& table) {
  return std::any_of(table.rows.begin(), table.rows.end(), [](const auto& row) { return row.energy.sampled; });
}

bool has_energy(const LevelsTable& table) {
  return std::any_of(table.rows.begin(), table.rows.end(), [](const auto& row) {
    return std::any_of(row.levels.begin(), row.levels.end(), [](const auto& f) { return f.energy.sampled; });
  });
}

std::string tok_per_j_cell(const EnergyFigures& energy) {
  return spread_text(energy.tok_per_j, 2) + (energy.throttled.empty() ? "" : " (throttled)");
}

std::string_view energy_verdict_name(Verdict verdict) {
  switch (verdict) {
  case Verdict::faster:
    return "better";
  case Verdict::slower:
    return "worse";
  default:
    return verdict_name(verdict);
  }
}

std::string energy_verdict_text(Verdict verdict, const std::string& why) {
  std::string text = verdict_text(verdict, why);
  std::string_view plain = verdict_name(verdict);
  if (text.starts_with(plain)) {
    text.replace(0, plain.size(), energy_verdict_name(verdict));
  }
  return text;
}

std::string tok_per_j_ratio_cell(const EnergyFigures& energy) {
  if (!energy.sampled) {
    return "-";
  }
  if (energy.verdict == Verdict::baseline) {
    return std::string(energy_verdict_name(energy.verdict));
  }
  std::string verdict = energy_verdict_text(energy.verdict, energy.why);
  return energy.ratio ? ratio_text(energy.ratio) + " " + verdict : verdict;
}

std::string power_cell(const EnergyFigures& energy) {
  return fixed(energy.power_w, 0);
}

std::string throttle_text(const ThrottledRepeat& throttled) {
  std::vector<std::string> reasons;
  for (const auto& [reason, share] : throttled.reasons) {
    reasons.push_back(fmt::format("{} {:.0f}%", reason, 100.0 * share));
  }
  return fmt::format("throttled: {} of the level — its figures may measure the cooling, not the configuration",
                     util::join(reasons, ", "));
}

std::string throttle_where(const LevelsTable& table, std::size_t level, const ThrottledRepeat& throttled) {
  return table.repeats > 1 ? fmt::format("{}, repeat {}", table.label(level), throttled.repeat) : table.label(level);
}

std::string load_memory_text(const LoadMemory& load) {
  auto one = [&](double peak) {
    if (!load.total_mib || !(*load.total_mib > 0)) {
      return fmt::format("{:.0f} MiB", peak);
    }
    return fmt::format("{:.0f} / {:.0f} MiB ({:.0f}%)", peak, *load.total_mib, 100.0 * peak / *load.total_mib);
  };
  std::vector<std::string> gpus;
  for (std::size_t i = 0; i < load.peak_mib.size(); ++i) {
    gpus.push_back(load.peak_mib.size() == 1 ? one(load.peak_mib[i])
                                             : fmt::format("GPU {} {}", load.gpus.at(i), one(load.peak_mib[i])));
  }
  return "peak memory while loading: " + util::join(gpus, ", ");
}

std::string telemetry_summary(const VariantTelemetry& telemetry) {
  std::vector<std::string> parts;
  if (telemetry.load) {
    parts.push_back(load_memory_text(*telemetry.load));
  }
  if (telemetry.energy_source == "counter") {
    parts.push_back("energy from the GPUs' energy counter");
  } else if (telemetry.energy_source == "integrated power") {
    parts.push_back("energy from power readings integrated over time (no energy counter)");
  } else if (!telemetry.energy_source.empty()) {
    parts.push_back("energy from " + telemetry.energy_source);
  }
  return parts.empty() ? "nothing sampled" : util::join(parts, "; ");
}

std::string energy_note(int repeats) {
  return fmt::format("tok/J: output tokens / the energy all the variant's GPUs used over the level (nvidia-smi){}; "
                     "GPU W: their summed mean power; (throttled): the GPUs held a clock-event reason for more than "
                     "5% of a repeat.",
                     repeats > 1 ? fmt::format(", a sample per repeat ({})", repeats) : "");
}

const std::vector<std::pair<std::string, std::string>>& telemetry_glossary() {
  static const std::vector<std::pair<std::string, std::string>> k_terms = {
      {"tok/J", "output tokens per joule: a level's output tokens / the energy of all the variant's GPUs over its "
                "measured duration (the GPUs' energy counter, or power readings integrated where there is none); "
                "compared with the baseline's by the rule of the speedup, where more is better"},
      {"throttled", "the GPUs held a clock-event reason (power cap, thermal or hardware slowdown) for more than 5% "
                    "of a level: its figures may measure the cooling, not the configuration"},
  };
  return k_terms;
}

} // namespace specctl::report::detail
