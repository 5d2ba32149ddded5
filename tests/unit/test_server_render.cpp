#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <specctl/experiment/experiment.hpp>
#include <specctl/server/render.hpp>

#include "../support/shell_capture.hpp"

#include <filesystem>
#include <fstream>
#include <optional>

using specctl::experiment::load_experiment;
using specctl::server::render_launch;
using specctl::util::Diagnostics;

namespace {

specctl::experiment::Experiment load_ok(const std::string& path) {
  Diagnostics diag;
  auto e = load_experiment(path, diag);
  for (const auto& d : diag.items()) {
    MESSAGE(d.str());
  }
  REQUIRE_FALSE(diag.has_errors());
  return e;
}

} // namespace

TEST_CASE("rendering knobs into argv") {
  auto e = load_ok("tests/data/good/quoting.yaml");
  REQUIRE(e.variants.size() == 1);
  auto launch = render_launch(e.variants[0].server, {"/opt/specctl/bin"});
  std::vector<std::string> expected = {"/bin/sh",
                                       "-c",
                                       "printf \"%s\\0\" \"$NASTY\"; for a in \"$@\"; do printf \"%s\\0\" \"$a\"; done",
                                       "argv-dump",
                                       "--model",
                                       "x; rm -rf ~",
                                       "--port",
                                       "9999",
                                       "--label",
                                       "$(id)",
                                       "--item",
                                       "`id`",
                                       "--item",
                                       "it's",
                                       "--item",
                                       "say \"hi\"",
                                       "--spread",
                                       "a b",
                                       "c\td",
                                       "--joined",
                                       "x,y;z",
                                       "--off",
                                       "--choice",
                                       "FAST",
                                       "--steps",
                                       "4",
                                       "--draft",
                                       "5",
                                       "--config",
                                       R"({"a":3,"nested":{"b":"q'uote"}})",
                                       "--extra",
                                       "line one\nline two",
                                       "*",
                                       "~",
                                       "&& touch /tmp/specctl-pwned",
                                       ""};
  CHECK(launch.argv == expected);
  REQUIRE(launch.env.size() == 2);
  CHECK(launch.env[0].first == "FROM_KNOB");
  CHECK(launch.env[0].second == "$HOME");
  CHECK(launch.env[1].first == "NASTY");
}

// No YAML value may reach a shell unquoted: run the shell line for real and compare.
TEST_CASE("the rendered shell line runs exactly the argv, with exactly the env") {
  std::filesystem::remove("/tmp/specctl-pwned");
  auto e = load_ok("tests/data/good/quoting.yaml");
  auto launch = render_launch(e.variants[0].server, {"/opt/specctl/bin"});
  auto words = specctl::test::run_shell(launch.shell_line());
  REQUIRE(words.size() == launch.argv.size() - 3);
  CHECK(words[0] == launch.env[1].second);
  for (std::size_t i = 1; i < words.size(); ++i) {
    CAPTURE(i);
    CHECK(words[i] == launch.argv[i + 3]);
  }
  CHECK_FALSE(std::filesystem::exists("/tmp/specctl-pwned"));
}

TEST_CASE("the engines' templates render their real flags") {
  auto seeds = load_ok("experiments/kimi-k25-eagle3.yaml");
  auto eagle = render_launch(seeds.find_variant("eagle3")->server, {});
  std::vector<std::string> sglang = {"python3",
                                     "-m",
                                     "sglang.launch_server",
                                     "--model-path",
                                     "/models/Kimi-K2.5-INT4",
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     "30000",
                                     "--tp-size",
                                     "8",
                                     "--cuda-graph-max-bs",
                                     "128",
                                     "--disable-custom-all-reduce",
                                     "--enable-flashinfer-allreduce-fusion",
                                     "--attention-backend",
                                     "flashinfer",
                                     "--speculative-algorithm",
                                     "EAGLE3",
                                     "--speculative-draft-model-path",
                                     "/models/Kimi-K2.5-EAGLE3",
                                     "--speculative-num-steps",
                                     "2",
                                     "--speculative-eagle-topk",
                                     "1",
                                     "--speculative-num-draft-tokens",
                                     "3"};
  CHECK(eagle.argv == sglang);

  auto vllm = load_ok("tests/data/good/vllm.yaml");
  auto launch = render_launch(vllm.variants[0].server, {});
  std::vector<std::string> expected = {"vllm",
                                       "serve",
                                       "/models/llama",
                                       "--host",
                                       "127.0.0.1",
                                       "--port",
                                       "8000",
                                       "--tensor-parallel-size",
                                       "4",
                                       "--enforce-eager",
                                       "--gpu-memory-utilization",
                                       "0.85",
                                       "--compilation-config",
                                       R"({"pass_config":{"fuse_allreduce_rms":true}})",
                                       "--speculative-config",
                                       R"({"method":"eagle3","model":"/models/eagle3","num_speculative_tokens":3})"};
  CHECK(launch.argv == expected);
  REQUIRE(launch.env.size() == 2);
  CHECK(launch.env[0] == std::pair<std::string, std::string>{"CUDA_VISIBLE_DEVICES", "0,1,2,3"});
  CHECK(launch.env[1] == std::pair<std::string, std::string>{"VLLM_LOGGING_LEVEL", "DEBUG"});
}

