// libFuzzer target for the rule store's reader (server/store/rule_store.h):
// the bytes of DIR/rules.db, untrusted, as flowclassd finds them on start.
// Each input is written to a private directory (no -wal beside it) and
// opened and loaded as the daemon does.
//
// Invariants (any violation aborts):
//   1. Load returns a state or an error of the documented codes (DATA_LOSS,
//      FAILED_PRECONDITION, INTERNAL, UNAVAILABLE) with a bounded printable
//      message; never a crash, a hang or an exception.
//   2. A store Load refuses is left as it was: rules.db holds the same bytes
//      afterwards.
//   3. A state is sorted by id, without duplicates.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "server/store/rule_store.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

const std::string& Dir() {
  static const std::string dir = [] {
    std::string t = (std::filesystem::temp_directory_path() / "flowclass-store-fuzz-XXXXXX").string();
    if (mkdtemp(t.data()) == nullptr) std::abort();
    // Removed at exit: every fuzz run and every ctest replay used to leave
    // one behind in /tmp.
    static const std::string* const remove_at_exit = new std::string(t);  // never destroyed
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*remove_at_exit, ec);
    });
    return t;
  }();
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flowclass;
  using fuzz::Check;
  namespace fs = std::filesystem;
  if (size == 0) return 0;  // an absent store is created, not read
  const std::string dir = Dir();
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
  const std::string db = dir + "/rules.db";
  {
    std::ofstream out(db, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  absl::StatusOr<std::unique_ptr<RuleStore>> store = RuleStore::Open(dir);
  if (!store.ok()) {
    fuzz::CheckErrorMessage(store.status(), 1024);
    return 0;
  }
  absl::StatusOr<RuleStoreState> state = (*store)->Load();
  store->reset();
  if (!state.ok()) {
    const absl::StatusCode c = state.status().code();
    Check(c == absl::StatusCode::kDataLoss || c == absl::StatusCode::kFailedPrecondition ||
              c == absl::StatusCode::kInternal || c == absl::StatusCode::kUnavailable,
          "Load's error code is one of the documented ones");
    fuzz::CheckErrorMessage(state.status(), 1024);
    Check(ReadAll(db) == std::string(reinterpret_cast<const char*>(data), size),
          "a refused store is left unchanged");
    return 0;
  }
  for (size_t i = 1; i < state->rules.size(); ++i)
    Check(state->rules[i - 1].id < state->rules[i].id, "rules sorted by id, no duplicates");
  return 0;
}
