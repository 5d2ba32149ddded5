#include <specctl/sim/options.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace specctl::sim;

namespace {

std::expected<Options, ArgError> parse(std::vector<std::string> args) {
  return parse_args(args);
}

std::string error_of(std::vector<std::string> args) {
  auto result = parse(std::move(args));
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

} // namespace

TEST_CASE("sim options: SGLang's flags with separate values") {
  const auto options = parse({"--model-path",
                              "/models/Kimi",
                              "--host",
                              "0.0.0.0",
                              "--port",
                              "30000",
                              "--tp-size",
                              "8",
                              "--cuda-graph-max-bs",
                              "128",
                              "--disable-custom-all-reduce",
                              "--attention-backend",
                              "flashinfer",
                              "--enable-flashinfer-allreduce-fusion",
                              "--speculative-algorithm",
                              "EAGLE3",
                              "--speculative-draft-model-path",
                              "/models/eagle3",
                              "--speculative-num-steps",
                              "2",
                              "--speculative-eagle-topk",
                              "1",
                              "--speculative-num-draft-tokens",
                              "3",
                              "--mem-fraction-static",
                              "0.88",
                              "--log-level",
                              "INFO",
                              "--enable-metrics",
                              "--decode-log-interval",
                              "10",
                              "--skip-server-warmup",
                              "--enable-nccl-nvls",
                              "--enable-symm-mem",
                              "--disable-cuda-graph"});
  REQUIRE(options.has_value());
  const auto& s = options->server;
  CHECK(s.model_path == "/models/Kimi");
  CHECK(s.host == "0.0.0.0");
  CHECK(s.port == 30000);
  CHECK(s.tp_size == 8);
  CHECK(s.cuda_graph_max_bs == 128);
  CHECK(s.disable_custom_all_reduce);
  CHECK(s.attention_backend == "flashinfer");
  CHECK(s.enable_flashinfer_allreduce_fusion);
  CHECK(s.speculative_algorithm == SpecAlgorithm::eagle3);
  CHECK(s.speculative_draft_model_path == "/models/eagle3");
  CHECK(s.speculative_num_steps == 2);
  CHECK(s.speculative_eagle_topk == 1);
  CHECK(s.speculative_num_draft_tokens == 3);
  CHECK(s.mem_fraction_static == 0.88);
  CHECK(s.log_level == LogLevel::info);
  CHECK(s.enable_metrics);
  CHECK(s.decode_log_interval == 10);
  CHECK(s.skip_server_warmup);
  CHECK(s.enable_nccl_nvls);
  CHECK(s.enable_symm_mem);
  CHECK(s.disable_cuda_graph);
}

TEST_CASE("sim options: --flag=value, aliases, lists and the sim flags") {
  using namespace std::chrono_literals;
  const auto options = parse({"--model=/m",
                              "--tensor-parallel-size=4",
                              "--cuda-graph-bs",
                              "1",
                              "2",
                              "4",
                              "--port=1234",
                              "--sim-load-time",
                              "15m",
                              "--sim-speed=20",
                              "--sim-profile",
                              "flood",
                              "--sim-fault",
                              "crash-load:0.3",
                              "--sim-fault",
                              "http-500",
                              "--sim-gpu-dir",
                              "/tmp/g",
                              "--sim-seed",
                              "7"});
  REQUIRE(options.has_value());
  CHECK(options->server.model_path == "/m");
  CHECK(options->server.tp_size == 4);
  CHECK(options->server.cuda_graph_bs == std::vector<int>{1, 2, 4});
  CHECK(options->server.port == 1234);
  CHECK(options->sim.load_time == 15min);
  CHECK(options->sim.speed == 20.0);
  CHECK(options->sim.profile == "flood");
  REQUIRE(options->sim.faults.all().size() == 2);
  CHECK(options->sim.faults.find(FaultKind::crash_load)->fraction == 0.3);
  CHECK(options->sim.faults.find(FaultKind::http_500)->fraction == 0.5);
  CHECK(options->sim.gpu_dir == "/tmp/g");
  CHECK(options->sim.seed == 7);
}

TEST_CASE("sim options: defaults are SGLang's") {
  const auto options = parse({"--model-path", "/m"});
  REQUIRE(options.has_value());
  CHECK(options->server.host == "127.0.0.1");
  CHECK(options->server.port == 30000);
  CHECK(options->server.tp_size == 1);
  CHECK(options->server.decode_log_interval == 40);
  CHECK(options->sim.load_time == std::chrono::seconds(5));
  CHECK(options->sim.speed == 1.0);
  CHECK(options->sim.profile == "default");
  CHECK(parse({"-h"})->help);
}

TEST_CASE("sim options: errors read like argparse's") {
  CHECK(error_of({"--model-path", "/m", "--foo", "--port", "1", "x"}) == "unrecognized arguments: --foo x");
  CHECK(error_of({"--port", "1"}) == "the following arguments are required: --model-path/--model");
  CHECK(error_of({"--model-path", "/m", "--foo"}) == "unrecognized arguments: --foo");
  CHECK(error_of({"--model-path", "/m", "--tp-size"}) ==
        "argument --tp-size/--tensor-parallel-size: expected one argument");
  CHECK(error_of({"--model-path", "/m", "--tp-size", "--port", "1"}) ==
        "argument --tp-size/--tensor-parallel-size: expected one argument");
  CHECK(error_of({"--model-path", "/m", "--tp-size", "eight"}) ==
        "argument --tp-size/--tensor-parallel-size: invalid int value: 'eight'");
  CHECK(error_of({"--model-path", "/m", "--mem-fraction-static", "lots"}) ==
        "argument --mem-fraction-static: invalid float value: 'lots'");
  CHECK(error_of({"--model-path", "/m", "--enable-metrics=yes"}) ==
        "argument --enable-metrics: ignored explicit argument 'yes'");
  CHECK(error_of({"--model-path", "/m", "--cuda-graph-bs"}) ==
        "argument --cuda-graph-bs: expected at least one argument");
  CHECK(error_of({"--model-path", "/m", "--speculative-algorithm", "MEDUSA"}) ==
        "argument --speculative-algorithm: invalid choice: 'MEDUSA' (choose from 'EAGLE', 'EAGLE3', 'NEXTN', "
        "'STANDALONE', 'NGRAM')");
  CHECK(error_of({"--model-path", "/m", "--sim-profile", "fast"}) ==
        "argument --sim-profile: invalid choice: 'fast' (choose from 'default', 'flood')");
  CHECK(error_of({"--model-path", "/m", "--sim-speed", "0"}) ==
        "argument --sim-speed: must be a positive number, got '0'");
  CHECK(error_of({"--model-path", "/m", "--sim-load-time", "soon"})
            .starts_with("argument --sim-load-time: invalid duration"));
  CHECK(error_of({"--model-path", "/m", "--sim-fault", "explode"})
            .starts_with("argument --sim-fault: unknown fault \"explode\""));
}

TEST_CASE("sim options: SGLang's checks after parsing") {
  CHECK(error_of({"--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2"}) ==
        "--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens must be set together, "
        "or none of them");
  CHECK(error_of({"--model-path", "/m", "--speculative-algorithm", "EAGLE3"}) ==
        "--speculative-draft-model-path is required with --speculative-algorithm EAGLE3");
  CHECK(parse({"--model-path", "/m", "--speculative-algorithm", "NGRAM"}).has_value());
  CHECK(error_of({"--model-path", "/m", "--port", "70000"}) == "argument --port: 70000 is not a valid port (1-65535)");
  CHECK(error_of({"--model-path", "/m", "--tp-size", "0"}) ==
        "argument --tp-size/--tensor-parallel-size: must be at least 1, got 0");
}

TEST_CASE("sim options: usage and the server_args log line") {
  CHECK(usage_text().starts_with("usage: specsim [-h] --model-path MODEL_PATH [--host HOST] [--port PORT]"));
  CHECK(usage_text().find("[--cuda-graph-bs CUDA_GRAPH_BS [CUDA_GRAPH_BS ...]]") != std::string::npos);
  ServerArgs args;
  args.model_path = "/models/it's";
  args.tp_size = 8;
  args.cuda_graph_bs = {1, 2};
  args.speculative_algorithm = SpecAlgorithm::eagle3;
  const auto repr = server_args_repr(args);
  CHECK(repr.starts_with("ServerArgs(model_path='/models/it\\'s', tokenizer_path='/models/it\\'s',"));
  CHECK(repr.find(", tp_size=8,") != std::string::npos);
  CHECK(repr.find(", cuda_graph_bs=[1, 2],") != std::string::npos);
  CHECK(repr.find(", speculative_algorithm='EAGLE3',") != std::string::npos);
  CHECK(repr.find(", mem_fraction_static=None,") != std::string::npos);
  CHECK(repr.ends_with(", skip_server_warmup=False)"));
}