TEST_CASE("env the engine overwrites is a warning") {
  auto e = load_ok("tests/data/good/nccl-env.yaml");
  auto launch = render_launch(e.variants[0].server, {});
  REQUIRE(launch.warnings.size() == 1);
  CHECK(launch.warnings[0] == "sglang sets NCCL_NVLS_ENABLE itself from its flags: the value in env is lost");
}

TEST_CASE("engine versions as dotted numbers") {
  using specctl::server::compare_versions;
  using specctl::server::parse_version;
  CHECK(parse_version("0.5.16") == std::vector<long>{0, 5, 16});
  CHECK(parse_version("v0.5.10.post1") == std::vector<long>{0, 5, 10});
  CHECK(parse_version("0.11.0rc2.dev12+gabc") == std::vector<long>{0, 11, 0});
  CHECK(parse_version("1.") == std::vector<long>{1});
  CHECK_FALSE(parse_version("version: 6000 (3f545bec)"));
  CHECK_FALSE(parse_version(""));
  CHECK(compare_versions({0, 5}, {0, 5, 0}) == 0);
  CHECK(compare_versions({0, 5, 9}, {0, 5, 16}) < 0);
  CHECK(compare_versions({0, 6}, {0, 5, 16}) > 0);
}

// Knobs with `since` render the spelling the installed version accepts; unknown or older
// versions keep the seeds' spelling, which every SGLang 0.5.x parses.
TEST_CASE("flags by engine version") {
  auto seeds = load_ok("experiments/kimi-k25-eagle3.yaml");
  auto config = seeds.find_variant("eagle3")->server;
  config.knobs["cuda_graph"] = {nlohmann::json(false), {}, false};
  config.knobs["cuda_graph_bs"] = {nlohmann::json::array({1, 2, 4}), {}, false};
  auto words = [&](std::optional<std::string> version) {
    specctl::server::RenderOptions options{"", version};
    auto argv = render_launch(config, options).argv;
    return std::vector<std::string>(argv.begin() + 11, argv.begin() + 22);
  };
  const std::vector<std::string> old_spelling = {"--disable-cuda-graph",
                                                 "--cuda-graph-max-bs",
                                                 "128",
                                                 "--cuda-graph-bs",
                                                 "1",
                                                 "2",
                                                 "4",
                                                 "--disable-custom-all-reduce",
                                                 "--enable-flashinfer-allreduce-fusion",
                                                 "--attention-backend",
                                                 "flashinfer"};
  CHECK(words(std::nullopt) == old_spelling);
  CHECK(words("") == old_spelling);
  CHECK(words("0.5.10.post1") == old_spelling);
  CHECK(render_launch(config, {}).argv == render_launch(config, {"", "0.5.14"}).argv);

  auto launch = render_launch(config, {"", "0.5.15"});
  std::vector<std::string> new_spelling = {"--cuda-graph-backend-decode",
                                           "disabled",
                                           "--cuda-graph-backend-prefill",
                                           "disabled",
                                           "--cuda-graph-max-bs-decode",
                                           "128",
                                           "--cuda-graph-bs-decode",
                                           "1",
                                           "2",
                                           "4",
                                           "--disable-custom-all-reduce",
                                           "--flashinfer-allreduce-fusion-backend",
                                           "auto",
                                           "--attention-backend",
                                           "flashinfer"};
  CHECK(std::vector<std::string>(launch.argv.begin() + 11, launch.argv.begin() + 26) == new_spelling);
  CHECK(launch.warnings.empty());
  CHECK(render_launch(config, {"", "v0.6.0"}).argv == launch.argv);

  auto garbled = render_launch(config, {"", "not a version"});
  CHECK(std::vector<std::string>(garbled.argv.begin() + 11, garbled.argv.begin() + 22) == old_spelling);
  REQUIRE(garbled.warnings.size() == 1);
  CHECK(garbled.warnings[0] ==
        "sglang version \"not a version\" is not a dotted number: flags use the template's base spelling");
  // A template without rules ignores the version.
  auto llama = load_ok("tests/data/good/llamacpp.yaml").variants[0].server;
  CHECK(render_launch(llama, {"", "version: 6000 (3f545bec)"}).warnings.empty());
}

