// classbench_data.h — where the tests and benchmarks find the ClassBench
// sets: tests/data/classbench, staged into BUILD/classbench at configure
// time (CMake's FLOWCLASS_CLASSBENCH_DIR, compiled in), unless the
// environment variable FLOWCLASS_CLASSBENCH_DIR names another directory of
// the same layout.  A missing file is the reading test's failure, with the
// path in its message: no test skips for want of data.
#ifndef FLOWCLASS_TESTS_COMMON_CLASSBENCH_DATA_H_
#define FLOWCLASS_TESTS_COMMON_CLASSBENCH_DATA_H_

#include <cstdlib>
#include <string>

#ifndef FLOWCLASS_CLASSBENCH_DIR
#error "FLOWCLASS_CLASSBENCH_DIR is defined by CMake for tests and benchmarks"
#endif

namespace flowclass {

// The data directory, without a trailing slash.
inline std::string ClassBenchDir() {
  const char* env = std::getenv("FLOWCLASS_CLASSBENCH_DIR");
  return (env != nullptr && *env != '\0') ? std::string(env)
                                          : std::string(FLOWCLASS_CLASSBENCH_DIR);
}

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_CLASSBENCH_DATA_H_
