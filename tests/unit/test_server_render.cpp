#include <doctest/doctest.h>

#include <specctl/experiment/experiment.hpp>
#include <specctl/server/render.hpp>

#include "shell_capture.hpp"

#include <filesystem>

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
  std::vector<std::string> expected = {
      "/bin/sh", "-c", "printf \"%s\\0\" \"$NASTY\"; for a in \"$@\"; do printf \"%s\\0\" \"$a\"; done",
      "argv-dump", "--model", "x; rm -rf ~", "--port", "9999",
      "--label", "$(id)",
      "--item", "`id`", "--item", "it's", "--item", "say \"hi\"",
      "--spread", "a b", "c\td",
      "--joined", "x,y;z",
      "--off",
      "--choice", "FAST",
      "--steps", "4",
      "--draft", "5",
      "--config", R"({"a":3,"nested":{"b":"q'uote"}})",
      "--extra", "line one\nline two", "*", "~", "&& touch /tmp/specctl-pwned", ""};
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
  std::vector<std::string> sglang = {"python3", "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K2.5-INT4",
                                     "--host", "127.0.0.1", "--port", "30000", "--tp-size", "8",
                                     "--cuda-graph-max-bs", "128", "--disable-custom-all-reduce",
                                     "--enable-flashinfer-allreduce-fusion", "--attention-backend", "flashinfer",
                                     "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                                     "/models/Kimi-K2.5-EAGLE3", "--speculative-num-steps", "2",
                                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"};
  CHECK(eagle.argv == sglang);

  auto vllm = load_ok("tests/data/good/vllm.yaml");
  auto launch = render_launch(vllm.variants[0].server, {});
  std::vector<std::string> expected = {"vllm", "serve", "/models/llama", "--host", "127.0.0.1", "--port", "8000",
                                       "--tensor-parallel-size", "4", "--enforce-eager",
                                       "--gpu-memory-utilization", "0.85",
                                       "--compilation-config", R"({"pass_config":{"fuse_allreduce_rms":true}})",
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
