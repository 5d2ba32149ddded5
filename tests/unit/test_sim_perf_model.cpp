#include <specctl/sim/batch_engine.hpp>

#include <doctest/doctest.h>

using namespace specctl::sim;

namespace {

constexpr int k_prompt_tokens = 32;
constexpr int k_output_tokens = 512;

// The flags of the seeds' servers (8 GPUs, graphs up to 128, no custom all-reduce).
ServerArgs seed_args(bool fusion, bool eagle3, int steps = 2) {
  ServerArgs args;
  args.model_path = "/models/Kimi-K2.5-INT4";
  args.tp_size = 8;
  args.cuda_graph_max_bs = 128;
  args.disable_custom_all_reduce = true;
  args.enable_flashinfer_allreduce_fusion = fusion;
  if (eagle3) {
    args.speculative_algorithm = SpecAlgorithm::eagle3;
    args.speculative_draft_model_path = "/models/eagle3";
    args.speculative_num_steps = steps;
    args.speculative_eagle_topk = 1;
    args.speculative_num_draft_tokens = steps + 1;
  }
  return args;
}

PerfModel model_for(const ServerArgs& args) {
  const Profile& profile = *find_profile("default");
  return PerfModel(profile, make_variant(args, profile).variant);
}

double single_stream(const ServerArgs& args) {
  return simulate_wave(model_for(args), 1, k_prompt_tokens, k_output_tokens).per_request_tok_s;
}

double total(const ServerArgs& args, int concurrency) {
  return simulate_wave(model_for(args), concurrency, k_prompt_tokens, k_output_tokens).output_tok_s;
}

} // namespace

TEST_CASE("sim perf model: the default profile reproduces the seeds (512-token outputs)") {
  CHECK(single_stream(seed_args(true, false)) == doctest::Approx(92.6).epsilon(0.01));
  CHECK(total(seed_args(true, false), 250) == doctest::Approx(773.0).epsilon(0.01));
  CHECK(single_stream(seed_args(true, true)) == doctest::Approx(96.1).epsilon(0.01));
  CHECK(total(seed_args(true, true), 250) == doctest::Approx(354.0).epsilon(0.01));
  CHECK(single_stream(seed_args(false, true)) == doctest::Approx(54.1).epsilon(0.01));
  CHECK(model_for(seed_args(true, true)).mean_accept_length() == doctest::Approx(2.0).epsilon(0.02));
}

TEST_CASE("sim perf model: the shape of the seeds' comparison") {
  // Fusion is worth almost nothing to the baseline (92.6 vs 92.7 in the seeds)...
  CHECK(single_stream(seed_args(false, false)) == doctest::Approx(single_stream(seed_args(true, false))).epsilon(0.01));
  // ...EAGLE-3 saturates from about 70 streams on...
  const double at_70 = total(seed_args(true, true), 70);
  CHECK(at_70 > 0.95 * 354.0);
  CHECK(total(seed_args(true, true), 100) == doctest::Approx(354.0).epsilon(0.02));
  // ...and the baseline beats it at every concurrency above one, by over 2x at 250.
  for (int concurrency : {2, 5, 10, 30, 70, 100, 250}) {
    CAPTURE(concurrency);
    CHECK(total(seed_args(true, false), concurrency) > total(seed_args(true, true), concurrency));
  }
  CHECK(total(seed_args(true, false), 250) > 2.0 * total(seed_args(true, true), 250));
  // Baseline throughput rises with concurrency.
  double previous = 0.0;
  for (int concurrency : {1, 2, 5, 10, 30, 70, 100, 250}) {
    const double now = total(seed_args(true, false), concurrency);
    CHECK(now > previous);
    previous = now;
  }
}

TEST_CASE("sim perf model: two draft steps are the best single-stream setting, as in the seeds' sweep") {
  const double best = single_stream(seed_args(true, true, 2));
  for (int steps = 1; steps <= 10; ++steps) {
    if (steps != 2) {
      CAPTURE(steps);
      CHECK(single_stream(seed_args(true, true, steps)) < best);
    }
  }
}

TEST_CASE("sim perf model: what the flags change") {
  auto args = seed_args(true, false);
  const auto base = model_for(args);
  SUBCASE("CUDA graphs cover batches up to the max batch size") {
    CHECK(base.graph_for(128));
    CHECK_FALSE(base.graph_for(129));
    args.disable_cuda_graph = true;
    CHECK_FALSE(model_for(args).graph_for(1));
    CHECK(model_for(args).decode_ms(1) > base.decode_ms(1) + 10.0);
  }
  SUBCASE("a step costs more as the batch grows") {
    CHECK(base.decode_ms(2) > base.decode_ms(1));
    CHECK(base.decode_ms(100) > base.decode_ms(50));
  }
  SUBCASE("fewer GPUs, slower steps; one GPU, no all-reduce") {
    args.tp_size = 4;
    CHECK(model_for(args).decode_ms(1) > 1.8 * base.decode_ms(1));
  }
  SUBCASE("the attention backend scales compute") {
    args.attention_backend = "torch_native";
    CHECK(model_for(args).decode_ms(1) > 1.5 * base.decode_ms(1));
  }
  SUBCASE("custom all-reduce and symmetric memory cut the unfused all-reduce cost") {
    auto eagle = seed_args(false, true);
    const double plain = model_for(eagle).spec_cycle_ms(1);
    eagle.disable_custom_all_reduce = false;
    CHECK(model_for(eagle).spec_cycle_ms(1) < plain);
    eagle.enable_symm_mem = true;
    CHECK(model_for(eagle).spec_cycle_ms(1) < plain);
  }
}

