#pragma once

// Test helper: runs a command line through /bin/sh and splits its output at NUL bytes.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace specctl::test {

inline std::vector<std::string> run_shell(const std::string& line) {
  auto script = std::filesystem::temp_directory_path() / ("specctl-test-" + std::to_string(getpid()) + ".sh");
  {
    std::ofstream out(script);
    out << line << '\n';
  }
  std::string command = "/bin/sh " + script.string();
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  if (pipe != nullptr) {
    char buffer[4096];
    std::size_t n = 0;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
      output.append(buffer, n);
    }
    pclose(pipe);
  }
  std::filesystem::remove(script);
  std::vector<std::string> words;
  std::string current;
  for (char c : output) {
    if (c == '\0') {
      words.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  return words;
}

} // namespace specctl::test
