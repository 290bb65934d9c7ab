// e2e_util.h — small helpers shared by the end-to-end tests that run real
// processes (flowclassd, flowclassctl, prometheus): files, pcaps, temp dirs.
#ifndef FLOWCLASS_TESTS_COMMON_E2E_UTIL_H_
#define FLOWCLASS_TESTS_COMMON_E2E_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace flowclass {

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);
// A classic (microsecond) pcap file of Ethernet frames.
void WritePcap(const std::string& path,
               const std::vector<std::vector<uint8_t>>& frames);

// A fresh directory /tmp/<prefix>_XXXXXX, removed at destruction unless the
// current test failed (so its files can be inspected).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_E2E_UTIL_H_
