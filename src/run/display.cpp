#include <specctl/run/display.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <mutex>
#include <sys/ioctl.h>
#include <unistd.h>

namespace specctl::run {

namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::system_clock::time_point;

// The live block redraws at most this often, except on phase changes, messages
// and finished variants, so that a fast benchmark does not flood the terminal.
constexpr auto k_redraw_interval = 100ms;
// Plain lines: a benchmark line per variant at most this often, a load line per 10%.
constexpr auto k_plain_bench_interval = 10s;
constexpr int k_plain_load_step_percent = 10;
constexpr int k_bar_width = 20;
// When the width of the terminal is unknown (a forced TTY on a file).
constexpr std::size_t k_fallback_columns = 100;
constexpr std::size_t k_min_figure_width = 6;
constexpr std::size_t k_status_width = 6;
constexpr std::size_t k_load_width = 6;

struct Slot {
  std::string variant;
  int index = 0;
  int total = 0;
  std::string phase;
  TimePoint started;
  TimePoint phase_started;
  std::optional<double> load_percent;
  std::optional<std::chrono::seconds> load_eta;
  std::optional<bench::Progress> bench;
  // Plain mode: the last 10% step printed, and when the last benchmark line was.
  int last_load_step = -1;
  std::optional<TimePoint> last_bench_line;
};

std::chrono::seconds whole_seconds(std::chrono::system_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d);
}

std::string timestamp(TimePoint t) {
  return fmt::format("[{:%H:%M:%S}]", fmt::localtime(std::chrono::system_clock::to_time_t(t)));
}

std::string clock_time(TimePoint t) {
  return fmt::format("{:%H:%M}", fmt::localtime(std::chrono::system_clock::to_time_t(t)));
}

// Estimates are rough: whole minutes, at least one.
std::string rough_duration(std::chrono::seconds d) {
  auto minutes = std::max<std::int64_t>(1, (d.count() + 30) / 60);
  if (minutes < 60) {
    return fmt::format("{}m", minutes);
  }
  return fmt::format("{}h{:02}m", minutes / 60, minutes % 60);
}

std::string load_time(double seconds) {
  if (seconds < 60) {
    return fmt::format("{:.1f}s", seconds);
  }
  return short_duration(std::chrono::seconds(std::llround(seconds)));
}

std::string first_line(std::string_view text) {
  return std::string(text.substr(0, text.find('\n')));
}

std::string plural(std::int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

std::string rtrim(std::string s) {
  s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

// Cuts a line to `columns` characters, counting UTF-8 sequences as one.
std::string truncate_columns(std::string s, std::size_t columns) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    // The byte that starts the character after the last column (not 10xxxxxx) cuts the line.
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && count++ == columns) {
      s.resize(i);
      break;
    }
  }
  return s;
}

std::string bench_text(const bench::Progress& p) {
  // An open loop's total is an estimate, and may be unknown at first.
  // Completed requests only: a failed request is not progress.
  std::string requests =
      p.total > 0 ? fmt::format("{}/{} requests ok", p.completed(), p.total) : plural(p.completed(), "request") + " ok";
  return fmt::format("{}, {} failed, {:.1f} tok/s", requests, p.failed, p.tok_s);
}

std::string_view severity_prefix(Severity severity) {
  switch (severity) {
  case Severity::warning:
    return "warning: ";
  case Severity::error:
    return "error: ";
  case Severity::info:
    break;
  }
  return "";
}

// State and formatting shared by both displays. Every public call takes the
// lock, updates the variants in flight and hands over to the display's hook.
class DisplayBase : public Display {
public:
  DisplayBase(std::FILE* out, Verbosity verbosity, Clock clock)
      : m_out(out), m_verbosity(verbosity), m_clock(std::move(clock)) {
    if (!m_clock) {
      m_clock = [] { return std::chrono::system_clock::now(); };
    }
  }

  void run_started(const RunHeader& header) override {
    std::lock_guard lock(m_mutex);
    m_header = header;
    m_run_start = m_clock();
    if (!quiet()) {
      on_message(fmt::format("{} {}\n", timestamp(m_clock()), header_text()));
    }
  }

