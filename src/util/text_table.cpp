#include <specctl/util/text_table.hpp>

#include <algorithm>

namespace specctl::util {

namespace {

std::string escape_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += '\\';
    }
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

} // namespace

std::size_t text_width(const std::string& text) {
  std::size_t n = 0;
  for (unsigned char c : text) {
    n += (c & 0xC0) != 0x80 ? 1 : 0;
  }
  return n;
}

TextTable::TextTable(std::vector<TableColumn> columns) : m_columns(std::move(columns)) {
  for (auto& c : m_columns) {
    c.header = escape_cell(c.header);
  }
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(m_columns.size());
  for (auto& cell : cells) {
    cell = escape_cell(cell);
  }
  m_rows.push_back(std::move(cells));
}

std::string TextTable::markdown() const {
  std::vector<std::size_t> widths(m_columns.size());
  for (std::size_t i = 0; i < m_columns.size(); ++i) {
    // A right-aligned separator ("---:") needs at least 4 characters, a left one 3.
    widths[i] = std::max(text_width(m_columns[i].header), std::size_t{m_columns[i].align == Align::right ? 4U : 3U});
    for (const auto& row : m_rows) {
      widths[i] = std::max(widths[i], text_width(row[i]));
    }
  }
  auto line = [&](auto cell_of) {
    std::string out = "|";
    for (std::size_t i = 0; i < m_columns.size(); ++i) {
      std::string cell = cell_of(i);
      std::string pad(widths[i] - text_width(cell), ' ');
      out += m_columns[i].align == Align::left ? " " + cell + pad + " |" : " " + pad + cell + " |";
    }
    return out + "\n";
  };
  std::string out = line([&](std::size_t i) { return m_columns[i].header; });
  out += "|";
  for (std::size_t i = 0; i < m_columns.size(); ++i) {
    out += m_columns[i].align == Align::left ? " " + std::string(widths[i], '-') + " |"
                                             : " " + std::string(widths[i] - 1, '-') + ": |";
  }
  out += "\n";
  for (const auto& row : m_rows) {
    out += line([&](std::size_t i) { return row[i]; });
  }
  return out;
}

} // namespace specctl::util
