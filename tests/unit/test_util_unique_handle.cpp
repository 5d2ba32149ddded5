#include <doctest/doctest.h>

#include <specctl/util/unique_fd.hpp>
#include <specctl/util/unique_handle.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <utility>

namespace {

struct Thing {
  int id = 0;
};

int g_freed = 0;

void free_thing(Thing* thing) {
  ++g_freed;
  delete thing;
}

// Release functions that answer with a code are accepted too.
int free_thing_with_code(Thing* thing) {
  free_thing(thing);
  return -1;
}

bool is_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

} // namespace

TEST_CASE("util::UniqueHandle frees once") {
  using specctl::util::UniqueHandle;
  g_freed = 0;
  SUBCASE("on destruction, never when null") {
    {
      UniqueHandle<Thing, free_thing> owner(new Thing{1});
      UniqueHandle<Thing, free_thing> empty;
      CHECK(owner);
      CHECK_FALSE(empty);
      CHECK(owner->id == 1);
    }
    CHECK(g_freed == 1);
  }
  SUBCASE("a move hands the object over") {
    UniqueHandle<Thing, free_thing_with_code> first(new Thing{2});
    auto second = std::move(first);
    CHECK_FALSE(first);
    CHECK(second.get()->id == 2);
    second.reset();
    CHECK(g_freed == 1);
  }
  SUBCASE("release gives up ownership") {
    UniqueHandle<Thing, free_thing> owner(new Thing{3});
    Thing* raw = owner.release();
    CHECK_FALSE(owner);
    CHECK(g_freed == 0);
    free_thing(raw);
  }
}

TEST_CASE("util::UniqueFd closes once") {
  using specctl::util::UniqueFd;
  int ends[2];
  REQUIRE(::pipe2(ends, O_CLOEXEC) == 0);
  const int read_end = ends[0];
  const int write_end = ends[1];
  {
    UniqueFd reader(read_end);
    UniqueFd moved = std::move(reader);
    CHECK_FALSE(reader);
    CHECK(moved.get() == read_end);
    UniqueFd writer(write_end);
    CHECK(writer.release() == write_end);
    CHECK_FALSE(writer);
  }
  CHECK_FALSE(is_open(read_end));
  CHECK(is_open(write_end));
  UniqueFd(write_end).reset();
  CHECK_FALSE(is_open(write_end));
}