  void phase(std::string_view variant, int index, int total, std::string_view phase) override {
    std::lock_guard lock(m_mutex);
    Slot& s = slot(variant);
    s.index = index;
    s.total = total;
    s.phase = std::string(phase);
    s.phase_started = m_clock();
    s.load_percent.reset();
    s.load_eta.reset();
    s.bench.reset();
    s.last_load_step = -1;
    s.last_bench_line.reset();
    on_phase(s);
  }

  void load_progress(std::string_view variant, double percent, std::optional<std::chrono::seconds> eta) override {
    std::lock_guard lock(m_mutex);
    Slot& s = slot(variant);
    s.load_percent = std::isfinite(percent) ? std::clamp(percent, 0.0, 100.0) : 0.0;
    s.load_eta = eta;
    on_load(s);
  }

  void bench_progress(std::string_view variant, const bench::Progress& progress) override {
    std::lock_guard lock(m_mutex);
    Slot& s = slot(variant);
    s.bench = progress;
    on_bench(s);
  }

  void message(std::string_view variant, Severity severity, std::string_view text) override {
    std::lock_guard lock(m_mutex);
    if (!shows(severity)) {
      return;
    }
    std::string who = variant.empty() ? std::string() : label(variant) + ": ";
    on_message(fmt::format("{} {}{}{}\n", timestamp(m_clock()), who, severity_prefix(severity), text));
  }

  void variant_finished(const FinishedRow& row) override {
    std::lock_guard lock(m_mutex);
    TimePoint now = m_clock();
    std::string who = label(row.variant);
    std::optional<std::chrono::seconds> took;
    auto it = find(row.variant);
    if (it != m_slots.end()) {
      took = whole_seconds(now - it->started);
      m_finished_time += *took;
      ++m_timed_finishes;
      m_slots.erase(it);
    }
    ++m_finished;
    on_finished(row, who, took);
  }

  void run_finished(std::string_view summary) override {
    std::lock_guard lock(m_mutex);
    std::string text(summary);
    if (!text.empty() && text.back() != '\n') {
      text += '\n';
    }
    on_run_finished(text);
  }

protected:
  virtual void on_phase(Slot& s) = 0;
  virtual void on_load(Slot& s) = 0;
  virtual void on_bench(Slot& s) = 0;
  // Prints whole lines: a message, the run's header.
  virtual void on_message(const std::string& lines) = 0;
  virtual void on_finished(const FinishedRow& row, const std::string& who,
                           std::optional<std::chrono::seconds> took) = 0;
  virtual void on_run_finished(const std::string& summary) = 0;

  bool quiet() const { return m_verbosity == Verbosity::quiet; }

  bool shows(Severity severity) const {
    switch (m_verbosity) {
    case Verbosity::quiet:
      return severity == Severity::error;
    case Verbosity::normal:
      return severity != Severity::info;
    case Verbosity::verbose:
      break;
    }
    return true;
  }

  void write(const std::string& text) {
    if (!text.empty()) {
      std::fwrite(text.data(), 1, text.size(), m_out);
      std::fflush(m_out);
    }
  }

  std::vector<Slot>::iterator find(std::string_view variant) {
    return std::find_if(m_slots.begin(), m_slots.end(), [&](const Slot& s) { return s.variant == variant; });
  }

  Slot& slot(std::string_view variant) {
    auto it = find(variant);
    if (it != m_slots.end()) {
      return *it;
    }
    Slot& s = m_slots.emplace_back();
    s.variant = std::string(variant);
    s.started = m_clock();
    s.phase_started = s.started;
    return s;
  }

  static std::string position(const Slot& s) {
    if (s.index <= 0 || s.total <= 0) {
      return {};
    }
    // Padded to the width of the total so that lines of [9/12] and [10/12] align.
    return fmt::format("[{:>{}}/{}]", s.index, fmt::formatted_size("{}", s.total), s.total);
  }

  // "[1/3] baseline", or just the name of a variant not in flight.
  std::string label(std::string_view variant) {
    auto it = find(variant);
    if (it == m_slots.end() || position(*it).empty()) {
      return std::string(variant);
    }
    return fmt::format("{} {}", position(*it), variant);
  }

