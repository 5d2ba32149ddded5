#pragma once

// A table of text cells rendered as a column-aligned Markdown table, which
// reads as plain text in a terminal too.

#include <string>
#include <vector>

namespace specctl::util {

enum class Align { left, right };

struct TableColumn {
  std::string header;
  Align align = Align::left;
};

class TextTable {
public:
  explicit TextTable(std::vector<TableColumn> columns);

  // Missing cells are empty; extra cells are an error of the caller and dropped.
  void add_row(std::vector<std::string> cells);
  bool empty() const { return m_rows.empty(); }

  // | a   |    b |
  // | --- | ---: |
  // A '|' inside a cell is escaped as "\|"; widths count UTF-8 characters, not bytes.
  std::string markdown() const;

private:
  std::vector<TableColumn> m_columns;
  std::vector<std::vector<std::string>> m_rows;
};

// Display width of UTF-8 text: code points, so "±" and "×" count one.
std::size_t text_width(const std::string& text);

} // namespace specctl::util
