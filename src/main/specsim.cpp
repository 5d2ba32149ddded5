#include <specctl/sim/specsim.hpp>

int main(int argc, char** argv) {
  return specctl::sim::main(argc, argv);
}
