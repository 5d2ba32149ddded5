#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <specctl/run/command_bench.hpp>

#include <specctl/remote/local_host.hpp>
#include <specctl/util/shell.hpp>

#include <chrono>
#include <filesystem>
#include <unistd.h>

using namespace specctl;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

using specctl::test::TempDir;

namespace {

constexpr util::Duration k_shell_timeout = 10s;

run::CommandContext context_with_model(std::string model) {
  return {"http://127.0.0.1:30000", 30000, "eagle3-tp2", std::move(model), "gpu-node-1"};
}

experiment::MetricExtractor regex(std::string metric, std::string pattern) {
  return {std::move(metric), experiment::ExtractKind::regex, std::move(pattern)};
}

experiment::MetricExtractor json(std::string metric, std::string path) {
  return {std::move(metric), experiment::ExtractKind::json, std::move(path)};
}

experiment::BenchmarkSpec command_spec(std::string run, std::vector<experiment::MetricExtractor> extract) {
  experiment::BenchmarkSpec spec;
  spec.name = "legacy";
  spec.kind = experiment::BenchmarkKind::command;
  spec.run = std::move(run);
  spec.extract = std::move(extract);
  return spec;
}

// A host that cannot run anything.
class UnreachableHost final : public remote::Host {
public:
  std::string describe() const override { return "node9 (root@10.0.0.9:22)"; }
  std::expected<remote::CommandResult, Error> exec(const std::string&, util::Duration) override {
    return std::unexpected(Error("node9 (root@10.0.0.9:22): connection refused", ErrorKind::failed));
  }
  std::expected<int, Error> open_tunnel(const std::string&, int) override {
    return std::unexpected(Error("node9: no tunnel"));
  }
};

} // namespace

TEST_CASE("fill_command") {
  const auto context = context_with_model("meta-llama/Llama-3.1-8B");
  SUBCASE("every placeholder") {
    CHECK(run::fill_command("bench --url {url} --port {port} --tag {variant} --model {model} --on {host}", context) ==
          "bench --url http://127.0.0.1:30000 --port 30000 --tag eagle3-tp2 --model meta-llama/Llama-3.1-8B "
          "--on gpu-node-1");
  }
  SUBCASE("values that need quotes") {
    CHECK(run::fill_command("bench --model {model}", context_with_model("my model's dir")) ==
          "bench --model 'my model'\\''s dir'");
    CHECK(run::fill_command("bench --model {model}", context_with_model("")) == "bench --model ''");
  }
  SUBCASE("inside the user's quotes") {
    const auto hostile = context_with_model("$(id)");
    CHECK(run::fill_command("bench --model \"{model}\"", hostile) == "bench --model \"\"'$(id)'\"\"");
    CHECK(run::fill_command("bench --model '{model}'", hostile) == "bench --model '''$(id)'''");
    CHECK(run::fill_command("bench --model ${model}", hostile) == "bench --model \\$'$(id)'");
  }
  SUBCASE("literal braces") {
    CHECK(run::fill_command("awk '{{print $1}' {{port}", context) == "awk '{print $1}' {port}");
    CHECK(run::fill_command("echo \\{model}", context) == "echo \\{model}");
    CHECK(run::fill_command("bench {port} # don't {model}\nnext {port}#{port}", context) ==
          "bench 30000 # don't {model}\nnext 30000#30000");
  }
  SUBCASE("unknown placeholders and lone braces stay as written") {
    CHECK(run::fill_command("echo {nope} {port", context) == "echo {nope} {port");
    CHECK(run::fill_command("echo } {port}}", context) == "echo } 30000}");
  }
}

