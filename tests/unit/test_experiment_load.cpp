#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <specctl/experiment/experiment.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace specctl::experiment;
using specctl::util::Diagnostics;

namespace {

Experiment load_layers() {
  auto config = std::filesystem::temp_directory_path() / ("specctl-test-ssh-config-" + std::to_string(getpid()));
  {
    std::ofstream out(config);
    out << "Host gpu1\n  HostName 10.0.0.7\n  User root\n  Port 2222\n  IdentityFile ~/.ssh/gpu\n";
  }
  setenv("SPECCTL_SSH_CONFIG", config.c_str(), 1);
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  Diagnostics diag;
  auto e = load_experiment("tests/data/good/layers.yaml", diag);
  setenv("SPECCTL_SSH_CONFIG", "/nonexistent", 1);
  std::filesystem::remove(config);
  for (const auto& d : diag.items()) {
    MESSAGE(d.str());
  }
  REQUIRE_FALSE(diag.has_errors());
  return e;
}

std::vector<std::string> names(const Experiment& e) {
  std::vector<std::string> out;
  for (const auto& v : e.variants) {
    out.push_back(v.name);
  }
  return out;
}

} // namespace

TEST_CASE("matrix expansion names and excludes") {
  auto e = load_layers();
  // Top-level axes first, then the variant's; the exclude removes the two (steps3, fusion-off) points.
  std::vector<std::string> expected = {
      "baseline-mem0.8",
      "baseline-mem0.9",
      "eagle3-mem0.8-steps1-fusion-on-attn-fa3",
      "eagle3-mem0.8-steps1-fusion-off-attn-fa3",
      "eagle3-mem0.8-steps3-fusion-on-attn-fa3",
      "eagle3-mem0.9-steps1-fusion-on-attn-fa3",
      "eagle3-mem0.9-steps1-fusion-off-attn-fa3",
      "eagle3-mem0.9-steps3-fusion-on-attn-fa3",
  };
  CHECK(names(e) == expected);
  const auto* v = e.find_variant("eagle3-mem0.9-steps3-fusion-on-attn-fa3");
  REQUIRE(v != nullptr);
  CHECK(v->base_name == "eagle3");
  REQUIRE(v->matrix_point.size() == 4);
  CHECK(v->matrix_point[1].first == "spec_steps");
  CHECK(*v->matrix_point[1].second == 3);
  CHECK(*v->server.knobs.at("spec_steps").value == 3);
  // The template derives draft tokens from the steps (topk 1).
  CHECK(*v->server.knobs.at("spec_draft_tokens").value == 4);
  CHECK(v->server.knobs.at("spec_draft_tokens").derived);
  CHECK(*v->server.knobs.at("mem_fraction").value == 0.9);
  // The matrix value replaces the default's flashinfer.
  CHECK(*v->server.knobs.at("attention_backend").value == "fa3");
  CHECK(v->benchmarks == std::vector<std::string>{"single"});
}

TEST_CASE("variants override server defaults") {
  auto e = load_layers();
  const auto& base = e.find_variant("baseline-mem0.8")->server;
  const auto& eagle = e.find_variant("eagle3-mem0.8-steps1-fusion-on-attn-fa3")->server;
  SUBCASE("scalars") {
    CHECK(base.model == "/models/base");
    CHECK(eagle.model == "/models/other");
    CHECK(base.host == "here");
    CHECK(base.port == 30000);
  }
  SUBCASE("maps merge, null unsets") {
    CHECK(base.knobs.count("cuda_graph_max_bs") == 0);
    CHECK(*base.knobs.at("tp").value == 8);
    CHECK(*eagle.knobs.at("cuda_graph_max_bs").value == 128);
    std::vector<std::pair<std::string, std::string>> env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_PROTO", "LL"}};
    CHECK(base.env == env);
    CHECK(base.health.timeout == std::chrono::minutes(45));
    CHECK(base.health.interval == std::chrono::seconds(10));
    CHECK(eagle.health.timeout == std::chrono::minutes(20));
  }
  SUBCASE("lists replace") {
    CHECK(base.extra_args == std::vector<std::string>{"--log-level", "debug"});
    CHECK(eagle.extra_args == std::vector<std::string>{"--enable-metrics"});
    CHECK(base.cleanup.allow == std::vector<std::string>{"sglang::*"});
  }
  SUBCASE("benchmarks default to all") {
    CHECK(e.find_variant("baseline-mem0.8")->benchmarks == std::vector<std::string>{"single", "par"});
  }
}

