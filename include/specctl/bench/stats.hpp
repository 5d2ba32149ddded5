#pragma once

// Summaries of latency samples, computed the way vLLM's `bench serve` does
// (numpy percentiles with linear interpolation, population stdev), so numbers compare.

#include <cstddef>
#include <vector>

namespace specctl::bench {

struct Summary {
  std::size_t count = 0;
  // Meaningless when count is 0 (summarize() makes them NaN; JSON shows null).
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double stdev = 0;
  double min = 0;
  double max = 0;
};

// Sorts `samples` in place and summarises them.
Summary summarize(std::vector<double>& samples);

// The p-th percentile (0..100) of sorted samples, interpolating linearly
// between closest ranks (numpy's default). NaN for no samples.
double percentile(const std::vector<double>& sorted, double p);

double mean(const std::vector<double>& samples);
// The median, interpolated for an even count; sorts a copy.
double median(std::vector<double> samples);
// Population stdev (ddof 0), as vLLM reports latency spread.
double population_stdev(const std::vector<double>& samples);
// Sample stdev (ddof 1), for run-to-run spread of a few runs; 0 for fewer than 2.
double sample_stdev(const std::vector<double>& samples);

} // namespace specctl::bench