TEST_CASE("sim perf model: accept lengths") {
  const auto eagle = model_for(seed_args(true, true));
  CHECK(eagle.max_accept_length() == 3);
  CHECK(eagle.accept_length_for(0.0) == 1);
  CHECK(eagle.accept_length_for(0.999) == 3);
  // The inverse CDF reproduces the mean.
  double sum = 0.0;
  constexpr int k_samples = 10000;
  for (int i = 0; i < k_samples; ++i) {
    sum += eagle.accept_length_for((i + 0.5) / k_samples);
  }
  CHECK(sum / k_samples == doctest::Approx(eagle.mean_accept_length()).epsilon(0.001));
  // topk > 1 explores more branches: longer accepts.
  auto wide = seed_args(true, true, 3);
  wide.speculative_eagle_topk = 4;
  wide.speculative_num_draft_tokens = 8;
  CHECK(model_for(wide).mean_accept_length() > model_for(seed_args(true, true, 3)).mean_accept_length());
  CHECK(model_for(seed_args(true, false)).mean_accept_length() == 1.0);
}

TEST_CASE("sim perf model: SGLang's adjustments of speculative settings") {
  ServerArgs args = seed_args(true, true);
  args.speculative_num_draft_tokens = 8;
  const auto adjusted = make_variant(args, *find_profile("default"));
  CHECK(adjusted.variant.spec->draft_tokens == 3);
  CHECK(adjusted.warnings.front().starts_with("speculative_num_draft_tokens is adjusted"));
  ServerArgs automatic = seed_args(true, false);
  automatic.speculative_algorithm = SpecAlgorithm::eagle3;
  automatic.speculative_draft_model_path = "/d";
  const auto chosen = make_variant(automatic, *find_profile("default"));
  CHECK(chosen.variant.spec->steps == 3);
  CHECK(chosen.variant.spec->draft_tokens == 4);
  CHECK(chosen.warnings.front().starts_with("Auto choose speculative_num_steps=3"));
}

TEST_CASE("sim batch engine: prefill first, then decode the running batch") {
  BatchEngine engine(model_for(seed_args(true, false)), 0);
  engine.add(1, 10, 3, 0.0, 0.0);
  engine.add(2, 10, 2, 0.0, 0.0);
  auto step = engine.step(0.0);
  CHECK(step.kind == StepKind::prefill);
  CHECK(step.batch == 2);
  CHECK(step.prefill_tokens == 20);
  REQUIRE(step.emissions.size() == 2);
  CHECK(step.emissions[0].first);
  double now = step.duration_s;
  step = engine.step(now);
  CHECK(step.kind == StepKind::decode);
  CHECK(step.batch == 2);
  CHECK(step.duration_s == doctest::Approx(engine.model().decode_ms(2) / 1000.0));
  REQUIRE(step.completed.size() == 1);
  CHECK(step.completed[0].id == 2);
  CHECK(step.completed[0].completion_tokens == 2);
  CHECK(step.completed[0].finish_s == doctest::Approx(now + step.duration_s));
  now += step.duration_s;
  step = engine.step(now);
  CHECK(step.batch == 1);
  CHECK(step.completed.size() == 1);
  CHECK(engine.step(now + step.duration_s).kind == StepKind::idle);
}

TEST_CASE("sim batch engine: the chunked-prefill budget splits a burst, and new arrivals pause decoding") {
  BatchEngine engine(model_for(seed_args(true, false)), 0);
  for (RequestId id = 1; id <= 3; ++id) {
    engine.add(id, 5000, 4, 0.0, 0.0);
  }
  auto step = engine.step(0.0);
  CHECK(step.batch == 1);
  step = engine.step(step.duration_s);
  CHECK(step.kind == StepKind::prefill);
  CHECK(step.running_before == 1);
  CHECK(step.running_after == 2);
  CHECK(step.waiting_after == 1);
}

TEST_CASE("sim batch engine: delayed and cancelled requests") {
  BatchEngine engine(model_for(seed_args(true, false)), 0);
  engine.add(1, 10, 5, 0.0, 2.0);
  CHECK(engine.step(0.0).kind == StepKind::idle);
  CHECK(engine.next_wakeup_s() == 2.0);
  auto step = engine.step(2.0);
  CHECK(step.kind == StepKind::prefill);
  CHECK(engine.cancel(1));
  CHECK_FALSE(engine.cancel(1));
  CHECK(engine.step(2.0 + step.duration_s).kind == StepKind::idle);
}

TEST_CASE("sim batch engine: EAGLE-3 advances each request by its accept length") {
  BatchEngine engine(model_for(seed_args(true, true)), 3);
  engine.add(1, 10, 1000, 0.0, 0.0);
  double now = engine.step(0.0).duration_s;
  long tokens = 0;
  long passes = 0;
  for (int i = 0; i < 200; ++i) {
    const auto step = engine.step(now);
    now += step.duration_s;
    REQUIRE(step.emissions.size() == 1);
    CHECK(step.emissions[0].tokens >= 1);
    CHECK(step.emissions[0].tokens <= 3);
    tokens += step.tokens;
    passes += step.verify_passes;
  }
  CHECK(static_cast<double>(tokens) / passes == doctest::Approx(engine.model().mean_accept_length()).epsilon(0.01));
}