TEST_CASE("hosts: local, ssh targets and ~/.ssh/config aliases") {
  auto e = load_layers();
  REQUIRE(e.hosts.size() == 3);
  CHECK(e.hosts.at("here").kind == HostKind::local);
  const auto& node1 = e.hosts.at("node1");
  CHECK(node1.kind == HostKind::ssh);
  CHECK(node1.hostname == "10.0.0.7");
  CHECK(node1.user == "root");
  CHECK(node1.port == 2222);
  CHECK(node1.identities == std::vector<std::string>{"~/.ssh/gpu"});
  CHECK(node1.ssh_alias == "gpu1");
  CHECK(node1.describe() == "ssh root@10.0.0.7:2222 (alias gpu1 from ssh config), key ~/.ssh/gpu, host key strict");
  const auto& node2 = e.hosts.at("node2");
  CHECK(node2.hostname == "::1");
  CHECK(node2.user == "admin");
  CHECK(node2.port == 2200);
  CHECK(node2.host_key == HostKeyPolicy::accept_new);
  CHECK(node2.describe() == "ssh admin@[::1]:2200, key ~/.ssh/other, host key accept-new");
}

TEST_CASE("benchmark defaults") {
  auto e = load_layers();
  const auto* par = e.find_benchmark("par");
  REQUIRE(par != nullptr);
  CHECK(par->requests_at(1) == 10);
  CHECK(par->requests_at(250) == 500);
  CHECK(par->max_tokens == 512);
  CHECK(par->timeout > std::chrono::minutes(1));
  CHECK(metrics_of(*par).front() == "output_tok_s");
}

TEST_CASE("a template named by path is found next to the file that names it, not in the working directory") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("specctl-test-template-path-" + std::to_string(getpid()));
  fs::create_directories(dir / "engines");
  auto write = [](const fs::path& path, const std::string& text) { std::ofstream(path) << text; };
  write(dir / "sweep.yaml", "name: t\nserver:\n  template: ./engines/mine.yaml\n  model: /m.gguf\n"
                            "variants: [{name: a}]\nbenchmarks: [{name: s, kind: single_stream}]\n");
  // mine.yaml extends base.yaml beside it, which extends the installed llamacpp.
  write(dir / "engines" / "mine.yaml",
        "name: mine\nextends: ./base.yaml\ncommand: [/opt/mine/llama-server, -m, \"{model}\", --port, \"{port}\"]\n");
  write(dir / "engines" / "base.yaml", "name: base\nextends: llamacpp\ndefault_port: 9999\n");
  write(dir / "missing.yaml", "name: t\nserver:\n  template: ./nope.yaml\n  model: /m.gguf\n"
                              "variants: [{name: a}]\nbenchmarks: [{name: s, kind: single_stream}]\n");
  REQUIRE_FALSE(fs::exists("engines/mine.yaml"));
  {
    Diagnostics diag;
    auto e = load_experiment((dir / "sweep.yaml").string(), diag);
    for (const auto& d : diag.items()) {
      MESSAGE(d.str());
    }
    REQUIRE_FALSE(diag.has_errors());
    REQUIRE(e.variants.size() == 1);
    const auto& tmpl = e.variants[0].server.tmpl;
    REQUIRE(tmpl);
    CHECK(tmpl->name == "mine");
    CHECK(e.variants[0].server.port == 9999);
  }
  {
    Diagnostics diag;
    (void)load_experiment((dir / "missing.yaml").string(), diag);
    REQUIRE(diag.has_errors());
    CHECK(diag.items()[0].str() == (dir / "missing.yaml").string() +
                                       ":3:13: template file "
                                       "\"./nope.yaml\" not found: no file " +
                                       (dir / "nope.yaml").string());
  }
  fs::remove_all(dir);
}

