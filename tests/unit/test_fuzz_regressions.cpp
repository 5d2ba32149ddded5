// Inputs the libFuzzer harnesses (fuzz/, scripts/fuzz.sh) found, each kept
// byte for byte in tests/data/fuzz/ and in the harness's corpus: every one
// must meet a clean error or a right answer, never an exception or a crash.

#include "../../src/run/run_context.hpp"
#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/ssh_config.hpp>
#include <specctl/report/compare.hpp>
#include <specctl/report/report.hpp>
#include <specctl/run/journal.hpp>
#include <specctl/server/server_template.hpp>
#include <specctl/util/diagnostics.hpp>
#include <specctl/util/text.hpp>

#include <doctest/doctest.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fs = std::filesystem;
using specctl::test::read_file;
using specctl::test::TempDir;
using specctl::test::write_file;
using namespace specctl;

namespace {

const fs::path k_source = SPECCTL_TEST_SOURCE_DIR;
const fs::path k_found = k_source / "tests" / "data" / "fuzz";

} // namespace

TEST_CASE("fuzz: a damaged result.json whose parse error quotes bytes that are not UTF-8 still gives a JSON report") {
  // fuzz_results: the first byte picks the file the rest replaces; 3 is
  // eagle3-nofusion's result.json. Its parse error quotes the 0xFF bytes.
  const std::string input = read_file(k_found / "results-damaged-not-utf8.bin");
  REQUIRE(input.size() > 1);
  REQUIRE(input[0] == 3);
  const fs::path fixture = k_source / "tests" / "data" / "report" / "sweep";
  TempDir dir;
  fs::copy(fixture, dir.path(), fs::copy_options::recursive);
  write_file(dir / "variants/eagle3-nofusion/result.json", std::string_view(input).substr(1));

  auto run = report::read_run(dir.path());
  auto built = report::build_report(run);
  std::string json;
  REQUIRE_NOTHROW(json = report::render(built, "json"));
  CHECK(nlohmann::json::accept(json));
  std::string compared;
  REQUIRE_NOTHROW(compared = report::render(report::compare_runs(report::read_run(fixture), run), "json"));
  CHECK(nlohmann::json::accept(compared));
}

TEST_CASE("fuzz: a template with bytes that are not UTF-8 is refused where they are") {
  // fuzz_template: a choice rendered into a JSON-valued flag held byte 0xF6,
  // and render_launch threw nlohmann's type_error 316 instead of an error.
  util::Diagnostics diag;
  const fs::path file = k_found / "template-not-utf8.yaml";
  auto tmpl = server::load_template(file.string(), server::template_search_path(k_found.string()), diag,
                                    util::Location{"experiment.yaml", 3, 13});
  CHECK(tmpl == nullptr);
  auto errors = diag.errors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].where.line == 14);
  CHECK(errors[0].where.column == 26);
  CHECK(errors[0].message == "not UTF-8 text (byte 0xF6): save the file as UTF-8");

  SUBCASE("an experiment file is refused the same way") {
    TempDir dir;
    write_file(dir / "sweep.yaml", "name: sweep\nvariants:\n  - name: caf\xe9\n");
    util::Diagnostics experiment_diag;
    (void)experiment::load_experiment((dir / "sweep.yaml").string(), experiment_diag);
    REQUIRE(experiment_diag.errors().size() == 1);
    CHECK(experiment_diag.errors()[0].str() ==
          (dir / "sweep.yaml").string() + ":3:14: not UTF-8 text (byte 0xE9): save the file as UTF-8");
  }
}

TEST_CASE("fuzz: a template's regular expression too long to compile safely is refused") {
  // 32000 nested parentheses overflowed the stack inside std::regex's compiler.
  TempDir dir;
  const std::string pattern = std::string(32000, '(') + std::string(32000, ')');
  write_file(dir / "deep.yaml", "command: [x, \"{model}\"]\nlog:\n  ready: [\"" + pattern + "\"]\n");
  util::Diagnostics diag;
  auto tmpl = server::load_template((dir / "deep.yaml").string(), {}, diag, util::Location{"experiment.yaml", 3, 13});
  CHECK(tmpl == nullptr);
  auto errors = diag.errors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].where.line == 3);
  CHECK(errors[0].message == "log.ready[0]: regular expression too long (64000 characters, at most 1000)");
}

TEST_CASE("fuzz: a Host pattern's '*' is a wildcard also where the alias holds a '*'") {
  // fuzz_ssh_config: the first line is the alias, the rest the config. "Host *"
  // did not match the alias "*quotet": the '*' was taken as a character first.
  const std::string input = read_file(k_found / "ssh_config-star-in-alias.bin");
  const auto newline = input.find('\n');
  REQUIRE(newline != std::string::npos);
  const std::string_view alias = std::string_view(input).substr(0, newline);
  CHECK(alias == "*quotet");
  // Its other lines are no keywords OpenSSH knows, so the reader refuses the
  // file as ssh does, naming the line; the rule itself on a clean file:
  remote::SshConfigContext context{"/home/u", "u"};
  auto garbled = remote::lookup_ssh_config(std::string_view(input).substr(newline + 1), alias, context, "fuzz");
  REQUIRE_FALSE(garbled);
  CHECK(std::string(garbled.error().what()).starts_with("fuzz:"));
  auto entry = remote::lookup_ssh_config("Host *\n  User root\n  Port 222\n", alias, context);
  REQUIRE(entry);
  CHECK_FALSE(entry->hostname.has_value());
  CHECK(entry->user == "root");
  CHECK(entry->port == 222);

  SUBCASE("glob_match") {
    CHECK(util::glob_match("*", "*quotet"));
    CHECK(util::glob_match("a*", "a*b"));
    CHECK(util::glob_match("*b", "*b"));
    CHECK(util::glob_match("a*c", "a*xc"));
    CHECK_FALSE(util::glob_match("a*c", "a*b"));
  }
}

TEST_CASE("fuzz: a journal entry whose job_id is not a string does not stop a resumed run") {
  // fuzz_journal: "job_id": 2 in a slurm_ entry made nlohmann's value() throw
  // type_error 302 out of the resume's reading of the journal.
  TempDir dir;
  write_file(dir / run::Journal::k_file_name, read_file(k_found / "journal-job-id-number.jsonl"));
  int torn = 0;
  auto entries = run::read_journal(dir.path(), &torn);
  // The lines with a NUL in a string and with a broken key are skipped as torn.
  CHECK(entries.size() == 2);
  CHECK(torn == 2);
  std::set<std::string> jobs;
  REQUIRE_NOTHROW(jobs = run::detail::journaled_slurm_jobs(entries));
  CHECK(jobs == std::set<std::string>{"101"});
  std::map<std::string, run::detail::Adoption> open;
  REQUIRE_NOTHROW(open = run::detail::unfinished_slurm_jobs(entries));
  CHECK(open.empty());
}
