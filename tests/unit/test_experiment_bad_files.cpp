#include <doctest/doctest.h>

#include "../support/files.hpp"

#include <specctl/experiment/experiment.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using specctl::experiment::load_experiment;
using specctl::test::read_file;
using specctl::util::Diagnostics;

namespace {

std::string diagnostics_text(const Diagnostics& diag) {
  std::string out;
  for (const auto& d : diag.sorted()) {
    out += d.str() + "\n";
  }
  return out;
}

// The user's own template directory and ssh config must not leak into messages.
void isolate_environment() {
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  setenv("SPECCTL_SSH_CONFIG", "/nonexistent", 1);
  unsetenv("SPECCTL_TEMPLATE_PATH");
}

} // namespace

// Every file in tests/data/bad/ is one class of mistake; its .expected holds the exact messages.
TEST_CASE("bad experiment files give their exact messages") {
  isolate_environment();
  const fs::path dir = "tests/data/bad";
  REQUIRE(fs::is_directory(dir));
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    fs::path expected_file = fs::path(entry.path()).replace_extension(".expected");
    CAPTURE(entry.path().string());
    REQUIRE(fs::exists(expected_file));
    Diagnostics diag;
    load_experiment(entry.path().string(), diag);
    CHECK(diag.has_errors());
    CHECK(diagnostics_text(diag) == read_file(expected_file));
    ++checked;
  }
  CHECK(checked >= 25);
}

TEST_CASE("unreadable experiment files") {
  isolate_environment();
  SUBCASE("missing") {
    Diagnostics diag;
    load_experiment("tests/data/bad/no-such-file.yaml", diag);
    CHECK(diagnostics_text(diag) == "tests/data/bad/no-such-file.yaml: cannot read file: No such file or directory\n");
  }
  SUBCASE("a directory") {
    Diagnostics diag;
    load_experiment("tests/data/bad", diag);
    CHECK(diagnostics_text(diag) == "tests/data/bad: cannot read file: it is a directory\n");
  }
  SUBCASE("binary garbage") {
    fs::path path = fs::temp_directory_path() / "specctl-test-garbage.yaml";
    {
      std::ofstream out(path, std::ios::binary);
      const char bytes[] = {'\x7f', 'E', 'L', 'F', '\0', '\x01', '\xff', '\xfe'};
      out.write(bytes, sizeof bytes);
    }
    Diagnostics diag;
    load_experiment(path.string(), diag);
    fs::remove(path);
    REQUIRE(diag.has_errors());
    CHECK(diag.items().front().message == "not a YAML file (it contains NUL bytes)");
  }
}

TEST_CASE("every shipped experiment and example validates") {
  isolate_environment();
  int checked = 0;
  for (const char* dir : {"experiments", "examples"}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml") {
        continue;
      }
      CAPTURE(entry.path().string());
      Diagnostics diag;
      auto experiment = load_experiment(entry.path().string(), diag);
      CHECK(diagnostics_text(diag) == "");
      CHECK_FALSE(experiment.variants.empty());
      ++checked;
    }
  }
  CHECK(checked >= 3);
}