// The values reach the command verbatim through a real /bin/sh, wherever the
// placeholder sits, and nothing in them runs.
TEST_CASE("fill_command quoting through /bin/sh") {
  TempDir dir;
  const std::string pwned = (dir / "pwned").string();
  const std::vector<std::string> values = {
      "'; touch " + pwned + "; '",
      "$(touch " + pwned + ")",
      "`touch " + pwned + "`",
      "\"; touch " + pwned + "; \"",
      "\\\"; touch " + pwned + "; #",
      "x\\",
      "\\",
      "a b  c\td",
      "*",
      "~root",
      "line one\nline two",
      "",
      "it's",
      "$HOME ${HOME} \\$(touch " + pwned + ")",
      "--flag=1",
      "plain",
  };
  // Each template prints "[" value "]" (with text around it where the template adds some).
  struct Shape {
    std::string run;
    std::string before;
    std::string after;
  };
  const std::vector<Shape> shapes = {
      {"printf '[%s]' {model}", "", ""},
      {"printf '[%s]' \"{model}\"", "", ""},
      {"printf '[%s]' '{model}'", "", ""},
      {"printf '[%s]' x{model}y", "x", "y"},
      {"printf '[%s]' \"a'b {model} c\"", "a'b ", " c"},
      {"printf '[%s]' 'x \"{model}\" y'", "x \"", "\" y"},
      {"printf '[%s]' \"$(printf '%s' \"{model}\")\"", "", ""},
      {"printf '[%s]' \"$(printf '%s' {model})\"", "", ""},
      {"printf '[%s]' \"$( (printf '%s' '{model}') )\"", "", ""},
      {"printf '[%s]' \"`printf '%s' {model}`\"", "", ""},
      {"printf '[%s]' \"`printf '%s' \"{model}\"`\"", "", ""},
      {"V={model}; printf '[%s]' \"$V\"", "", ""},
      {"printf '[%s]' {model} | cat", "", ""},
      {"# it's a comment\nprintf '[%s]' {model}", "", ""},
      {"printf '[%s]' \"{model}\" # {model}", "", ""},
  };
  remote::LocalHost host;
  // /bin/sh is dash here; a GPU node's may be bash.
  const std::vector<std::string> shells = {"/bin/sh", "bash"};
  SUBCASE("placeholders in words, quotes, $( ), backquotes and comments") {
    for (const auto& shell : shells) {
      for (const auto& shape : shapes) {
        for (const auto& value : values) {
          const std::string line = run::fill_command(shape.run, context_with_model(value));
          CAPTURE(shell);
          CAPTURE(line);
          auto r = host.exec(shell + " -c " + util::shell_quote(line), k_shell_timeout);
          REQUIRE(r);
          CHECK(r->exit_code == 0);
          CHECK(r->out == "[" + shape.before + value + shape.after + "]");
          CHECK_FALSE(fs::exists(pwned));
        }
      }
    }
  }
  SUBCASE("${model} is a literal $ and the value, in bash as in dash") {
    for (const auto& shell : shells) {
      for (const std::string run : {"printf '[%s]' ${model}", "printf '[%s]' \"`printf '%s' ${model}`\""}) {
        for (const auto& value : values) {
          const std::string line = run::fill_command(run, context_with_model(value));
          CAPTURE(line);
          auto r = host.exec(shell + " -c " + util::shell_quote(line), k_shell_timeout);
          REQUIRE(r);
          CHECK(r->out == "[$" + value + "]");
          CHECK_FALSE(fs::exists(pwned));
        }
      }
    }
  }
}

TEST_CASE("extract_metrics with regular expressions") {
  const std::string out = "warmup done\navg 41.5 tok/s\navg 99.0 tok/s\ntotal: 1,234,567.5 tokens\n"
                          "ratio: 3,21\nstatus: fast\n";
  std::vector<std::string> problems;
  const auto metrics =
      run::extract_metrics({regex("tok_s", "avg ([0-9.]+) tok/s"), regex("tokens", "total: ([0-9.,]+) tokens"),
                            regex("ratio", "ratio: ([0-9.,]+)"), regex("status", "status: (\\w+)"),
                            regex("missing", "p99 ([0-9.]+) ms"), regex("groupless", "avg [0-9.]+")},
                           out, problems);
  CHECK(metrics == std::map<std::string, double>{{"tok_s", 41.5}, {"tokens", 1234567.5}});
  CHECK(problems == std::vector<std::string>{
                        "metric \"ratio\": pattern \"ratio: ([0-9.,]+)\" matched \"3,21\", not a number",
                        "metric \"status\": pattern \"status: (\\w+)\" matched \"fast\", not a number",
                        "metric \"missing\": pattern \"p99 ([0-9.]+) ms\" matches nothing in the output",
                        "metric \"groupless\": pattern \"avg [0-9.]+\" matched \"avg 41.5\" but has no group ( ) "
                        "around the number",
                    });
  REQUIRE(problems.size() == 4);
}

