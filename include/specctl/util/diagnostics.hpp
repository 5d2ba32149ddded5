#pragma once

#include <string>
#include <vector>

namespace specctl::util {

// A place in an input file; line and column are 1-based, 0 when unknown.
struct Location {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:12:5", "file:12" or "file".
  std::string str() const;
};

enum class Severity { error, warning };

struct Diagnostic {
  Location where;
  Severity severity = Severity::error;
  std::string message;

  // "file:12:5: message", or "file:12:5: warning: message".
  std::string str() const;
};

// Collects every problem in an input instead of stopping at the first, so a
// user fixes a file in one pass. The same message at the same place is kept once
// (a server default seen through several variants is one mistake, not many).
class Diagnostics {
public:
  void error(Location where, std::string message);
  void warning(Location where, std::string message);

  bool has_errors() const;
  std::size_t error_count() const;
  const std::vector<Diagnostic>& items() const { return m_items; }
  // In file order (by file, line, column), as a user reads them.
  std::vector<Diagnostic> sorted() const;
  std::vector<Diagnostic> errors() const;
  std::vector<Diagnostic> warnings() const;

private:
  void add(Diagnostic d);
  std::vector<Diagnostic> m_items;
};

} // namespace specctl::util
