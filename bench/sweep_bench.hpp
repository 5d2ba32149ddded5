#pragma once

// What the two scale-out benchmarks (bench/pool, bench/slurm) share: their
// options, the four-variant list with a port each, and the median.

#include "../tests/support/sshd.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <set>
#include <string>
#include <vector>

namespace specctl::bench_support {

// Either sweep should take at most this share of the single node's time.
inline constexpr double k_target_ratio = 0.60;

struct SweepOptions {
  int reps = 3;
  std::string specctl = SPECCTL_BINARY;
  std::string fake_gpu_bin = SPECSIM_FAKE_GPU_BIN;
  std::string load = "20s";
  int speed = 10;
  int requests = 16;
  int max_tokens = 128;
};

// False (after printing the usage) for a flag it does not know.
inline bool parse_options(int argc, char** argv, SweepOptions& options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool known = i + 1 < argc;
    std::string value = known ? argv[++i] : "";
    if (arg == "--reps") {
      options.reps = std::max(1, std::atoi(value.c_str()));
    } else if (arg == "--load") {
      options.load = value;
    } else if (arg == "--speed") {
      options.speed = std::max(1, std::atoi(value.c_str()));
    } else if (arg == "--requests") {
      options.requests = std::max(1, std::atoi(value.c_str()));
    } else if (arg == "--max-tokens") {
      options.max_tokens = std::max(1, std::atoi(value.c_str()));
    } else if (arg == "--specctl") {
      options.specctl = value;
    } else if (arg == "--fake-gpu-bin") {
      options.fake_gpu_bin = value;
    } else {
      known = false;
    }
    if (!known) {
      std::fprintf(stderr,
                   "usage: %s [--reps N] [--load DURATION] [--speed X] [--requests N] [--max-tokens N]\n"
                   "          [--specctl PATH] [--fake-gpu-bin DIR]\n",
                   argv[0]);
      return false;
    }
  }
  return true;
}

// The variants' lines of the experiment, each on a port of its own: every
// "node" is this machine, so two servers on one port would collide.
inline std::string four_variants() {
  std::set<int> ports;
  while (ports.size() < 4) {
    ports.insert(test::free_port());
  }
  std::string lines;
  auto port = ports.begin();
  for (const char* name : {"baseline", "eagle3-steps2", "eagle3-steps3", "ngram"}) {
    lines += fmt::format("  - {{name: {}, port: {}}}\n", name, *port++);
  }
  return lines;
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

} // namespace specctl::bench_support