TEST_CASE("extract_metrics over lines far longer than a regular expression can run over") {
  // std::regex recursed once per character `.*` ran over and a 30,000-character line
  // overflowed the stack (exit 139): each line is matched on its first 4 KiB.
  const std::string huge(1 << 20, 'x');
  const std::string out = "result " + huge + "\n" + std::string(1 << 20, ' ') + "\ntotal " + huge + " 7 tok/s\n" +
                          "avg 41.5 tok/s " + huge + "\n";
  std::vector<std::string> problems;
  const auto metrics = run::extract_metrics(
      {regex("tok_s", "avg ([0-9.]+) tok/s"), regex("spaces", "^\\s+([0-9]+)"), regex("far", "result .*([0-9]) tok/s")},
      out, problems);
  CHECK(metrics == std::map<std::string, double>{{"tok_s", 41.5}});
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "metric \"spaces\": pattern \"^\\s+([0-9]+)\" matches nothing in the output");
  CHECK(problems[1] == "metric \"far\": pattern \"result .*([0-9]) tok/s\" matches nothing in the output");
}

TEST_CASE("extract_metrics with an invalid regular expression") {
  std::vector<std::string> problems;
  std::map<std::string, double> metrics;
  CHECK_NOTHROW(metrics = run::extract_metrics({regex("broken", "avg ([0-9.]+ tok/s")}, "avg 1 tok/s", problems));
  CHECK(metrics.empty());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].starts_with("metric \"broken\": pattern \"avg ([0-9.]+ tok/s\" is not a valid regular expression"));
}