  // "eagle3-sweep: 3 variants, results in DIR, estimated 45m (until about 20:46)"
  std::string header_text() const {
    std::string text = fmt::format("{}: {}, results in {}", m_header->experiment, plural(m_header->variants, "variant"),
                                   m_header->out_dir);
    if (m_header->estimate) {
      text += fmt::format(", estimated {} (until about {})", rough_duration(*m_header->estimate),
                          clock_time(m_run_start + *m_header->estimate));
    }
    for (const auto& line : m_header->plan) {
      text += "\n  " + line;
    }
    return text;
  }

  // Time left in the run. The header's estimate comes from earlier runs'
  // recorded load times and cannot see this run's benchmarks, so once a
  // variant has finished its measured duration is the better guide: the
  // average times the variants not started, plus what the ones in flight
  // still need at that average, divided among the variants running at once
  // (one per host).
  std::optional<std::chrono::seconds> remaining(TimePoint now) const {
    if (!m_header || m_finished >= m_header->variants) {
      return std::nullopt;
    }
    if (m_timed_finishes > 0) {
      double average = static_cast<double>(m_finished_time.count()) / m_timed_finishes;
      auto in_flight = static_cast<int>(m_slots.size());
      int not_started = std::max(0, m_header->variants - m_finished - in_flight);
      double work = average * not_started;
      for (const Slot& s : m_slots) {
        work += std::max(0.0, average - static_cast<double>(whole_seconds(now - s.started).count()));
      }
      return std::chrono::seconds(std::llround(work / std::max(1, in_flight)));
    }
    if (m_header->estimate) {
      auto left = *m_header->estimate - whole_seconds(now - m_run_start);
      if (left > 0s) {
        return left;
      }
    }
    return std::nullopt;
  }

  std::FILE* m_out;
  Verbosity m_verbosity;
  Clock m_clock;
  std::mutex m_mutex;
  std::optional<RunHeader> m_header;
  TimePoint m_run_start;
  // Variants in flight, in the order they started.
  std::vector<Slot> m_slots;
  int m_finished = 0;
  // Finished variants whose start the display saw, and their total duration.
  int m_timed_finishes = 0;
  std::chrono::seconds m_finished_time{0};
};

// Not a terminal: one timestamped line per event, thinned so that an overnight
// log stays readable.
class PlainDisplay final : public DisplayBase {
public:
  using DisplayBase::DisplayBase;

private:
  std::string line(const Slot& s, std::string_view text) {
    return fmt::format("{} {}: {}\n", timestamp(m_clock()), label(s.variant), text);
  }

  void on_phase(Slot& s) override {
    if (!quiet()) {
      write(line(s, s.phase));
    }
  }

  void on_load(Slot& s) override {
    int step = static_cast<int>(*s.load_percent) / k_plain_load_step_percent;
    if (quiet() || step == s.last_load_step) {
      return;
    }
    s.last_load_step = step;
    std::string eta = s.load_eta ? fmt::format(" (ETA {})", short_duration(*s.load_eta)) : std::string();
    write(line(s, fmt::format("{} {}%{}", s.phase.empty() ? "load" : s.phase, static_cast<int>(*s.load_percent), eta)));
  }

  void on_bench(Slot& s) override {
    TimePoint now = m_clock();
    const bench::Progress& p = *s.bench;
    if (quiet() || (!p.finished && s.last_bench_line && now - *s.last_bench_line < k_plain_bench_interval)) {
      return;
    }
    s.last_bench_line = now;
    write(line(s, p.finished ? fmt::format("{} done: {} in {:.1f}s", p.phase, bench_text(p), p.elapsed_s)
                             : fmt::format("{} {}", p.phase, bench_text(p))));
  }

  void on_message(const std::string& text) override { write(text); }

  void on_finished(const FinishedRow& row, const std::string& who, std::optional<std::chrono::seconds> took) override {
    std::string text = fmt::format("{} {}: ", timestamp(m_clock()), who);
    if (row.ok) {
      text += took ? fmt::format("ok in {}", short_duration(*took)) : std::string("ok");
      if (row.load_s) {
        text += fmt::format(", load {}", load_time(*row.load_s));
      }
      for (const auto& [column, value] : row.figures) {
        text += fmt::format(", {} {}", column, value);
      }
    } else {
      text += took ? fmt::format("FAILED after {}: ", short_duration(*took)) : std::string("FAILED: ");
      text += first_line(row.reason);
    }
    write(text + "\n");
  }