namespace {

struct LoadedBody {
  Experiment experiment;
  // Every message, one a line, with the file's path replaced by "sweep.yaml".
  std::string messages;
};

LoadedBody load_body(const std::string& body) {
  namespace fs = std::filesystem;
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  setenv("SPECCTL_SSH_CONFIG", "/nonexistent", 1);
  const fs::path file = fs::temp_directory_path() / ("specctl-test-honest-" + std::to_string(getpid()) + ".yaml");
  std::ofstream(file) << "name: t\nserver: {template: sglang, model: /m}\n" << body;
  LoadedBody out;
  Diagnostics diag;
  out.experiment = load_experiment(file.string(), diag);
  for (const auto& d : diag.sorted()) {
    std::string text = d.str();
    if (text.starts_with(file.string())) {
      text = "sweep.yaml" + text.substr(file.string().size());
    }
    out.messages += text + "\n";
  }
  fs::remove(file);
  return out;
}

} // namespace

TEST_CASE("repeats: 3 by default when variants are compared, else 1, the default timeout follows") {
  const std::string benchmarks = "benchmarks:\n"
                                 "  - {name: par, kind: concurrency, levels: [1, 4]}\n"
                                 "  - {name: open, kind: rate, rates: [2], duration: 10s, repeats: 2}\n"
                                 "  - {name: fixed, kind: concurrency, levels: [1], timeout: 5m}\n"
                                 "  - {name: single, kind: single_stream}\n";
  auto one = load_body("variants: [{name: a}]\n" + benchmarks);
  REQUIRE(one.messages.empty());
  auto two = load_body("variants: [{name: a}, {name: b}]\n" + benchmarks);
  REQUIRE(two.messages.empty());
  const auto& par1 = *one.experiment.find_benchmark("par");
  const auto& par2 = *two.experiment.find_benchmark("par");
  CHECK_FALSE(par2.repeats_written);
  CHECK(par1.repeats == 1);
  CHECK(par2.repeats == 3);
  CHECK(par2.timeout == 3 * par1.timeout);
  CHECK(par1.describe() == "concurrency 1,4: max(2 x level, 10) requests per level, 512 tokens, the 3 seed prompts");
  CHECK(par2.describe() ==
        "concurrency 1,4: max(2 x level, 10) requests per level, 512 tokens, the 3 seed prompts, x3 repeats");
  // Written: kept whatever the variants.
  CHECK(one.experiment.find_benchmark("open")->repeats == 2);
  CHECK(two.experiment.find_benchmark("open")->repeats == 2);
  CHECK(two.experiment.find_benchmark("open")->describe() == "rate 2 req/s for 10s each, 512 tokens, x2 repeats");
  // A timeout as written is not scaled.
  CHECK(two.experiment.find_benchmark("fixed")->repeats == 3);
  CHECK(two.experiment.find_benchmark("fixed")->timeout == std::chrono::minutes{5});
  CHECK(two.experiment.find_benchmark("single")->repeats == 1);
  // Every prompt is made unique unless the file says otherwise.
  CHECK(par2.unique_prompts);
}

TEST_CASE("repeats and unique_prompts: what the file may say") {
  auto ok = load_body("variants: [{name: a}]\nbenchmarks:\n"
                      "  - {name: s, kind: single_stream, unique_prompts: false}\n"
                      "  - {name: p, kind: concurrency, levels: [2], repeats: 1000, unique_prompts: false}\n");
  REQUIRE(ok.messages.empty());
  CHECK_FALSE(ok.experiment.find_benchmark("s")->unique_prompts);
  CHECK(ok.experiment.find_benchmark("p")->repeats == 1000);
  CHECK(ok.experiment.find_benchmark("p")->describe() ==
        "concurrency 2: max(2 x level, 10) requests per level, 512 tokens, the 3 seed prompts, x1000 repeats, prompts "
        "sent verbatim");
  auto bad = load_body("variants: [{name: a}]\nbenchmarks:\n"
                       "  - {name: p, kind: concurrency, levels: [2], repeats: 0}\n"
                       "  - {name: s, kind: single_stream, repeats: 2}\n"
                       "  - {name: c, kind: command, run: x, parse: '(\\d+)', unique_prompts: true}\n");
  CHECK(bad.messages == "sweep.yaml:5:56: benchmarks[0].repeats: 0 is out of range (1..1000)\n"
                        "sweep.yaml:6:36: unknown key \"repeats\" in benchmarks[1]\n"
                        "sweep.yaml:7:54: unknown key \"unique_prompts\" in benchmarks[2]\n");
}

