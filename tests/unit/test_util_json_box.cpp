#include <doctest/doctest.h>

#include <specctl/util/json_box.hpp>

#include <nlohmann/json.hpp>

#include <utility>

using specctl::util::JsonBox;

TEST_CASE("a JSON box holds null until set, and a copy is a value of its own") {
  JsonBox empty;
  CHECK(empty->is_null());

  JsonBox list(nlohmann::json::array({1, 2, 4}));
  JsonBox copy = list;
  CHECK(*copy == nlohmann::json::array({1, 2, 4}));
  // The copy and the original share nothing: assigning one leaves the other.
  copy = JsonBox(nlohmann::json("fa3"));
  CHECK(*copy == "fa3");
  CHECK(*list == nlohmann::json::array({1, 2, 4}));

  JsonBox moved = std::move(list);
  CHECK(*moved == nlohmann::json::array({1, 2, 4}));
  // A box moved from takes a value again.
  list = moved;
  CHECK(*list == *moved);
  list = JsonBox(nlohmann::json(0.9));
  CHECK(*moved == nlohmann::json::array({1, 2, 4}));
}
