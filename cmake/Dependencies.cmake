# Debian packages only (12 and 13); scripts/setup.sh installs them.
find_package(Threads REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
# Boost's own BoostConfig.cmake (CMake 3.30 and later drop the FindBoost module).
find_package(Boost 1.81 CONFIG REQUIRED)
find_package(CURL REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBSSH2 REQUIRED IMPORTED_TARGET libssh2)
