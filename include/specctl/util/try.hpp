#pragma once

// The one way an error travels up (error.hpp: low layers return std::expected,
// high layers throw):
//
//   auto text = SPECCTL_TRY(read(path));     // in a function returning std::expected<_, Error>:
//                                            // the value, or that function returns the error
//   auto text = util::value_or_throw(read(path));   // where errors are thrown: the value, or throws
//
// Instead of writing `if (!x) return std::unexpected(x.error());` by hand.

#include <specctl/util/error.hpp>

#include <expected>
#include <utility>

// A GNU statement expression (g++ and clang++; __extension__ keeps -Wpedantic
// quiet). Not nested in its own argument: the inner one would shadow the outer.
#define SPECCTL_TRY(...)                                                                                               \
  __extension__({                                                                                                      \
    auto&& specctl_try_result_ = (__VA_ARGS__);                                                                        \
    if (!specctl_try_result_) {                                                                                        \
      return std::unexpected(std::move(specctl_try_result_).error());                                                  \
    }                                                                                                                  \
    std::move(specctl_try_result_).value();                                                                            \
  })

namespace specctl::util {

template <typename T> T value_or_throw(std::expected<T, Error> value) {
  if (!value) {
    throw std::move(value).error();
  }
  if constexpr (!std::is_void_v<T>) {
    return std::move(*value);
  }
}

} // namespace specctl::util
