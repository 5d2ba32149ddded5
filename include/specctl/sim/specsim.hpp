#pragma once

#include <specctl/sim/options.hpp>

namespace specctl::sim {

// specsim's entry point. The same binary is the server, the fake nvidia-smi
// (called through a link named nvidia-smi, or as `specsim nvidia-smi ...`)
// and, re-executed by the server, each TP worker. Errors end here as one
// "specsim: error: ..." line and a non-zero exit code.
int main(int argc, char** argv);

// Loads, listens and serves until stopped; returns the exit code.
int run_server(const Options& options);

} // namespace specctl::sim
