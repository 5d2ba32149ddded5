#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <regex>

using namespace specctl::sim;

TEST_CASE("sim log: tqdm's bar, exactly") {
  const std::string_view bar = "Loading safetensors checkpoint shards";
  CHECK(progress_line(bar, 0, 64, 0.0) ==
        "Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]");
  CHECK(progress_line(bar, 29, 64, 27.6) ==
        "Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:27<00:33,  1.05it/s]");
  CHECK(progress_line(bar, 64, 64, 60.95) ==
        "Loading safetensors checkpoint shards: 100% Completed | 64/64 [01:00<00:00,  1.05it/s]");
  // Slower than one item a second, tqdm shows seconds per item.
  CHECK(progress_line(bar, 10, 64, 131.2) ==
        "Loading safetensors checkpoint shards:  16% Completed | 10/64 [02:11<11:48, 13.12s/it]");
  CHECK(progress_line(bar, 1, 1, 0.5) ==
        "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00,  2.00it/s]");
}

TEST_CASE("sim log: tqdm's intervals and Python's floats") {
  CHECK(tqdm_interval(0.0) == "00:00");
  CHECK(tqdm_interval(307.9) == "05:07");
  CHECK(tqdm_interval(3723.0) == "1:02:03");
  CHECK(python_float(1.0) == "1.0");
  CHECK(python_float(92.6) == "92.6");
  CHECK(python_float(0.05) == "0.05");
  CHECK(python_float(1234.0) == "1234.0");
  CHECK(python_float(1e-7) == "1e-07");
}

TEST_CASE("sim log: SGLang's prefix") {
  const auto now = std::chrono::system_clock::now();
  CHECK(std::regex_match(log_prefix(now, 0), std::regex(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] )")));
  CHECK(std::regex_match(log_prefix(now, std::nullopt), std::regex(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] )")));
}

TEST_CASE("sim log: lines are written whole, levels filter") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  {
    const Log log(LogLevel::warning, fds[1], fds[1]);
    log.scheduler(LogLevel::info, "hidden");
    log.scheduler(LogLevel::warning, "shown", 3);
    log.uvicorn(LogLevel::error, "[Errno 98] busy");
    log.raw("bar");
  }
  ::close(fds[1]);
  std::string out;
  char buffer[512];
  for (ssize_t n = 0; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) {
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  CHECK(out.find("hidden") == std::string::npos);
  CHECK(out.find(" TP3] shown\n") != std::string::npos);
  CHECK(out.find("] ERROR:    [Errno 98] busy\n") != std::string::npos);
  CHECK(out.ends_with("bar\n"));
}

TEST_CASE("sim metrics: Prometheus text with SGLang's names") {
  ServingStats stats;
  stats.running = 2;
  stats.generation_tokens_total = 1234;
  stats.spec_accept_length = 1.97;
  stats.time_to_first_token.observe(0.15);
  stats.time_to_first_token.observe(3.0);
  const auto text = render_metrics(stats, "/models/K", true);
  CHECK(text.find("# HELP sglang:num_running_reqs The number of running requests.\n"
                  "# TYPE sglang:num_running_reqs gauge\n"
                  "sglang:num_running_reqs{model_name=\"/models/K\"} 2.0\n") != std::string::npos);
  CHECK(text.find("sglang:generation_tokens_total{model_name=\"/models/K\"} 1234.0\n") != std::string::npos);
  CHECK(text.find("sglang:spec_accept_length{model_name=\"/models/K\"} 1.97\n") != std::string::npos);
  CHECK(text.find("sglang:time_to_first_token_seconds_bucket{model_name=\"/models/K\",le=\"0.2\"} 1.0\n") !=
        std::string::npos);
  CHECK(text.find("sglang:time_to_first_token_seconds_bucket{model_name=\"/models/K\",le=\"4.0\"} 2.0\n") !=
        std::string::npos);
  CHECK(text.find("sglang:time_to_first_token_seconds_count{model_name=\"/models/K\"} 2.0\n") != std::string::npos);
  CHECK(render_metrics(stats, "m", false).find("spec_accept") == std::string::npos);
}
