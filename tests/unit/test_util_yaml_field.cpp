// util/yaml_field: every conversion of a YAML value reports a mistake as
// file:line:col: key.path: message, and carries on with the next.
#include <doctest/doctest.h>

#include <specctl/util/yaml_field.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using specctl::util::Diagnostics;
using specctl::util::YamlField;
namespace fs = std::filesystem;

namespace {

// The one message the diagnostics hold, as a user reads it.
std::string only_message(const Diagnostics& diag) {
  REQUIRE(diag.items().size() == 1);
  return diag.items().front().str();
}

struct Doc {
  Diagnostics diag;
  YAML::Node root;
  YamlField top() { return YamlField(root, "", "f.yaml", diag); }
};

} // namespace

TEST_CASE("yaml_field: conversions accept what they should and name the key when they refuse") {
  Doc doc;
  doc.root = YAML::Load("a:\n"
                        "  n: 8\n"
                        "  q: \"8\"\n"
                        "  big: 70000\n"
                        "  x: 0.85\n"
                        "  yes_: on\n"
                        "  t: 20m\n"
                        "  bad_t: soon\n"
                        "  mem: 16GiB\n"
                        "  pct: 5%\n"
                        "  pct_bad: lots\n"
                        "  c: eagel3\n"
                        "  l: [a, b]\n"
                        "  lmix: [a, [b]]\n");
  auto a = doc.top()["a"];
  CHECK(a["n"].as_int(1, 100) == 8);
  CHECK(doc.diag.items().empty());

  SUBCASE("a quoted number is a string, not an integer") {
    CHECK_FALSE(a["q"].as_int(1, 100));
    CHECK(only_message(doc.diag) == "f.yaml:3:6: a.q: expected an integer, got \"8\"");
  }
  SUBCASE("out of range") {
    CHECK_FALSE(a["big"].as_int(1, 65535));
    CHECK(only_message(doc.diag) == "f.yaml:4:8: a.big: 70000 is out of range (1..65535)");
  }
  SUBCASE("numbers, booleans, durations, sizes, percentages") {
    CHECK(a["x"].as_number() == doctest::Approx(0.85));
    CHECK(a["yes_"].as_bool() == true);
    CHECK(a["t"].as_duration().has_value());
    CHECK(a["mem"].as_size_mib() == 16 * 1024);
    CHECK(a["pct"].as_percent() == doctest::Approx(5.0));
    CHECK(a["n"].as_percent() == doctest::Approx(8.0));
    CHECK(doc.diag.items().empty());
    CHECK_FALSE(a["x"].as_bool());
    CHECK(only_message(doc.diag) == "f.yaml:5:6: a.x: expected true or false, got \"0.85\"");
  }
  SUBCASE("a duration that is not one") {
    CHECK_FALSE(a["bad_t"].as_duration());
    CHECK(only_message(doc.diag).starts_with("f.yaml:8:10: a.bad_t: "));
  }
  SUBCASE("a percentage that is not one") {
    CHECK_FALSE(a["pct_bad"].as_percent());
    CHECK(only_message(doc.diag) == "f.yaml:11:12: a.pct_bad: expected a percentage such as 10%, got \"lots\"");
  }
  SUBCASE("a choice with a typo gets a suggestion") {
    CHECK_FALSE(a["c"].as_choice({"none", "eagle3", "ngram"}));
    CHECK(only_message(doc.diag) ==
          "f.yaml:12:6: a.c: \"eagel3\" is not one of none, eagle3, ngram (did you mean \"eagle3\"?)");
  }
  SUBCASE("lists: every item must be a string, each mistake is reported at its item") {
    CHECK(a["l"].as_string_list() == std::vector<std::string>{"a", "b"});
    CHECK_FALSE(a["lmix"].as_string_list());
    CHECK(only_message(doc.diag) == "f.yaml:14:13: a.lmix[1]: expected a single value, got a list");
  }
  SUBCASE("the wrong kind of node") {
    CHECK_FALSE(a.as_string());
    CHECK(only_message(doc.diag).find("a: expected a single value, got a map") != std::string::npos);
  }
}

TEST_CASE("yaml_field: unknown and duplicate keys") {
  Doc doc;
  doc.root = YAML::Load("server:\n  tempalte: sglang\n  model: m\n  model: n\n");
  auto server = doc.top()["server"];
  server.check_keys({"template", "model", "host"});
  const auto items = doc.diag.sorted();
  REQUIRE(items.size() == 2);
  CHECK(items[0].str() == "f.yaml:2:3: unknown key \"tempalte\" in server (did you mean \"template\"?)");
  CHECK(items[1].str() == "f.yaml:4:3: duplicate key \"model\" in server");
  // A missing key is not present, and reading it adds no diagnostic.
  CHECK_FALSE(server["host"].present());
  CHECK(doc.diag.items().size() == 2);
}

TEST_CASE("yaml_field: assigning a field rebinds it and never writes through to the document") {
  Doc doc;
  doc.root = YAML::Load("a: 1\nb: 2\n");
  YamlField field = doc.top()["a"];
  field = doc.top()["b"];
  CHECK(field.path() == "b");
  CHECK(field.as_int(0, 9) == 2);
  CHECK(doc.root["a"].as<int>() == 1);
}

TEST_CASE("yaml_field: files that cannot be read, empty or malformed are one diagnostic naming the file") {
  const fs::path dir = fs::temp_directory_path() / ("specctl-yaml-field-" + std::to_string(getpid()));
  fs::create_directories(dir);
  struct Case {
    const char* name;
    std::string content;
    const char* message;
  };
  const Case cases[] = {
      {"empty.yaml", "", "empty.yaml: the file is empty"},
      {"bad.yaml", "a: [1, 2\n", "bad.yaml:"},
      {"nul.yaml", std::string("a: 1\0b", 6), "nul.yaml: not a YAML file (it contains NUL bytes)"},
      {"latin1.yaml", "a: caf\xe9\n", "not UTF-8 text (byte 0xE9)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    { std::ofstream(dir / c.name, std::ios::binary) << c.content; }
    Diagnostics diag;
    auto node = specctl::util::load_yaml_file((dir / c.name).string(), c.name, diag);
    CHECK_FALSE(node.IsDefined());
    CHECK(only_message(diag).find(c.message) != std::string::npos);
  }
  Diagnostics diag;
  specctl::util::load_yaml_file((dir / "missing.yaml").string(), "missing.yaml", diag);
  CHECK(only_message(diag) == "missing.yaml: cannot read file: No such file or directory");
  std::string text;
  Diagnostics ok;
  { std::ofstream(dir / "ok.yaml") << "a: 1\n"; }
  auto node = specctl::util::load_yaml_file((dir / "ok.yaml").string(), "ok.yaml", ok, &text);
  CHECK(ok.items().empty());
  CHECK(node["a"].as<int>() == 1);
  CHECK(text == "a: 1\n");
  fs::remove_all(dir);
}