TEST_CASE("the A/A repeat: report.noise and repeat_of") {
  const std::string benchmarks = "benchmarks: [{name: single, kind: single_stream}]\n";
  SUBCASE("noise: true repeats the baseline last; the baseline runs first") {
    auto l = load_body("variants:\n  - {name: a}\n  - {name: b, knobs: {tp: 2}}\n  - {name: c}\n" + benchmarks +
                       "report: {baseline: b, noise: true, max_failed: 10%}\n");
    REQUIRE(l.messages.empty());
    const auto& e = l.experiment;
    CHECK(names(e) == std::vector<std::string>{"b", "a", "c", "b-again"});
    CHECK(e.report.noise);
    CHECK(e.report.max_failed_pct == 10);
    const auto& again = e.variants.back();
    CHECK(again.repeat_of == "b");
    CHECK(*again.server.knobs.at("tp").value == 2);
    CHECK(again.benchmarks == std::vector<std::string>{"single"});
    CHECK_FALSE(e.variants.front().repeat_of);
  }
  SUBCASE("a repeat written out, before what it repeats, goes last") {
    auto l = load_body("variants:\n  - {name: a2, repeat_of: a, description: twice}\n  - {name: a, knobs: {tp: 4}}\n"
                       "  - {name: b}\n" +
                       benchmarks);
    REQUIRE(l.messages.empty());
    const auto& e = l.experiment;
    CHECK(names(e) == std::vector<std::string>{"a", "b", "a2"});
    // The baseline by default is the first variant that is not a repeat.
    CHECK(e.report.baseline == "a");
    CHECK(e.report.max_failed_pct == 5);
    CHECK_FALSE(e.report.noise);
    CHECK(e.variants.back().description == "twice");
    CHECK(*e.variants.back().server.knobs.at("tp").value == 4);
  }
  SUBCASE("mistakes") {
    auto l = load_body("variants:\n"
                       "  - {name: a}\n"
                       "  - {name: r1, repeat_of: a, knobs: {tp: 2}, benchmarks: [single]}\n"
                       "  - {name: r2, repeat_of: aa}\n"
                       "  - {name: r3, repeat_of: r2}\n"
                       "  - {name: a-again}\n" +
                       benchmarks + "report: {noise: true, max_failed: 150%}\n");
    CHECK(l.messages ==
          "sweep.yaml:5:30: a variant with repeat_of takes its server and benchmarks from \"a\"\n"
          "sweep.yaml:5:46: a variant with repeat_of takes its server and benchmarks from \"a\"\n"
          "sweep.yaml:6:27: variants[2].repeat_of: repeat_of \"aa\" names no variant (did you mean \"a\"?)\n"
          "sweep.yaml:7:27: variants[3].repeat_of: \"r2\" is itself a repeat (of \"aa\"): repeat \"aa\" instead\n"
          "sweep.yaml:10:17: report.noise: noise: true adds the variant \"a-again\", but the experiment already has "
          "one by that name\n"
          "sweep.yaml:10:35: report.max_failed: max_failed is a share of a measurement's requests: at most 100%\n");
  }
}

