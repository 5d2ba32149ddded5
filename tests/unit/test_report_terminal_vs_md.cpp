// The table `specctl run` prints and report.md are two renderings of one
// model: every cell the terminal shows must be, to the letter, the cell
// report.md shows for the same variant and figure. Checked on every result
// folder under tests/data/report/.

#include <specctl/report/report.hpp>

#include <algorithm>
#include <doctest/doctest.h>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace report = specctl::report;

namespace {

const fs::path k_md_data = fs::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "report";

// A Markdown table as written by util::TextTable: a header, a rule, rows.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // The line of text above it ("Output tok/J (mean ± stdev over repeats):"), where a section has several.
  std::string title;

  // The cell of `variant` (first column) under `column`; nullptr when there is none.
  const std::string* cell(const std::string& variant, const std::string& column) const {
    std::size_t at = header.size();
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == column) {
        at = i;
      }
    }
    for (const auto& row : rows) {
      if (at < row.size() && !row.empty() && row[0] == variant) {
        return &row[at];
      }
    }
    return nullptr;
  }
};

std::string trimmed(const std::string& s) {
  auto first = s.find_first_not_of(' ');
  auto last = s.find_last_not_of(' ');
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

// "| a | b\| c |" → {"a", "b\| c"}: a cell's own '|' is escaped.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += "\\|";
      ++i;
    } else if (line[i] == '|') {
      out.push_back(trimmed(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return out;
}

// Every table of a Markdown text, by the "## " section it stands in (the
// first table of a section when it has several, unless `all` says otherwise).
std::map<std::string, std::vector<Table>> tables_of(const std::string& markdown) {
  std::map<std::string, std::vector<Table>> out;
  std::istringstream in(markdown);
  std::string line;
  std::string section;
  std::string title;
  Table* table = nullptr;
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) {
      section = line.substr(3);
      table = nullptr;
    } else if (line.starts_with("|")) {
      if (table == nullptr) {
        out[section].push_back({cells_of(line), {}, title});
        table = &out[section].back();
      } else if (!line.starts_with("| -") && !line.starts_with("| :")) {
        table->rows.push_back(cells_of(line));
      }
    } else {
      table = nullptr;
      if (!line.empty()) {
        title = line;
      }
    }
  }
  return out;
}

std::vector<fs::path> fixtures() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(k_md_data)) {
    if (fs::exists(entry.path() / "run.json")) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The report.md section and column a terminal column stands for, in the section's
// table whose title starts with `title` (its first table when empty).
struct Place {
  std::string section;
  std::string column;
  std::string title;
};

Place place_of(const report::Report& r, const std::string& terminal_column) {
  if (terminal_column == "status" || terminal_column == "load s" || terminal_column == "accept len") {
    return {"Variants", terminal_column, ""};
  }
  for (const auto& t : r.single_stream) {
    if (terminal_column == t.benchmark + " tok/s") {
      return {t.benchmark + " (single stream)", "tok/s", ""};
    }
    if (terminal_column == t.benchmark + " tok/J") {
      return {t.benchmark + " (single stream)", "tok/J", ""};
    }
  }
  for (const auto& t : r.levels) {
    for (std::size_t i = 0; i < t.levels.size(); ++i) {
      if (terminal_column == t.benchmark + " " + t.label(i)) {
        return {t.benchmark + (t.rate ? " (request rate)" : " (concurrency)"), t.label(i), ""};
      }
      if (terminal_column == t.benchmark + " " + t.label(i) + " tok/J") {
        return {t.benchmark + (t.rate ? " (request rate)" : " (concurrency)"), t.label(i), "Output tok/J"};
      }
    }
  }
  for (const auto& t : r.commands) {
    for (const auto& metric : t.metrics) {
      if (terminal_column == t.benchmark + " " + metric) {
        return {t.benchmark + " (command)", metric, ""};
      }
    }
  }
  return {};
}

} // namespace

TEST_CASE("report: the terminal table and report.md are equal cell for cell on every fixture") {
  auto folders = fixtures();
  REQUIRE(folders.size() >= 2);
  for (const auto& folder : folders) {
    CAPTURE(folder.string());
    auto r = report::build_report(report::read_run(folder));
    auto md = tables_of(report::to_markdown(r));
    auto terminal = tables_of(report::to_terminal(r));
    REQUIRE(terminal[""].size() == 1);
    const Table& shown = terminal[""].front();
    REQUIRE(shown.header.size() >= 3);
    CHECK(shown.header[0] == "variant");
    REQUIRE(shown.rows.size() == r.variants.size());
    int compared = 0;
    for (std::size_t c = 1; c < shown.header.size(); ++c) {
      const std::string& column = shown.header[c];
      CAPTURE(column);
      Place place = place_of(r, column);
      REQUIRE_MESSAGE(!place.section.empty(), "a terminal column report.md does not have");
      REQUIRE(md.contains(place.section));
      const auto& tables = md[place.section];
      auto titled =
          std::find_if(tables.begin(), tables.end(), [&](const Table& t) { return t.title.starts_with(place.title); });
      REQUIRE(titled != tables.end());
      const Table& table = place.title.empty() ? tables.front() : *titled;
      for (const auto& row : shown.rows) {
        CAPTURE(row[0]);
        const std::string* in_md = table.cell(row[0], place.column);
        REQUIRE(in_md != nullptr);
        CHECK(row.at(c) == *in_md);
        ++compared;
      }
    }
    // Every variant, and at least the status, load time and one figure of each.
    CHECK(compared >= static_cast<int>(r.variants.size()) * 3);
  }
}

TEST_CASE("report: a finished variant's line shows the cells of its terminal row") {
  for (const auto& folder : fixtures()) {
    CAPTURE(folder.string());
    auto r = report::build_report(report::read_run(folder));
    auto terminal = tables_of(report::to_terminal(r));
    const Table& shown = terminal[""].front();
    for (const auto& v : r.variants) {
      auto figures = report::terminal_figures(r, v.name);
      REQUIRE(figures.size() + 2 == shown.header.size());
      for (const auto& [column, value] : figures) {
        const std::string* cell = shown.cell(v.name, column);
        REQUIRE(cell != nullptr);
        CHECK(*cell == value);
      }
    }
  }
}
