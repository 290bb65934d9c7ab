// fuzz_replay_main.cc — the main() a fuzz target gets in the normal builds
// (GCC, the ASan/UBSan build included): it runs LLVMFuzzerTestOneInput once
// on every file of the directories named on the command line — the seed
// corpus and the regression inputs of tests/fuzz — so every crash a fuzzer
// ever found is replayed by the ordinary test suite.  A directory that is
// missing or holds no file is an error (exit 2): a replay of nothing would
// pass for ever.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR...\n", argv[0]);
    return 2;
  }
  size_t inputs = 0;
  for (int a = 1; a < argc; ++a) {
    std::error_code ec;
    if (!fs::is_directory(argv[a], ec)) {
      std::fprintf(stderr, "%s: %s is not a directory\n", argv[0], argv[a]);
      return 2;
    }
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(argv[a]))
      if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
    if (files.empty()) {
      std::fprintf(stderr, "%s: %s holds no input\n", argv[0], argv[a]);
      return 2;
    }
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], f.c_str());
        return 2;
      }
      // A copy of exactly `size` bytes, so ASan sees a read past the end.
      std::vector<uint8_t> buf(bytes.begin(), bytes.end());
      LLVMFuzzerTestOneInput(buf.data(), buf.size());
      ++inputs;
    }
  }
  std::printf("%s: %zu inputs replayed, no failure\n", argv[0], inputs);
  return 0;
}
