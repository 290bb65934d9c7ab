#include "dataplane/dpcls/subtable_lookup.h"

#include <atomic>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quote.h"
#include "dataplane/dpcls/internal/subtable.h"

namespace flowclass {

namespace {

constexpr const char* kNames[kLookupImplCount] = {"generic", "specialised",
                                                  "avx512", "autovalidator"};
constexpr const char* kAvx512Isa =
    "avx512f+avx512bw+avx512vl+avx512dq+bmi2+popcnt";

std::atomic<uint64_t> g_mismatches{0};
std::atomic<LookupMismatchHook> g_hook{nullptr};

// Log rate limit: the first kLogBurst differences, then one per second.
constexpr int kLogBurst = 5;
std::atomic<uint64_t> g_logged{0};
std::atomic<int64_t> g_last_log_ns{0};

bool NeedsIsa(LookupImplId id) { return id == LookupImplId::kAvx512; }

bool Usable(LookupImplId id, const LookupPriorities& p) {
  if (!LookupImplAvailable(id)) return false;
  return !(p.force_scalar && NeedsIsa(id));
}

// The function `id` would use for st's shape, or nullptr when its probe
// rejects the shape.  The autovalidator's probe is handled by the caller.
internal::SubtableLookupFn Probe(LookupImplId id,
                                 const internal::SubtableDesc& st) {
  switch (id) {
    case LookupImplId::kGeneric:
      return &internal::SubtableLookupGeneric;
    case LookupImplId::kSpecialised:
      return internal::SpecialisedLookupFor(st.n_words);
    case LookupImplId::kAvx512:
      return st.n_words >= 1 && st.n_words <= kFlowWords
                 ? &internal::SubtableLookupAvx512
                 : nullptr;
    case LookupImplId::kAutovalidator:
      return &internal::SubtableLookupAutovalidator;
  }
  return nullptr;
}

[[gnu::cold]] [[gnu::noinline]] void ReportMismatch(const LookupMismatch& m) {
  g_mismatches.fetch_add(1, std::memory_order_relaxed);
  const uint64_t n = g_logged.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = g_last_log_ns.load(std::memory_order_relaxed);
  const bool log =
      n < kLogBurst || (now - last >= 1'000'000'000 &&
                        g_last_log_ns.compare_exchange_strong(last, now));
  if (log) {
    if (n < kLogBurst) g_last_log_ns.store(now, std::memory_order_relaxed);
    std::fprintf(stderr,
                 "flowclass: lookup autovalidator: %s differs from generic "
                 "on subtable %u (%d words): todo=%#x generic hits=%#x %s "
                 "hits=%#x, first differing key %d (%llu differences so "
                 "far)\n",
                 m.impl, m.subtable, m.n_words, m.todo_map, m.generic_hits,
                 m.impl, m.impl_hits, m.key_index,
                 static_cast<unsigned long long>(
                     g_mismatches.load(std::memory_order_relaxed)));
  }
  if (LookupMismatchHook hook = g_hook.load(std::memory_order_acquire))
    hook(m);
}

}  // namespace

const char* LookupImplName(LookupImplId id) {
  return kNames[static_cast<int>(id)];
}

absl::StatusOr<LookupImplId> ParseLookupImpl(std::string_view name) {
  for (int i = 0; i < kLookupImplCount; ++i)
    if (name == kNames[i]) return static_cast<LookupImplId>(i);
  return absl::InvalidArgumentError(absl::StrCat(
      "lookup implementation: unknown name ",
      QuoteForMessage(absl::string_view(name.data(), name.size())), " (generic, specialised, avx512 or autovalidator)"));
}

absl::Status LookupPriorities::Set(std::string_view name, int prio) {
  absl::StatusOr<LookupImplId> id = ParseLookupImpl(name);
  if (!id.ok()) return id.status();
  if (prio < 0 || prio > kMaxLookupPriority)
    return absl::InvalidArgumentError(
        absl::StrCat("lookup priority of ", std::string(name), ": must be in [0, ",
                     kMaxLookupPriority, "], got ", prio));
  priority[static_cast<int>(*id)] = prio;
  return absl::OkStatus();
}

absl::StatusOr<int> LookupPriorities::Get(std::string_view name) const {
  absl::StatusOr<LookupImplId> id = ParseLookupImpl(name);
  if (!id.ok()) return id.status();
  return Get(*id);
}

absl::StatusOr<LookupPriorities> LookupPriorities::Only(
    std::string_view name) {
  absl::StatusOr<LookupImplId> id = ParseLookupImpl(name);
  if (!id.ok()) return id.status();
  LookupPriorities p;
  p.priority.fill(0);
  p.priority[static_cast<int>(LookupImplId::kGeneric)] = 1;
  p.priority[static_cast<int>(*id)] = kMaxLookupPriority;
  return p;
}

std::string LookupPriorities::ToString() const {
  std::string out;
  for (int i = 0; i < kLookupImplCount; ++i)
    absl::StrAppend(&out, i ? " " : "", kNames[i], "=", priority[i]);
  if (force_scalar) out += " force_scalar";
  return out;
}

bool CpuHasAvx512Lookup() {
  // Every extension the _avx512.cc file is compiled with: the compiler may
  // use any of them anywhere in that file.  libgcc also checks XCR0 (the OS
  // saves the ZMM state) before reporting avx512*.
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("bmi2") &&
      __builtin_cpu_supports("popcnt");
  return has;
}

bool LookupImplAvailable(LookupImplId id) {
  return NeedsIsa(id) ? CpuHasAvx512Lookup() : true;
}

std::vector<LookupImplStatus> ListLookupImpls(const LookupPriorities& p) {
  std::vector<LookupImplStatus> out;
  for (int i = 0; i < kLookupImplCount; ++i) {
    const LookupImplId id = static_cast<LookupImplId>(i);
    LookupImplStatus s;
    s.name = kNames[i];
    s.priority = p.priority[i];
    s.isa = NeedsIsa(id) ? kAvx512Isa : "";
    s.available = Usable(id, p);
    out.push_back(std::move(s));
  }
  return out;
}

uint64_t LookupMismatchesTotal() {
  return g_mismatches.load(std::memory_order_relaxed);
}

LookupMismatchHook SetLookupMismatchHook(LookupMismatchHook hook) {
  return g_hook.exchange(hook, std::memory_order_acq_rel);
}

namespace internal {

LookupImplInfo ChooseLookup(SubtableDesc& st, const LookupSelection& sel) {
  const LookupPriorities& p = sel.priorities;
  LookupImplInfo best = {kNames[0], &SubtableLookupGeneric};
  int best_prio = 0;
  for (int i = 0; i < kLookupImplCount; ++i) {
    const LookupImplId id = static_cast<LookupImplId>(i);
    const int prio = p.priority[i];
    if (prio <= best_prio || !Usable(id, p)) continue;
    SubtableLookupFn fn = Probe(id, st);
    if (fn == nullptr) continue;
    best = {kNames[i], fn};
    best_prio = prio;
  }

  st.n_validated = 0;
  st.mismatches = sel.mismatches;
  if (best.fn == &SubtableLookupAutovalidator) {
    // Every other eligible implementation, whatever its priority.
    for (int i = 0; i < kLookupImplCount; ++i) {
      const LookupImplId id = static_cast<LookupImplId>(i);
      if (id == LookupImplId::kGeneric || id == LookupImplId::kAutovalidator ||
          !Usable(id, p))
        continue;
      if (SubtableLookupFn fn = Probe(id, st)) {
        st.validated[st.n_validated] = fn;
        st.validated_name[st.n_validated] = kNames[i];
        ++st.n_validated;
      }
    }
    if (sel.extra_validated != nullptr) {
      st.validated[st.n_validated] = sel.extra_validated;
      st.validated_name[st.n_validated] = sel.extra_validated_name;
      ++st.n_validated;
    }
  }
  st.lookup = best.fn;
  st.lookup_name = best.name;
  return best;
}

uint32_t SubtableLookupAutovalidator(const SubtableDesc& st,
                                     const Table& table, const FlowKey* keys,
                                     uint32_t todo_map, Megaflow** out,
                                     MegaflowPool& pool) {
  Megaflow* ref[kMaxBurst];
  const uint32_t hits =
      SubtableLookupGeneric(st, table, keys, todo_map, ref, pool);
  for (int v = 0; v < st.n_validated; ++v) {
    Megaflow* got[kMaxBurst];
    for (Megaflow*& g : got) g = nullptr;
    const uint32_t got_hits =
        st.validated[v](st, table, keys, todo_map, got, pool);
    uint32_t bad = (got_hits ^ hits) | (got_hits & ~todo_map);
    for (uint32_t m = hits & got_hits; m != 0; m &= m - 1) {
      const int i = std::countr_zero(m);
      if (got[i] != ref[i]) bad |= 1u << i;
    }
    // A variant must not write outside its hits either.
    for (uint32_t m = ~got_hits; m != 0; m &= m - 1) {
      const int i = std::countr_zero(m);
      if (got[i] != nullptr) bad |= 1u << i;
    }
    if (bad != 0) [[unlikely]] {
      if (st.mismatches != nullptr) ++*st.mismatches;
      LookupMismatch mm;
      mm.impl = st.validated_name[v];
      mm.subtable = st.id;
      mm.n_words = st.n_words;
      mm.todo_map = todo_map;
      mm.generic_hits = hits;
      mm.impl_hits = got_hits;
      mm.key_index = std::countr_zero(bad);
      ReportMismatch(mm);
    }
  }
  for (uint32_t m = hits; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    out[i] = ref[i];
  }
  return hits;
}

}  // namespace internal
}  // namespace flowclass
