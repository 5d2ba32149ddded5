#include <doctest/doctest.h>

#include <specctl/server/gpus.hpp>

using namespace specctl::server;

TEST_CASE("nvidia-smi --query-gpu") {
  auto gpus = parse_gpu_query("0, GPU-3e93a1b2-0000-0000-0000-000000000000, 22394, 143771\n"
                              "1, GPU-77aa0000-0000-0000-0000-000000000001, [N/A], 143771\n");
  REQUIRE(gpus);
  REQUIRE(gpus->size() == 2);
  CHECK((*gpus)[0].index == 0);
  CHECK((*gpus)[0].uuid == "GPU-3e93a1b2-0000-0000-0000-000000000000");
  CHECK((*gpus)[0].used_mib == 22394);
  CHECK((*gpus)[0].total_mib == 143771);
  CHECK_FALSE((*gpus)[1].used_mib.has_value());
  CHECK(parse_gpu_query("").value().empty());
  CHECK(parse_gpu_query("No devices were found\n").error() ==
        "unexpected nvidia-smi --query-gpu line \"No devices were found\"");
}

TEST_CASE("nvidia-smi --query-compute-apps") {
  auto apps = parse_compute_apps("20528, VLLM::Worker_TP0, 22394, GPU-3e93\n"
                                 "20529, sglang::scheduler_TP1, [N/A], GPU-77aa\n"
                                 "31337, /usr/bin/python3 -c a,b, 10, GPU-77aa\n");
  REQUIRE(apps);
  REQUIRE(apps->size() == 3);
  CHECK((*apps)[0].pid == 20528);
  CHECK((*apps)[0].name == "VLLM::Worker_TP0");
  CHECK((*apps)[0].used_mib == 22394);
  CHECK((*apps)[0].gpu_uuid == "GPU-3e93");
  CHECK_FALSE((*apps)[1].used_mib.has_value());
  CHECK((*apps)[2].name == "/usr/bin/python3 -c a,b");
  CHECK(parse_compute_apps("\n").value().empty());
  CHECK_FALSE(parse_compute_apps("x, y, z, w\n").has_value());
}
