// Errors, device enumeration and the per-thread current device.
#include <cstdlib>
#include <string>
#include <thread>

#include "../src/config.h"
#include "check.h"

OR_TEST(error_names_and_strings_cover_every_code) {
  const orError_t codes[] = {orSuccess,
                             orErrorInvalidValue,
                             orErrorMemoryAllocation,
                             orErrorInvalidDevice,
                             orErrorInvalidResourceHandle,
                             orErrorNotReady,
                             orErrorInvalidMemcpyDirection,
                             orErrorInvalidDevicePointer,
                             orErrorInitializationError,
                             orErrorLaunchFailure,
                             orErrorRuntimeUnloading,
                             orErrorNotPermitted,
                             orErrorUnknown};
  for (orError_t c : codes) {
    CHECK(std::string(orGetErrorName(c)).rfind("orError", 0) == 0 ||
          std::string(orGetErrorName(c)) == "orSuccess");
    CHECK(std::string(orGetErrorString(c)) != "unrecognized error code");
  }
  CHECK_EQ(std::string(orGetErrorName(orErrorInvalidDevice)), std::string("orErrorInvalidDevice"));
  CHECK_EQ(std::string(orGetErrorString(static_cast<orError_t>(12345))),
           std::string("unrecognized error code"));
}

OR_TEST(env_parsers_reject_garbage) {
  using namespace openreg;
  CHECK(parse_device_count("0") == 0);
  CHECK(parse_device_count("3") == 3);
  CHECK(!parse_device_count(""));
  CHECK(!parse_device_count("-1"));
  CHECK(!parse_device_count("2x"));
  CHECK(!parse_device_count(" 2"));
  CHECK(!parse_device_count("100000000000000000000000"));
  CHECK(!parse_device_count(nullptr));
  CHECK(parse_device_memory("4096") == std::size_t{4096});
  CHECK(parse_device_memory("1") == std::size_t{4096});  // rounded to a page
  CHECK(!parse_device_memory("0"));
  CHECK(!parse_device_memory("1G"));
}

// ctest runs this binary with different OPENREG_DEVICE_COUNT values and passes the
// count it expects in OPENREG_EXPECTED_COUNT.
OR_TEST(device_count_follows_environment) {
  const char* expected = std::getenv("OPENREG_EXPECTED_COUNT");
  const int want = expected ? std::atoi(expected) : 2;
  int n = -1;
  CHECK_OK(orGetDeviceCount(&n));
  CHECK_EQ(n, want);
  CHECK_ERR(orGetDeviceCount(nullptr), orErrorInvalidValue);
  CHECK_ERR(orSetDevice(n), orErrorInvalidDevice);
  CHECK_ERR(orSetDevice(-1), orErrorInvalidDevice);
  if (n == 0) {
    void* p = nullptr;
    CHECK_ERR(orMalloc(&p, 16), orErrorInvalidDevice);
    CHECK_ERR(orLaunchHostFunc(nullptr, [](void*) {}, nullptr), orErrorInvalidDevice);
    int d = -1;
    CHECK_ERR(orGetDevice(&d), orErrorInvalidDevice);
  }
}

OR_TEST(current_device_is_per_thread) {
  int n = 0;
  CHECK_OK(orGetDeviceCount(&n));
  if (n < 2) return;
  CHECK_OK(orSetDevice(1));
  int seen_in_thread = -1;
  std::thread([&] { orGetDevice(&seen_in_thread); }).join();
  CHECK_EQ(seen_in_thread, 0);  // a new thread starts on device 0
  int here = -1;
  CHECK_OK(orGetDevice(&here));
  CHECK_EQ(here, 1);
  CHECK_OK(orSetDevice(0));
}

OR_TEST_MAIN()