TEST_CASE("extract_metrics with JSON paths") {
  const std::string doc = R"({"results": {"throughput": 1234.5, "label": "fast", "ok": true, "none": null,
                                           "as_text": "2,048.25", "grid": [[1, 2], [3, 4]]},
                              "runs": [{"tok_s": 50}, {"tok_s": 60.5}]})";
  std::vector<std::string> problems;
  SUBCASE("found") {
    const auto metrics =
        run::extract_metrics({json("throughput", "results.throughput"), json("second", "runs[1].tok_s"),
                              json("cell", "results.grid[1][0]"), json("text", "results.as_text")},
                             doc, problems);
    CHECK(problems.empty());
    CHECK(metrics ==
          std::map<std::string, double>{{"throughput", 1234.5}, {"second", 60.5}, {"cell", 3}, {"text", 2048.25}});
  }
  SUBCASE("missing or not a number") {
    const auto metrics = run::extract_metrics(
        {json("a", "results.latency"), json("b", "runs[2].tok_s"), json("c", "results.throughput.p99"),
         json("d", "results[0]"), json("e", "results.label"), json("f", "results.ok"), json("g", "results.none"),
         json("h", "results"), json("i", "runs..tok_s")},
        doc, problems);
    CHECK(metrics.empty());
    CHECK(problems ==
          std::vector<std::string>{
              "metric \"a\": json path \"results.latency\": \"results\" has no key \"latency\"",
              "metric \"b\": json path \"runs[2].tok_s\": \"runs\" has 2 items, no [2]",
              "metric \"c\": json path \"results.throughput.p99\": \"results.throughput\" is 1234.5, not an object "
              "with \"p99\"",
              "metric \"d\": json path \"results[0]\": \"results\" is an object, not a list",
              "metric \"e\": json path \"results.label\": is the text \"fast\", not a number",
              "metric \"f\": json path \"results.ok\": is true, not a number",
              "metric \"g\": json path \"results.none\": is null, not a number",
              "metric \"h\": json path \"results\": is an object, not a number",
              "metric \"i\": json path \"runs..tok_s\": is not a path like results.throughput or runs[0].tok_s",
          });
  }
  SUBCASE("a JSON line after noise") {
    const std::string out = "Loading tokenizer...\nWARNING: {not json}\n{\"tok_s\": 12.5, \"runs\": [7]}\n"
                            "{\"event\": \"done\"}\nbye\n";
    // The last line that is an object wins: "event" has no tok_s.
    auto metrics = run::extract_metrics({json("tok_s", "tok_s")}, out, problems);
    CHECK(metrics.empty());
    CHECK(problems == std::vector<std::string>{"metric \"tok_s\": json path \"tok_s\": the top level has no key "
                                               "\"tok_s\""});
    problems.clear();
    metrics =
        run::extract_metrics({json("tok_s", "tok_s")},
                             "Loading tokenizer...\n[1/3] {\"partial\": 1}\n{\"tok_s\": 12.5}\r\ndone\n", problems);
    CHECK(problems.empty());
    CHECK(metrics == std::map<std::string, double>{{"tok_s", 12.5}});
  }
  SUBCASE("pretty-printed JSON after noise") {
    const std::string out = "2025-01-22 10:00:00 starting\nprogress 100%\n{\n  \"results\": {\n    \"throughput\": "
                            "88.5,\n    \"runs\": [\n      {\"tok_s\": 1}\n    ]\n  }\n}\n";
    const auto metrics = run::extract_metrics(
        {json("throughput", "results.throughput"), json("first", "results.runs[0].tok_s")}, out, problems);
    CHECK(problems.empty());
    CHECK(metrics == std::map<std::string, double>{{"throughput", 88.5}, {"first", 1}});
  }
  SUBCASE("a top-level list") {
    const auto metrics = run::extract_metrics({json("x", "[1].x")}, R"([{"x": 1}, {"x": 2}])", problems);
    CHECK(problems.empty());
    CHECK(metrics == std::map<std::string, double>{{"x", 2}});
  }
  SUBCASE("no JSON at all") {
    const auto metrics = run::extract_metrics({json("tok_s", "results.tok_s"), regex("avg", "avg ([0-9]+)")},
                                              "avg 7\nnothing structured here {\n", problems);
    CHECK(metrics == std::map<std::string, double>{{"avg", 7}});
    CHECK(problems ==
          std::vector<std::string>{"metric \"tok_s\": json path \"results.tok_s\": the output holds no JSON object"});
  }
}

