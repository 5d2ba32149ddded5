# One INTERFACE target carries the language standard, warnings and sanitizers.
add_library(specctl_options INTERFACE)
target_compile_features(specctl_options INTERFACE cxx_std_23)
set(CMAKE_CXX_EXTENSIONS OFF)
target_compile_options(specctl_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                                 -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual)
if(SPECCTL_WERROR)
  target_compile_options(specctl_options INTERFACE -Werror)
endif()
if(SPECCTL_SANITIZE)
  target_compile_options(specctl_options INTERFACE -fsanitize=${SPECCTL_SANITIZE} -fno-omit-frame-pointer
                                                   -fno-sanitize-recover=all)
  # Not position-independent: a sanitized specsim carries 3.4 million relative
  # relocations (the sanitizers' descriptors of every global and check), which the
  # loader applied at each start, 0.6 s of a test's every specsim, nvidia-smi and
  # specctl; without PIE they are resolved at link time (0.3 s a start).
  target_link_options(specctl_options INTERFACE -fsanitize=${SPECCTL_SANITIZE} -no-pie)
endif()
