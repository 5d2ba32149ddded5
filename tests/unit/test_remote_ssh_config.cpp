#include <doctest/doctest.h>

#include <specctl/remote/ssh_config.hpp>

using specctl::remote::lookup_ssh_config;

TEST_CASE("ssh config lookup follows OpenSSH's first-match rules") {
  const char* config = R"(# global defaults come first in effect only where nothing more specific was said
Host gpu1
  HostName 10.1.230.174
  User root
  Port 2222
  IdentityFile ~/.ssh/gpu_ed25519

Host gpu* !gpu-bastion
  User ubuntu
  HostName %h.cluster.internal

Host "quoted"
  HostName=quoted.example

Host *
  User fallback
  Port 22
)";
  SUBCASE("exact alias, first value wins") {
    auto e = lookup_ssh_config(config, "gpu1");
    CHECK(e.hostname == "10.1.230.174");
    CHECK(e.user == "root");
    CHECK(e.port == 2222);
    CHECK(e.identity_file == "~/.ssh/gpu_ed25519");
  }
  SUBCASE("glob with %h") {
    auto e = lookup_ssh_config(config, "gpu7");
    CHECK(e.hostname == "gpu7.cluster.internal");
    CHECK(e.user == "ubuntu");
    CHECK(e.port == 22);
    CHECK_FALSE(e.identity_file.has_value());
  }
  SUBCASE("negation") {
    auto e = lookup_ssh_config(config, "gpu-bastion");
    CHECK_FALSE(e.hostname.has_value());
    CHECK(e.user == "fallback");
  }
  SUBCASE("key=value and quotes") {
    CHECK(lookup_ssh_config(config, "quoted").hostname == "quoted.example");
  }
  SUBCASE("unknown host only gets the catch-all") {
    auto e = lookup_ssh_config(config, "elsewhere");
    CHECK_FALSE(e.hostname.has_value());
    CHECK(e.user == "fallback");
  }
}