TEST_CASE("run_command_benchmark") {
  remote::LocalHost host;
  const auto context = context_with_model("llama 8b");
  SUBCASE("a command that works") {
    const auto spec = command_spec("printf 'model=%s\\n' {model}; echo noise >&2; echo '{{\"tok_s\": 42.5}'; "
                                   "echo 'avg 41 tok/s at port {port}'",
                                   {json("tok_s", "tok_s"), regex("avg", "avg ([0-9]+) tok/s")});
    auto outcome = run::run_command_benchmark(host, spec, context, k_shell_timeout);
    REQUIRE(outcome);
    CHECK(outcome->command_line == "printf 'model=%s\\n' 'llama 8b'; echo noise >&2; echo '{\"tok_s\": 42.5}'; "
                                   "echo 'avg 41 tok/s at port '30000''");
    CHECK(outcome->ok());
    CHECK(outcome->exit_code == 0);
    CHECK_FALSE(outcome->timed_out);
    CHECK(outcome->problems.empty());
    CHECK(outcome->metrics == std::map<std::string, double>{{"tok_s", 42.5}, {"avg", 41}});
    CHECK(outcome->out_tail == "model=llama 8b\n{\"tok_s\": 42.5}\navg 41 tok/s at port 30000");
    CHECK(outcome->err_tail == "noise");
    CHECK(outcome->duration_s >= 0);
    CHECK(outcome->duration_s < 10);
  }
  SUBCASE("a command that fails") {
    const auto spec = command_spec("echo 'avg 12 tok/s'; echo 'starting' >&2; echo 'error: no server at {url}' >&2; "
                                   "exit 3",
                                   {regex("avg", "avg ([0-9]+) tok/s"), regex("p99", "p99 ([0-9]+)")});
    auto outcome = run::run_command_benchmark(host, spec, context, k_shell_timeout);
    REQUIRE(outcome);
    CHECK_FALSE(outcome->ok());
    CHECK(outcome->exit_code == 3);
    CHECK_FALSE(outcome->timed_out);
    CHECK(outcome->metrics == std::map<std::string, double>{{"avg", 12}});
    CHECK(outcome->problems == std::vector<std::string>{
                                   "the command exited with status 3: error: no server at http://127.0.0.1:30000",
                                   "metric \"p99\": pattern \"p99 ([0-9]+)\" matches nothing in the output",
                               });
    CHECK(outcome->err_tail == "starting\nerror: no server at http://127.0.0.1:30000");
  }
  SUBCASE("a command that is not found") {
    auto outcome = run::run_command_benchmark(
        host, command_spec("/no/such/bench --url {url}", {regex("x", "x ([0-9]+)")}), context, k_shell_timeout);
    REQUIRE(outcome);
    CHECK(outcome->exit_code == 127);
    REQUIRE(outcome->problems.size() == 2);
    CHECK(outcome->problems[0].starts_with("the command exited with status 127: "));
  }
  SUBCASE("a command that times out") {
    const auto spec = command_spec("echo 'avg 5 tok/s'; sleep 5", {regex("avg", "avg ([0-9]+) tok/s")});
    const auto started = std::chrono::steady_clock::now();
    auto outcome = run::run_command_benchmark(host, spec, context, 300ms);
    const auto waited = std::chrono::steady_clock::now() - started;
    REQUIRE(outcome);
    CHECK(outcome->timed_out);
    CHECK_FALSE(outcome->ok());
    CHECK(outcome->duration_s >= 0.25);
    CHECK(outcome->duration_s < 4.5);
    CHECK(waited < 4500ms);
    CHECK(outcome->problems.front() == "the command timed out after 300ms and was killed");
    CHECK(outcome->out_tail == "avg 5 tok/s");
  }
  SUBCASE("long output keeps its last lines") {
    const auto spec = command_spec("i=0; while [ $i -lt 100 ]; do i=$((i+1)); echo \"line $i\"; done; "
                                   "head -c 10000 /dev/zero | tr '\\0' x >&2",
                                   {regex("last", "line (100)")});
    auto outcome = run::run_command_benchmark(host, spec, context, k_shell_timeout);
    REQUIRE(outcome);
    CHECK(outcome->metrics.at("last") == 100);
    CHECK(outcome->out_tail.starts_with("line 81\n"));
    CHECK(outcome->out_tail.ends_with("line 100"));
    CHECK(outcome->err_tail.size() == run::k_command_tail_bytes);
  }
  SUBCASE("a host that cannot run it") {
    UnreachableHost unreachable;
    auto outcome = run::run_command_benchmark(unreachable, command_spec("bench {url}", {regex("x", "x ([0-9]+)")}),
                                              context, k_shell_timeout);
    REQUIRE_FALSE(outcome);
    CHECK(std::string(outcome.error().what()) == "benchmark \"legacy\": node9 (root@10.0.0.9:22): connection refused");
    CHECK(outcome.error().kind() == ErrorKind::failed);
  }
  SUBCASE("not a command benchmark") {
    auto spec = command_spec("true", {});
    spec.kind = experiment::BenchmarkKind::single_stream;
    auto outcome = run::run_command_benchmark(host, spec, context, k_shell_timeout);
    REQUIRE_FALSE(outcome);
    CHECK(outcome.error().kind() == ErrorKind::bad_input);
  }
}
