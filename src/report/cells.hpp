#pragma once

// How a figure reads in a cell of the report, so it reads the same in
// Markdown, HTML, JUnit and the terminal.

#include <specctl/report/report.hpp>

#include <optional>
#include <string>

namespace specctl::report::detail {

// "c10" for a concurrency level, "2/s" for a request rate.
std::string level_label(bool rate, double level);
// "923.2", or "-" when not measured.
std::string fixed(std::optional<double> value, int decimals);
// "1.04×", or "-".
std::string times(std::optional<double> ratio);
// "[1.01, 1.07]", or "-" without an interval.
std::string interval(const std::optional<Ratio>& ratio);
// "faster up to c5, inconclusive at c10, slower from c30 (1.00× at ≈18)",
// "faster at all levels", "one sample per level: no verdict", or "-".
std::string crossover_text(const LevelsTable& table, const Crossover& crossover);
// "faster", "one sample", "inconclusive: within the A/A noise (±3.1%)",
// "not measured: 18 of 20 requests failed (90%, more than 5%)".
std::string verdict_text(Verdict verdict, const std::string& why);
// "1234.5 ± 12.3" with 2+ samples, "1234.5" with one, "-" with none.
std::string spread_text(const std::optional<Spread>& spread, int decimals = 1);
// " (2 of 30 failed)" when a request failed, else "".
std::string failed_text(const Counts& counts);
// "1.17× [1.10, 1.24]", "0.98×", or "-".
std::string ratio_text(const std::optional<Ratio>& ratio);
// Where a table's figures came from and how many samples each has, one line.
std::string sources_text(const SingleStreamTable& table);
std::string sources_text(const LevelsTable& table);
// The terms the report uses, defined: (term, definition).
const std::vector<std::pair<std::string, std::string>>& glossary();
// "passed: 3/3 variants ok, 2/2 expectations reproduced" or "FAILED: ...".
std::string verdict_line(const Report& report);
// "+1.2%", or "-".
std::string percent(std::optional<double> value);

// The cells the terminal table shares with report.md, so the two cannot disagree.
// A single-stream row's tok/s: "150.0", or "-" when not measured.
std::string tok_s_cell(const SingleStreamRow& row);
// A level's tok/s: "600.0 ± 2.0 (2 of 48 failed)".
std::string tok_s_cell(const LevelFigures& level);
// A benchmark's SLO: "ttft_p99_ms ≤ 2000, e2e_p99_ms ≤ 1500".
std::string slo_text(const Slo& slo);
// A level's goodput: "1.93" when it met the SLO, "0.41 (missed)" when not, "-" without one.
std::string goodput_cell(const LevelFigures& level);
// "highest rate meeting the SLO: 3.5 req/s (missed at 4.25)", "... at least 4 req/s
// (none measured missed)", "no rate met the SLO (missed at 1 req/s)".
std::string search_text(const SloSearchFigures& search);
// A command benchmark's metric: "0.4312", or "-".
std::string metric_cell(std::optional<double> value);

// The per-category tables, in report.md and report.html alike.
// A figure of a category: "2.87", or "—" when not reported.
std::string category_figure(std::optional<double> value, int decimals);
// A variant's cell: "2.87 · 93.1" (accept length · tok/s per request), "— · 85.0"
// without an accept length, "—" without figures, and " (1 of 11 failed)" when requests failed.
std::string category_cell(const std::optional<CategoryFigures>& figures);
// What a table is about: "single-stream", "parallel at c10".
std::string category_title(const CategoryTable& table);
// The line under a table: what its figures are, over how many repeats, and
// where accept length came from per variant.
std::string category_note(const CategoryTable& table);

// GPU telemetry (energy_cells.cpp), in every format alike.
// Whether some row of a table was sampled: only then does a format give it tok/J.
bool has_energy(const SingleStreamTable& table);
bool has_energy(const LevelsTable& table);
// "0.51 ± 0.01" (over repeats), "0.45", or "-"; " (throttled)" after it when a
// repeat's GPUs throttled for more than 5% of it.
std::string tok_per_j_cell(const EnergyFigures& energy);
// Verdicts on tok/J, where more is better: "better" and "worse" for faster and
// slower, verdict_name's words for the rest.
std::string_view energy_verdict_name(Verdict verdict);
// As verdict_text, in energy_verdict_name's words.
std::string energy_verdict_text(Verdict verdict, const std::string& why);
// tok/J against the baseline's: "1.24× [1.07, 1.42] better", "1.33× one sample",
// "baseline", or "-" without telemetry.
std::string tok_per_j_ratio_cell(const EnergyFigures& energy);
// The GPUs' summed mean power: "574", or "-".
std::string power_cell(const EnergyFigures& energy);
// "throttled: sw_power_cap 12% of the level — its figures may measure the
// cooling, not the configuration".
std::string throttle_text(const ThrottledRepeat& throttled);
// Where a throttled repeat was, in a table of levels: "c8", "c8, repeat 2".
std::string throttle_where(const LevelsTable& table, std::size_t level, const ThrottledRepeat& throttled);
// "peak memory while loading: 120000 / 143771 MiB (83%)"; with several GPUs
// "peak memory while loading: GPU 0 120000 / 143771 MiB (83%), GPU 1 ...".
std::string load_memory_text(const LoadMemory& load);
// A variant's telemetry in one line: its load memory and where its energy came
// from ("energy from the GPUs' energy counter"); "nothing sampled" without either.
std::string telemetry_summary(const VariantTelemetry& telemetry);
// The line under a table with tok/J: what it is and what "(throttled)" means.
std::string energy_note(int repeats);
// The terms of GPU telemetry, added to the glossary where the report has telemetry.
const std::vector<std::pair<std::string, std::string>>& telemetry_glossary();

// A CSV field, quoted as RFC 4180 says when it holds a comma, quote or newline.
std::string csv_field(const std::string& value);
// Text for XML content and attributes; control characters XML 1.0 forbids become '?'.
std::string xml_escape(std::string_view text);

// The status of the variant `name` in the report ("ok", "failed", ...); "" when absent.
inline std::string status_text(const Report& report, const std::string& name) {
  const VariantRow* v = report.find_variant(name);
  return v != nullptr ? std::string(status_name(v->status)) : "";
}

} // namespace specctl::report::detail