TEST_CASE("prompts: workload sources, read and checked before anything launches") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path();
  const fs::path data = dir / ("specctl-test-workload-" + std::to_string(getpid()) + ".jsonl");
  std::ofstream(data) << "{\"prompt\": \"one\"}\n{\"messages\": [{\"role\": \"user\", \"content\": \"two\"}]}\n";
  const std::string file = data.filename().string();
  SUBCASE("every source, described; random and shared_prefix sent verbatim") {
    auto ok = load_body("variants: [{name: a}]\nbenchmarks:\n"
                        "  - {name: j, kind: single_stream, endpoint: chat, prompts: {jsonl: {file: " +
                        file +
                        ", seed: 4}}}\n"
                        "  - {name: r, kind: concurrency, levels: [1], prompts: {random: {input_tokens: 100, "
                        "output_tokens: 10, num_prompts: 4}}}\n"
                        "  - {name: g, kind: concurrency, levels: [1], prompts: {shared_prefix: {groups: 2, "
                        "per_group: 2, system_tokens: 50, question_tokens: 5, output_tokens: 5}}}\n"
                        "  - {name: s, kind: single_stream, prompts: specdec}\n"
                        "  - {name: r2, kind: single_stream, unique_prompts: true, prompts: {random: {}}}\n");
    REQUIRE(ok.messages.empty());
    const auto& j = *ok.experiment.find_benchmark("j");
    REQUIRE(j.prompts.workload.has_value());
    CHECK(std::get<specctl::bench::JsonlSpec>(*j.prompts.workload).file == data.string());
    CHECK(std::get<specctl::bench::JsonlSpec>(*j.prompts.workload).seed == 4);
    CHECK(j.prompts.chat());
    CHECK(j.unique_prompts);
    CHECK_FALSE(ok.experiment.find_benchmark("r")->unique_prompts);
    CHECK_FALSE(ok.experiment.find_benchmark("g")->unique_prompts);
    CHECK(ok.experiment.find_benchmark("r2")->unique_prompts);
    CHECK(ok.experiment.find_benchmark("s")->prompts.describe() == "specdec: all prompts, 8 categories (seed 0)");
  }
  SUBCASE("mistakes are one line each, at their key") {
    auto bad = load_body("variants: [{name: a}]\nbenchmarks:\n"
                         "  - {name: j, kind: single_stream, prompts: {jsonl: {file: " +
                         file +
                         "}}}\n"
                         "  - {name: m, kind: single_stream, prompts: {sharegpt: {file: missing.json}}}\n"
                         "  - {name: k, kind: single_stream, prompts: {random: {input_tokns: 5}}}\n"
                         "  - {name: n, kind: single_stream, prompts: {jsonl: {file: " +
                         file +
                         ", num_prompts: 3}}}\n"
                         "  - {name: d, kind: single_stream, prompts: {specdec: {categories: [cod]}}}\n");
    CHECK(bad.messages ==
          "sweep.yaml:5:45: benchmarks[0].prompts: the dataset holds chats (messages): they need endpoint: chat\n"
          "sweep.yaml:6:63: benchmarks[1].prompts.sharegpt.file: dataset file \"" +
              (dir / "missing.json").string() +
              "\" does not exist\n"
              "sweep.yaml:7:55: unknown key \"input_tokns\" in benchmarks[2].prompts.random (did you mean "
              "\"input_tokens\"?)\n"
              "sweep.yaml:8:53: benchmarks[3].prompts.jsonl: " +
              data.string() +
              ": 2 requests in the file, fewer than num_prompts 3\n"
              "sweep.yaml:9:55: benchmarks[4].prompts.specdec: specdec: unknown category \"cod\" (did you mean "
              "\"code\"?) (the categories: conversation, code, math, summarisation, translation, reasoning, "
              "extraction, writing)\n");
  }
  fs::remove(data);
}

TEST_CASE("slo and bisect: the bounds in order, the description, and a timeout that counts the bisected rates") {
  auto loaded = load_body("variants: [{name: a}]\nbenchmarks:\n"
                          "  - {name: open, kind: rate, rates: [1, 8], duration: 30s, max_tokens: 32,\n"
                          "     slo: {ttft_p99_ms: 2000, tpot_p99_ms: 50.5}, bisect: 3}\n"
                          "  - {name: plain, kind: rate, rates: [1, 8], duration: 30s, max_tokens: 32}\n"
                          "  - {name: par, kind: concurrency, levels: [1, 4], slo: {itl_p90_ms: 40}}\n");
  REQUIRE(loaded.messages.empty());
  const auto& open = *loaded.experiment.find_benchmark("open");
  const auto& plain = *loaded.experiment.find_benchmark("plain");
  CHECK(open.slo == std::vector<std::pair<std::string, double>>{{"ttft_p99_ms", 2000}, {"tpot_p99_ms", 50.5}});
  CHECK(open.bisect == 3);
  CHECK(plain.slo.empty());
  CHECK(plain.bisect == 0);
  CHECK(open.describe() == "rate 1,8 req/s for 30s each, 32 tokens, SLO ttft_p99_ms <= 2000, tpot_p99_ms <= 50.5, "
                           "then up to 3 rates bisected for the highest that meets it");
  // Two listed rates and three bisected, each of 30 s plus a request at 2 tok/s (16 s).
  CHECK(plain.timeout == std::chrono::seconds{2 * 46});
  CHECK(open.timeout == std::chrono::seconds{5 * 46});
  const auto& par = *loaded.experiment.find_benchmark("par");
  CHECK(par.slo == std::vector<std::pair<std::string, double>>{{"itl_p90_ms", 40}});
  CHECK(par.bisect == 0);
}