  void on_run_finished(const std::string& summary) override { write(summary); }
};

// A terminal: a live block at the bottom, one line per variant in flight and a
// footer, redrawn in place; everything else is printed above it, so the table
// of finished variants grows on screen while the block stays last.
class TtyDisplay final : public DisplayBase {
public:
  using DisplayBase::DisplayBase;

private:
  bool live() const { return !quiet() && !m_closed; }

  std::size_t columns() const {
    winsize ws{};
    if (::ioctl(::fileno(m_out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
      return ws.ws_col;
    }
    return k_fallback_columns;
  }

  // Moves up over the block and clears it line by line.
  std::string clear_block() {
    std::string text;
    for (int i = 0; i < m_drawn; ++i) {
      text += "\x1b[1A\x1b[2K";
    }
    m_drawn = 0;
    return text;
  }

  std::string slot_detail(const Slot& s, TimePoint now) const {
    if (s.load_percent) {
      int filled = static_cast<int>(*s.load_percent * k_bar_width / 100);
      std::string bar(static_cast<std::size_t>(std::clamp(filled, 0, k_bar_width)), '#');
      bar.resize(k_bar_width, '.');
      std::string eta = s.load_eta ? fmt::format(" ETA {}", short_duration(*s.load_eta)) : std::string();
      // Rounded down, so that 100% means loaded.
      return fmt::format("[{}] {:3}%{}", bar, static_cast<int>(*s.load_percent), eta);
    }
    if (s.bench) {
      const bench::Progress& p = *s.bench;
      // "bench single-stream" already names the level; "bench concurrency" does not say which.
      bool named = !p.phase.empty() && std::string_view(s.phase).ends_with(p.phase);
      return named ? bench_text(p) : fmt::format("{}: {}", p.phase, bench_text(p));
    }
    return fmt::format("({})", short_duration(whole_seconds(now - s.phase_started)));
  }

  std::string block(TimePoint now) {
    if (!live() || (m_slots.empty() && !m_header)) {
      return {};
    }
    std::vector<const Slot*> slots;
    std::size_t position_width = 0;
    std::size_t name_width = 0;
    std::size_t phase_width = 0;
    for (const Slot& s : m_slots) {
      slots.push_back(&s);
      position_width = std::max(position_width, position(s).size());
      name_width = std::max(name_width, s.variant.size());
      phase_width = std::max(phase_width, s.phase.size());
    }
    std::stable_sort(slots.begin(), slots.end(), [](const Slot* a, const Slot* b) { return a->index < b->index; });
    std::size_t width = columns() - 1;
    std::string text;
    for (const Slot* s : slots) {
      std::string row = fmt::format("{:<{}} {:<{}}  {:<{}}  {}", position(*s), position_width, s->variant, name_width,
                                    s->phase, phase_width, slot_detail(*s, now));
      text += truncate_columns(rtrim(position_width == 0 ? row.substr(1) : row), width) + "\n";
      ++m_drawn;
    }
    if (m_header) {
      std::string footer = fmt::format("elapsed {}, {} of {} done", short_duration(whole_seconds(now - m_run_start)),
                                       m_finished, m_header->variants);
      if (auto left = remaining(now)) {
        footer += fmt::format(", about {} left", rough_duration(*left));
      }
      text += truncate_columns(footer, width) + "\n";
      ++m_drawn;
    }
    return text;
  }

  // Prints `text` above the block: clear, print, redraw, in one write.
  void print_above(const std::string& text, TimePoint now) {
    std::string out = clear_block();
    out += text;
    out += block(now);
    m_last_draw = now;
    write(out);
  }

  void redraw(bool force) {
    TimePoint now = m_clock();
    if (live() && (force || !m_last_draw || now - *m_last_draw >= k_redraw_interval)) {
      print_above({}, now);
    }
  }

  void on_phase(Slot&) override { redraw(true); }
  void on_load(Slot&) override { redraw(false); }
  void on_bench(Slot& s) override { redraw(s.bench->finished); }
  void on_message(const std::string& text) override { print_above(text, m_clock()); }

  std::size_t name_width() const {
    std::size_t width = std::string_view("variant").size();
    if (m_header) {
      for (const auto& name : m_header->variant_names) {
        width = std::max(width, name.size());
      }
    }
    for (const Slot& s : m_slots) {
      width = std::max(width, s.variant.size());
    }
    return width;
  }

  // A header row before the first finished variant, and again when a row
  // brings a figure the table has no column for yet.
  std::string table_header_if_needed(const FinishedRow& row) {
    bool new_column = false;
    for (const auto& [column, value] : row.figures) {
      auto it = std::find_if(m_columns.begin(), m_columns.end(), [&](const auto& c) { return c.first == column; });
      if (it == m_columns.end()) {
        m_columns.emplace_back(column, std::max({column.size(), value.size(), k_min_figure_width}));
        new_column = true;
      }
    }
    if (m_table_started && !new_column) {
      return {};
    }
    if (!m_table_started) {
      m_name_width = std::max(name_width(), row.variant.size());
      m_table_started = true;
    }
    std::string text =
        fmt::format("{:<{}}  {:<{}}  {:>{}}", "variant", m_name_width, "status", k_status_width, "load", k_load_width);
    for (const auto& [column, width] : m_columns) {
      text += fmt::format("  {:>{}}", column, width);
    }
    return rtrim(text) + "\n";
  }

  void on_finished(const FinishedRow& row, const std::string&, std::optional<std::chrono::seconds>) override {
    std::string text = table_header_if_needed(row);
    std::string load = row.load_s ? load_time(*row.load_s) : std::string("-");
    std::string line = fmt::format("{:<{}}  {:<{}}  {:>{}}", row.variant, m_name_width, row.ok ? "ok" : "FAILED",
                                   k_status_width, load, k_load_width);
    if (row.ok) {
      for (const auto& [column, width] : m_columns) {
        auto it =
            std::find_if(row.figures.begin(), row.figures.end(), [&](const auto& f) { return f.first == column; });
        line += fmt::format("  {:>{}}", it == row.figures.end() ? std::string("-") : it->second, width);
      }
    } else {
      line += "  " + first_line(row.reason);
    }
    print_above(text + rtrim(line) + "\n", m_clock());
  }

  void on_run_finished(const std::string& summary) override {
    std::string out = clear_block();
    m_closed = true;
    write(out + summary);
  }

  int m_drawn = 0;
  std::optional<TimePoint> m_last_draw;
  bool m_closed = false;
  bool m_table_started = false;
  std::size_t m_name_width = 0;
  std::vector<std::pair<std::string, std::size_t>> m_columns;
};

class DisplayReporter final : public util::Reporter {
public:
  DisplayReporter(Display& display, std::string variant) : m_display(display), m_variant(std::move(variant)) {}

  void info(std::string_view message) override { m_display.message(m_variant, Severity::info, message); }
  void warning(std::string_view message) override { m_display.message(m_variant, Severity::warning, message); }
  void progress(std::string_view, double percent, std::optional<std::chrono::seconds> eta) override {
    m_display.load_progress(m_variant, percent, eta);
  }

private:
  Display& m_display;
  std::string m_variant;
};

} // namespace

std::unique_ptr<util::Reporter> Display::reporter_for(std::string variant) {
  return std::make_unique<DisplayReporter>(*this, std::move(variant));
}

std::unique_ptr<Display> make_display(std::FILE* out, Verbosity verbosity, std::optional<bool> force_tty, Clock clock) {
  bool tty = force_tty.value_or(::isatty(::fileno(out)) != 0);
  if (tty) {
    return std::make_unique<TtyDisplay>(out, verbosity, std::move(clock));
  }
  return std::make_unique<PlainDisplay>(out, verbosity, std::move(clock));
}

std::string short_duration(std::chrono::seconds d) {
  auto s = std::max<std::int64_t>(0, d.count());
  if (s < 60) {
    return fmt::format("{}s", s);
  }
  if (s < 3600) {
    return fmt::format("{}m{:02}s", s / 60, s % 60);
  }
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

} // namespace specctl::run
