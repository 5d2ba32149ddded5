#include <specctl/util/diagnostics.hpp>

#include <algorithm>
#include <fmt/format.h>
#include <tuple>

namespace specctl::util {

std::string Location::str() const {
  if (line <= 0) {
    return file;
  }
  if (column <= 0) {
    return fmt::format("{}:{}", file, line);
  }
  return fmt::format("{}:{}:{}", file, line, column);
}

std::string Diagnostic::str() const {
  return fmt::format("{}: {}{}", where.str(), severity == Severity::warning ? "warning: " : "", message);
}

void Diagnostics::error(Location where, std::string message) {
  add({std::move(where), Severity::error, std::move(message)});
}

void Diagnostics::warning(Location where, std::string message) {
  add({std::move(where), Severity::warning, std::move(message)});
}

void Diagnostics::add(Diagnostic d) {
  bool seen = std::any_of(m_items.begin(), m_items.end(), [&](const Diagnostic& other) {
    return other.severity == d.severity && other.message == d.message && other.where.file == d.where.file &&
           other.where.line == d.where.line && other.where.column == d.where.column;
  });
  if (!seen) {
    m_items.push_back(std::move(d));
  }
}

std::vector<Diagnostic> Diagnostics::sorted() const {
  std::vector<Diagnostic> out = m_items;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.where.file, a.where.line, a.where.column) < std::tie(b.where.file, b.where.line, b.where.column);
  });
  return out;
}

bool Diagnostics::has_errors() const {
  return error_count() > 0;
}

std::size_t Diagnostics::error_count() const {
  return static_cast<std::size_t>(
      std::count_if(m_items.begin(), m_items.end(), [](const auto& d) { return d.severity == Severity::error; }));
}

std::vector<Diagnostic> Diagnostics::errors() const {
  std::vector<Diagnostic> out;
  std::copy_if(m_items.begin(), m_items.end(), std::back_inserter(out),
               [](const auto& d) { return d.severity == Severity::error; });
  return out;
}

std::vector<Diagnostic> Diagnostics::warnings() const {
  std::vector<Diagnostic> out;
  std::copy_if(m_items.begin(), m_items.end(), std::back_inserter(out),
               [](const auto& d) { return d.severity == Severity::warning; });
  return out;
}

} // namespace specctl::util
