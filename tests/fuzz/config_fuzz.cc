// libFuzzer target for flowclassd's config file (server/config.h): YAML text
// through ParseConfig, as `flowclassd -c` and `--check-config` read it.
// ParseConfig touches no file and makes no DPDK or gRPC call.
//
// Invariants (any violation aborts):
//   1. yaml-cpp's exceptions never escape (a throw reaches libFuzzer as a
//      crash), nothing loops for ever (libFuzzer's -timeout), and an error
//      is one bounded line of printable text (fuzz_check.h).
//   2. A config that parses can be described (what --check-config prints).
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flowclass;
  if (size > 1 << 16) return 0;  // a config is small; yaml-cpp is not the target
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<DaemonConfig> c = ParseConfig(text, {}, "fuzz.yaml");
  if (!c.ok()) {
    fuzz::CheckErrorMessage(c.status(), 1024);
    return 0;
  }
  fuzz::Check(!DescribeConfig(*c).empty(), "DescribeConfig of a parsed config");
  return 0;
}
