// What the client costs: runs one closed-loop level against a server (meant:
// specsim --sim-profile flood, which streams as fast as it can) and reports
// the client's CPU per event and per token, its speed per client core, and
// its peak resident memory. Usage:
//   specctl_client_speed URL STREAMS REQUESTS MAX_TOKENS [completions|chat]
// Prints one JSON object. See README.md; run.sh drives it.

#include <specctl/bench/bench.hpp>
#include <specctl/bench/prompts.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/resource.h>

using namespace specctl::bench;

namespace {

constexpr std::chrono::minutes k_request_timeout{5};

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Peak resident set (VmHWM) in MiB.
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) {
      return std::stod(line.substr(6)) / 1024.0;
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: specctl_client_speed URL STREAMS REQUESTS MAX_TOKENS [completions|chat]\n";
    return 2;
  }
  const std::string url = argv[1];
  const int streams = std::atoi(argv[2]);
  const int requests = std::atoi(argv[3]);
  RunOptions options;
  options.prompts = plain_requests(seed_prompts());
  options.request.max_tokens = std::atoi(argv[4]);
  options.request.endpoint = argc > 5 && std::string(argv[5]) == "chat" ? Endpoint::chat : Endpoint::completions;
  options.request.timeout = k_request_timeout;
  options.warmup = 1;
  try {
    const double cpu_before = process_cpu_seconds();
    const auto result = run_concurrency(Target{url, "", ""}, ConcurrencyOptions{options, {streams}, requests});
    const double cpu = process_cpu_seconds() - cpu_before;
    const LevelResult& level = result.levels.at(0);
    const double events = static_cast<double>(level.events);
    const nlohmann::json out = {
        {"client", "specctl"},
        {"streams", streams},
        {"requests", level.requests},
        {"completed", level.completed},
        {"failed", level.failed},
        {"output_tokens", level.output_tokens},
        {"events", level.events},
        {"wall_s", level.duration_s},
        {"output_tok_s", level.output_tok_s},
        {"loop_cpu_s", level.client_cpu_s},
        {"process_cpu_s", cpu},
        {"cpu_us_per_event", events > 0 ? level.client_cpu_s * 1e6 / events : 0.0},
        {"cpu_us_per_token", level.output_tokens > 0 ? level.client_cpu_s * 1e6 / level.output_tokens : 0.0},
        {"tokens_per_client_cpu_s", level.client_cpu_s > 0 ? level.output_tokens / level.client_cpu_s : 0.0},
        {"peak_rss_mib", peak_rss_mib()},
    };
    std::cout << out.dump() << '\n';
    return level.failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "specctl_client_speed: " << e.what() << '\n';
    return 1;
  }
}