// vLLM's `before` rules: the base spelling is the current one (an unknown version gets it, as
// PassConfig rejects the other side's key either way); older versions get the old flag and the
// old JSON path.
TEST_CASE("vLLM: flags and JSON paths before a version") {
  auto config = load_ok("tests/data/good/vllm.yaml").variants[0].server;
  config.knobs["cuda_graph_max_bs"] = {nlohmann::json(64), {}, false};
  auto rendered = [&](std::optional<std::string> version) {
    auto argv = render_launch(config, {"", version}).argv;
    std::map<std::string, std::string> flags;
    for (std::size_t i = 7; i + 1 < argv.size(); ++i) {
      if (argv[i].starts_with("--") && !argv[i + 1].starts_with("--")) {
        flags[argv[i]] = argv[i + 1];
      }
    }
    return flags;
  };
  for (std::optional<std::string> current :
       {std::optional<std::string>{}, std::optional<std::string>{"0.13.0"}, std::optional<std::string>{"v0.19.1"}}) {
    auto flags = rendered(current);
    CHECK(flags["--max-cudagraph-capture-size"] == "64");
    CHECK_FALSE(flags.contains("--cuda-graph-sizes"));
    CHECK(flags["--compilation-config"] == R"({"pass_config":{"fuse_allreduce_rms":true}})");
  }
  auto v12 = rendered("0.12.0");
  CHECK(v12["--max-cudagraph-capture-size"] == "64");
  CHECK(v12["--compilation-config"] == R"({"pass_config":{"enable_fi_allreduce_fusion":true}})");
  for (const char* old : {"0.11.0", "0.10.2", "0.11.0rc2"}) {
    auto flags = rendered(old);
    CHECK(flags["--cuda-graph-sizes"] == "64");
    CHECK_FALSE(flags.contains("--max-cudagraph-capture-size"));
    CHECK(flags["--compilation-config"] == R"({"pass_config":{"enable_fi_allreduce_fusion":true}})");
  }
}

TEST_CASE("since rules are checked when the template loads") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "specctl-test-since";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& knobs) {
    std::ofstream(dir / (name + ".yaml")) << "name: " << name << "\ncommand: [x]\nknobs:\n" << knobs;
  };
  write("bad_version", "  a: {type: int, flag: --a, since: {\"new\": {flag: --b}}}\n");
  write("valued_words", "  a: {type: int, flag: --a, since: {\"1.0\": {flag: [--b, c]}}}\n");
  write("json_since", "  a: {type: int, json: {flag: --c, path: a}, since: {\"1.0\": {flag: --b}}}\n");
  write("env_since", "  a: {type: int, env: A, since: {\"1.0\": {flag: --b}}}\n");
  write("both", "  a: {type: int, flag: --a, since: {\"2.0\": {flag: --c}}, before: {\"1.0\": {flag: --b}}}\n");
  write("json_before", "  a: {type: int, json: {flag: --c, path: x.new}, before: {\"1.0\": {path: x.old}}}\n");
  write("empty_rule", "  a: {type: bool, flag: --a, since: {\"1.0\": {}}}\n");
  write("false_on_int", "  a: {type: int, flag: --a, since: {\"1.0\": {flag_false: --b}}}\n");
  write("good", "  a: {type: bool, flag: --a, since: {\"2.0\": {flag: [--c, x]}, \"1.0\": {flag_false: --b}}}\n");
  auto errors = [&](const std::string& name) {
    Diagnostics diag;
    auto tmpl = specctl::server::load_template(name, {dir.string()}, diag, {});
    std::vector<std::string> out;
    for (const auto& d : diag.errors()) {
      out.push_back(d.message);
    }
    return out;
  };
  CHECK(errors("bad_version") ==
        std::vector<std::string>{"knobs.a.since: \"new\" is not a version of dotted numbers, e.g. \"0.5.16\""});
  CHECK(errors("valued_words") ==
        std::vector<std::string>{"knobs.a.since.1.0.flag: only a bool knob's flag can be several words; a valued "
                                 "flag is one word followed by the value"});
  CHECK(errors("json_since") == std::vector<std::string>{"unknown key \"flag\" in knobs.a.since.1.0",
                                                         "knobs.a.since.1.0: a since rule of a json knob needs path"});
  CHECK(errors("env_since") == std::vector<std::string>{"knobs.a.since: \"since\" respells a flag or a JSON path: the "
                                                        "knob needs flag, flag_false or json, not env"});
  CHECK(errors("both") == std::vector<std::string>{"knobs.a: a knob has since or before rules, not both"});
  CHECK(errors("json_before").empty());
  CHECK(errors("empty_rule") == std::vector<std::string>{"knobs.a.since.1.0: a since rule needs flag or flag_false"});
  CHECK(errors("false_on_int") ==
        std::vector<std::string>{"knobs.a.since.1.0.flag_false: only a bool knob can have flag_false"});
  CHECK(errors("good").empty());
  Diagnostics diag;
  auto good = specctl::server::load_template("good", {dir.string()}, diag, {});
  REQUIRE(good);
  const auto& since = good->find_knob("a")->since;
  REQUIRE(since.size() == 2);
  CHECK(since[0].since == "1.0");
  CHECK(since[1].flag == std::vector<std::string>{"--c", "x"});
  auto json_before = specctl::server::load_template("json_before", {dir.string()}, diag, {});
  REQUIRE(json_before);
  const auto& before = json_before->find_knob("a")->before;
  REQUIRE(before.size() == 1);
  CHECK(before[0].json_path == "x.old");
  fs::remove_all(dir);
}
