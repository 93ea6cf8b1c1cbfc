// A minimal test harness: OR_TEST registers a case, CHECK* record failures and keep
// going, main() runs all cases (or the ones named on the command line).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "openreg.h"

namespace ortest {

struct Case {
  const char* name;
  void (*fn)();
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

inline int& failures() {
  static int n = 0;
  return n;
}

struct Registrar {
  Registrar(const char* name, void (*fn)()) { cases().push_back({name, fn}); }
};

template <typename T>
std::string to_text(const T& v) {
  if constexpr (std::is_convertible_v<T, std::string>) {
    return std::string(v);
  } else if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<long long>(v));
  } else {
    return std::to_string(v);
  }
}

inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
  ++failures();
}

inline int run_all(int argc, char** argv) {
  int ran = 0;
  for (const Case& c : cases()) {
    bool selected = argc <= 1;
    for (int i = 1; i < argc; ++i) selected = selected || std::strcmp(argv[i], c.name) == 0;
    if (!selected) continue;
    const int before = failures();
    c.fn();
    ++ran;
    std::printf("[%s] %s\n", failures() == before ? "  OK  " : "FAILED", c.name);
  }
  std::printf("%d case(s), %d failed check(s)\n", ran, failures());
  return (failures() == 0 && ran > 0) ? 0 : 1;
}

}  // namespace ortest

#define OR_TEST(name)                                              \
  static void name();                                              \
  static ortest::Registrar name##_registrar(#name, &name);         \
  static void name()

#define CHECK(cond)                                                \
  do {                                                             \
    if (!(cond)) ortest::fail(__FILE__, __LINE__, #cond);          \
  } while (0)

#define CHECK_EQ(a, b)                                                               \
  do {                                                                               \
    const auto va_ = (a);                                                            \
    const auto vb_ = (b);                                                            \
    if (!(va_ == vb_)) {                                                             \
      ortest::fail(__FILE__, __LINE__,                                               \
                   std::string(#a " == " #b " (") + ortest::to_text(va_) + " vs " +   \
                       ortest::to_text(vb_) + ")");                                   \
    }                                                                                \
  } while (0)

// Compares orError_t values and prints their names.
#define CHECK_ERR(expr, expected)                                                    \
  do {                                                                               \
    const orError_t got_ = (expr);                                                   \
    if (got_ != (expected)) {                                                        \
      ortest::fail(__FILE__, __LINE__,                                               \
                   std::string(#expr " returned ") + orGetErrorName(got_) +          \
                       ", expected " + orGetErrorName(expected));                    \
    }                                                                                \
  } while (0)

#define CHECK_OK(expr) CHECK_ERR(expr, orSuccess)

#define OR_TEST_MAIN() \
  int main(int argc, char** argv) { return ortest::run_all(argc, argv); }
