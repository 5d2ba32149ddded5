#pragma once

namespace specctl::cli {

// Parses the command line, runs one subcommand and maps any specctl::Error to an exit code.
int main(int argc, char** argv);

} // namespace specctl::cli
