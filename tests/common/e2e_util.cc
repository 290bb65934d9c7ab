#include "tests/common/e2e_util.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace flowclass {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

void WritePcap(const std::string& path,
               const std::vector<std::vector<uint8_t>>& frames) {
  std::ofstream out(path, std::ios::binary);
  const uint32_t hdr[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  out.write(reinterpret_cast<const char*>(hdr), sizeof(hdr));
  uint32_t i = 0;
  for (const auto& f : frames) {
    const uint32_t rec[4] = {i / 1000000, i % 1000000,
                             static_cast<uint32_t>(f.size()),
                             static_cast<uint32_t>(f.size())};
    ++i;
    out.write(reinterpret_cast<const char*>(rec), sizeof(rec));
    out.write(reinterpret_cast<const char*>(f.data()),
              static_cast<std::streamsize>(f.size()));
  }
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
  path_ = mkdtemp(tmpl.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(path_, ec);
}

}  // namespace flowclass
