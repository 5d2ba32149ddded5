// The table `specctl run` prints when it ends, and the figures of each
// finished variant's line: a subset of report.md's cells, written by the same
// functions (cells.hpp), so the terminal cannot disagree with report.md
// (tests/unit/test_report_terminal_vs_md.cpp holds them equal).

#include "cells.hpp"

#include <specctl/util/text_table.hpp>

#include <fmt/format.h>
#include <functional>

namespace specctl::report {

namespace {

using detail::fixed;

// One column of the terminal table: its header and its cell for a variant.
struct Column {
  std::string header;
  std::function<std::string(const std::string&)> cell;
};

std::vector<Column> columns(const Report& r) {
  std::vector<Column> out;
  out.push_back({"load s", [&r](const std::string& name) {
                   const VariantRow* v = r.find_variant(name);
                   return fixed(v != nullptr ? v->load_s : std::nullopt, 1);
                 }});
  for (const auto& t : r.single_stream) {
    out.push_back({t.benchmark + " tok/s", [&t](const std::string& name) {
                     for (const auto& row : t.rows) {
                       if (row.variant == name) {
                         return detail::tok_s_cell(row);
                       }
                     }
                     return std::string("-");
                   }});
    if (detail::has_energy(t)) {
      out.push_back({t.benchmark + " tok/J", [&t](const std::string& name) {
                       for (const auto& row : t.rows) {
                         if (row.variant == name) {
                           return detail::tok_per_j_cell(row.energy);
                         }
                       }
                       return std::string("-");
                     }});
    }
  }
  for (const auto& t : r.levels) {
    const bool energy = detail::has_energy(t);
    for (std::size_t i = 0; i < t.levels.size(); ++i) {
      out.push_back({fmt::format("{} {}", t.benchmark, t.label(i)), [&t, i](const std::string& name) {
                       for (const auto& row : t.rows) {
                         if (row.variant == name) {
                           return detail::tok_s_cell(row.levels[i]);
                         }
                       }
                       return std::string("-");
                     }});
      if (energy) {
        out.push_back({fmt::format("{} {} tok/J", t.benchmark, t.label(i)), [&t, i](const std::string& name) {
                         for (const auto& row : t.rows) {
                           if (row.variant == name) {
                             return detail::tok_per_j_cell(row.levels[i].energy);
                           }
                         }
                         return std::string("-");
                       }});
      }
    }
  }
  for (const auto& t : r.commands) {
    for (std::size_t m = 0; m < t.metrics.size(); ++m) {
      out.push_back({t.benchmark + " " + t.metrics[m], [&t, m](const std::string& name) {
                       for (const auto& [variant, values] : t.rows) {
                         if (variant == name) {
                           return detail::metric_cell(values[m]);
                         }
                       }
                       return std::string("-");
                     }});
    }
  }
  if (!r.single_stream.empty() || !r.levels.empty()) {
    out.push_back({"accept len", [&r](const std::string& name) {
                     const VariantRow* v = r.find_variant(name);
                     return fixed(v != nullptr ? v->accept_length : std::nullopt, 2);
                   }});
  }
  return out;
}

} // namespace

std::vector<std::pair<std::string, std::string>> terminal_figures(const Report& report, const std::string& variant) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : columns(report)) {
    out.emplace_back(c.header, c.cell(variant));
  }
  return out;
}

std::string to_terminal(const Report& r) {
  auto cols = columns(r);
  std::vector<util::TableColumn> headers = {{"variant"}, {"status"}};
  for (const auto& c : cols) {
    headers.push_back({c.header, util::Align::right});
  }
  util::TextTable table(std::move(headers));
  std::vector<std::string> lines;
  for (const auto& v : r.variants) {
    std::vector<std::string> row = {v.name, std::string(status_name(v.status))};
    for (const auto& c : cols) {
      row.push_back(c.cell(v.name));
    }
    table.add_row(std::move(row));
    if (v.status != VariantStatus::ok) {
      lines.push_back(fmt::format("- {}: {}", v.name, v.reason));
    }
    for (const auto& flag : v.flags) {
      lines.push_back(fmt::format("- {}: {}", v.name, flag));
    }
    if (v.telemetry && v.telemetry->load) {
      lines.push_back(fmt::format("- {}: {}", v.name, detail::load_memory_text(*v.telemetry->load)));
    }
    for (const auto& warning : v.telemetry ? v.telemetry->warnings : std::vector<std::string>{}) {
      lines.push_back(fmt::format("- {}: GPU telemetry: {}", v.name, warning));
    }
  }
  std::string out = table.markdown();
  for (const auto& t : r.levels) {
    for (const auto& row : t.rows) {
      if (!row.crossover.runs.empty()) {
        lines.push_back(fmt::format("- {} {}: {}", row.variant, t.benchmark, detail::crossover_text(t, row.crossover)));
      }
    }
  }
  for (const auto& note : r.notes) {
    lines.push_back("- note: " + note);
  }
  if (!lines.empty()) {
    out += "\n";
    for (const auto& line : lines) {
      out += line + "\n";
    }
  }
  out += "\n" + detail::verdict_line(r) + "\n";
  return out;
}

} // namespace specctl::report
