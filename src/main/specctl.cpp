#include <specctl/cli/main.hpp>

int main(int argc, char** argv) {
  return specctl::cli::main(argc, argv);
}
