// Tests of the subtable lookup implementations (generic, specialised, avx512,
// autovalidator) and their selection.  The typed tests run the same
// assertions through a real MegaflowClassifier forced to each
// implementation; an ISA the CPU lacks is skipped with a message.
#include "dataplane/dpcls/subtable_lookup.h"

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/dpcls/megaflow_classifier.h"
#include "dataplane/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/megaflow_testing.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kScale = 1;  // ASan: fewer rounds, same coverage
#else
constexpr int kScale = 4;
#endif

// Any difference the autovalidator finds while this hook is installed fails
// the running test.  Tests that provoke differences on purpose swap it.
const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new FailOnLookupMismatchEnv);

Verdict Out(uint64_t rule) { return Verdict{rule, Action::Output(1)}; }

// Random megaflows of every shape (1..9 words, in_port always exact), values
// from small per-word domains so keys hit and narrowly miss, keys whose
// wildcarded words are often zero (absent from the miniflow).
class ShapeGen : public RandomMegaflowGen<ShapeGen> {
 public:
  explicit ShapeGen(uint64_t seed) : RandomMegaflowGen(seed) {}

  Flow MaskOfWords(int n_words) {
    Flow m;
    m.Set(Field::kInPort, 0xffffffff);
    if (Bit()) m.Set(Field::kEthType, 0xffff);
    std::vector<int> others = {1, 2, 3, 4, 5, 6, 7, 8};
    std::shuffle(others.begin(), others.end(), rng_);
    for (int k = 0; k < n_words - 1; ++k) {
      static constexpr uint64_t kMasks[] = {~uint64_t{0}, 0xffffffff00000000ULL,
                                            0xffff, 0xff00ff00ff00ff00ULL,
                                            uint64_t{1} << 63};
      m.w[others[k]] = kMasks[rng_() % std::size(kMasks)];
    }
    return m;
  }

  uint64_t WordValue() {
    static constexpr uint64_t kValues[] = {0, 1, 2, 0xffff, 0x8000000000000000ULL,
                                           0x0a000001ffff0050ULL, ~uint64_t{0}};
    return kValues[rng_() % std::size(kValues)] ^ (rng_() % 4);
  }

  Flow RandomFlow(uint32_t port) {
    Flow f;
    for (int w = 0; w < kFlowWords; ++w) f.w[w] = Bit() ? WordValue() : 0;
    f.Set(Field::kInPort, port);
    return f;
  }
};

// A classifier populated with non-overlapping megaflows of every shape.
// Shape n (words) lives on its own two ports (n-1 and 0xffffffff-(n-1), so
// 0 and 0xffffffff are covered) with two masks each: a 1-word megaflow would
// otherwise cover every key of its port and leave no room for the others.
struct Fixture {
  explicit Fixture(const MegaflowClassifierOptions& o, uint64_t seed,
                   int megaflows_per_shape, uint32_t pool_size = 8192)
      : pool(pool_size), gen(seed) {
    auto c = MegaflowClassifier::Create(&pool, o);
    EXPECT_TRUE(c.ok()) << c.status();
    dpcls = *std::move(c);
    for (int n = 1; n <= kFlowWords; ++n) {
      const Flow masks[2] = {gen.MaskOfWords(n), gen.MaskOfWords(n)};
      const uint32_t shape_ports[2] = {uint32_t(n - 1),
                                       0xffffffffu - uint32_t(n - 1)};
      for (uint32_t p : shape_ports) ports.push_back(p);
      for (int k = 0; k < megaflows_per_shape; ++k) {
        const Flow& mask = masks[k % 2];
        const Flow value =
            gen.RandomFlow(shape_ports[gen.rng()() % 2]) & mask;
        bool overlaps = false;
        for (const InstalledMegaflow& e : installed)
          overlaps |= MegaflowsOverlap(value, mask, e.value, e.mask);
        if (overlaps) continue;
        Megaflow* mf = dpcls->Install(value, mask, Out(installed.size() + 1));
        if (mf == nullptr) continue;  // constant hash: table full
        installed.push_back({value, mask, mf});
        by_port[static_cast<uint32_t>(value.Get(Field::kInPort))].push_back(
            installed.size() - 1);
      }
    }
  }
  const Megaflow* Reference(const FlowKey& key) const {
    return CoveringMegaflow(installed, key);
  }
  uint32_t Port() { return ports[gen.rng()() % ports.size()]; }
  // A key of `port`: near one of its megaflows, or unrelated (1 in 8).
  FlowKey RandomKey(uint32_t port) {
    auto it = by_port.find(port);
    if (it == by_port.end() || gen.rng()() % 8 == 0)
      return FlowKey::FromFlow(gen.RandomFlow(port));
    const InstalledMegaflow& e =
        installed[it->second[gen.rng()() % it->second.size()]];
    return gen.KeyNear(e.value, e.mask);
  }
  FlowKey RandomKey() { return RandomKey(Port()); }

  MegaflowPool pool;
  ShapeGen gen;
  std::unique_ptr<MegaflowClassifier> dpcls;
  std::vector<InstalledMegaflow> installed;
  std::vector<uint32_t> ports;
  std::map<uint32_t, std::vector<size_t>> by_port;
};

// ------------------------------------------------------------ typed ----

struct GenericImpl {
  static constexpr LookupImplId kId = LookupImplId::kGeneric;
};
struct SpecialisedImpl {
  static constexpr LookupImplId kId = LookupImplId::kSpecialised;
};
struct Avx512Impl {
  static constexpr LookupImplId kId = LookupImplId::kAvx512;
};
struct AutovalidatorImpl {
  static constexpr LookupImplId kId = LookupImplId::kAutovalidator;
};

template <typename T>
class LookupImplTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!LookupImplAvailable(T::kId))
      GTEST_SKIP() << LookupImplName(T::kId)
                   << ": this CPU lacks avx512f/bw/vl/dq, bmi2 or popcnt";
  }
  static MegaflowClassifierOptions Options(
      uint64_t (*hash)(const uint64_t*, int, uint64_t) = nullptr) {
    MegaflowClassifierOptions o;
    o.lookup = *LookupPriorities::Only(LookupImplName(T::kId));
    o.hash_override = hash;
    return o;
  }
};

using Impls = ::testing::Types<GenericImpl, SpecialisedImpl, Avx512Impl,
                               AutovalidatorImpl>;
class ImplNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return LookupImplName(T::kId);
  }
};
TYPED_TEST_SUITE(LookupImplTest, Impls, ImplNames);

TYPED_TEST(LookupImplTest, EveryShapeUsesThisImplementation) {
  Fixture f(this->Options(), 1, 8);
  ASSERT_GE(f.dpcls->subtable_count(), size_t{kFlowWords});
  std::set<int> shapes;
  for (const SubtableInfo& info : f.dpcls->Subtables()) {
    EXPECT_EQ(info.lookup_fn, LookupImplName(TypeParam::kId));
    shapes.insert(std::popcount(info.mask.NonZeroMap()));
  }
  EXPECT_EQ(shapes.size(), size_t{kFlowWords}) << "a shape is missing";
}

TYPED_TEST(LookupImplTest, MatchesLinearScanForEveryShapeAndHash) {
  for (const HashCase& hc : kTestHashes) {
    SCOPED_TRACE(hc.name);
    Fixture f(this->Options(hc.fn), 7, 60);
    ASSERT_GT(f.installed.size(), hc.fn == &ConstantHash ? 8u : 200u);
    std::map<int, int> hits_by_shape;
    uint64_t lookups = 0;
    for (int round = 0; round < 150 * kScale; ++round) {
      // Same port per burst, as the pipeline groups them.
      const uint32_t port = f.Port();
      FlowKey keys[kMaxBurst];
      for (FlowKey& k : keys) k = f.RandomKey(port);
      Megaflow* out[kMaxBurst];
      std::fill(std::begin(out), std::end(out), nullptr);
      const uint32_t hits =
          f.dpcls->LookupBurst(port, keys, ~0u, out, &lookups);
      for (int i = 0; i < kMaxBurst; ++i) {
        const Megaflow* want = f.Reference(keys[i]);
        ASSERT_EQ(want != nullptr, ((hits >> i) & 1) != 0)
            << "key " << keys[i].ToString();
        ASSERT_EQ(out[i], want) << "key " << keys[i].ToString();
        if (want) ++hits_by_shape[std::popcount(want->mask.NonZeroMap())];
      }
    }
    if (hc.fn == nullptr) {
      // Hits in every shape, or the test proves little.
      for (int n = 1; n <= kFlowWords; ++n)
        EXPECT_GT(hits_by_shape[n], 0) << n << " words";
    }
  }
}

TYPED_TEST(LookupImplTest, EveryBurstSizeWritesOnlyHits) {
  Fixture f(this->Options(), 3, 40);
  Megaflow marker;
  for (int size = 0; size <= kMaxBurst; ++size) {
    for (int rep = 0; rep < 4; ++rep) {
      const uint32_t port = f.Port();
      FlowKey keys[kMaxBurst];
      for (int i = 0; i < size; ++i) keys[i] = f.RandomKey(port);
      // Sparse todo maps too: every other key.
      const uint32_t all = BurstMap(size);
      const uint32_t todo = rep % 2 ? all & 0x55555555u : all;
      Megaflow* out[kMaxBurst + 1];
      std::fill(std::begin(out), std::end(out), &marker);
      const uint32_t hits = f.dpcls->LookupBurst(port, keys, todo, out, nullptr);
      EXPECT_EQ(hits & ~todo, 0u);
      for (int i = 0; i <= kMaxBurst; ++i) {
        if (i < size && ((todo >> i) & 1)) {
          const Megaflow* want = f.Reference(keys[i]);
          EXPECT_EQ(((hits >> i) & 1) != 0, want != nullptr);
          EXPECT_EQ(out[i], want ? want : &marker);
        } else {
          EXPECT_EQ(out[i], &marker) << "wrote outside todo at " << i;
        }
      }
    }
  }
}

TYPED_TEST(LookupImplTest, LookupInSubtableFindsOnlyThatSubtable) {
  Fixture f(this->Options(), 5, 30);
  for (const InstalledMegaflow& e : f.installed) {
    const FlowKey key = FlowKey::FromFlow(e.value);
    Megaflow* out[kMaxBurst] = {};
    EXPECT_EQ(f.dpcls->LookupInSubtable(e.mf->subtable, &key, 1, out), 1u);
    EXPECT_EQ(out[0], e.mf);
    const uint16_t other = (e.mf->subtable + 1) % f.dpcls->subtable_count();
    out[0] = nullptr;
    EXPECT_EQ(f.dpcls->LookupInSubtable(other, &key, 1, out), 0u);
    EXPECT_EQ(out[0], nullptr);
  }
}

// ------------------------------------------------------- selection ----

std::vector<std::string> LookupFns(const MegaflowClassifier& c) {
  std::vector<std::string> fns;
  for (const SubtableInfo& info : c.Subtables()) fns.push_back(info.lookup_fn);
  return fns;
}

const char* BestDefault() {
  return CpuHasAvx512Lookup() ? "avx512" : "specialised";
}

TEST(LookupSelectionTest, DefaultIsBestAvailable) {
  Fixture f({}, 11, 3);
  for (const std::string& fn : LookupFns(*f.dpcls)) EXPECT_EQ(fn, BestDefault());
}

TEST(LookupSelectionTest, SettingPrioritiesReprobesExistingSubtables) {
  Fixture f({}, 12, 3);
  ASSERT_GE(f.dpcls->subtable_count(), size_t{kFlowWords});
  ASSERT_TRUE(f.dpcls->SetLookupPriority("generic", 200).ok());
  for (const std::string& fn : LookupFns(*f.dpcls)) EXPECT_EQ(fn, "generic");
  EXPECT_EQ(f.dpcls->lookup_priorities().Get(LookupImplId::kGeneric), 200);
  // Lookups still answer (through the newly chosen function).
  for (const InstalledMegaflow& e : f.installed) {
    const FlowKey key = FlowKey::FromFlow(e.value);
    Megaflow* out[1] = {};
    ASSERT_EQ(f.dpcls->LookupBurst(e.value.Get(Field::kInPort) & 0xffffffff,
                                   &key, 1, out, nullptr),
              1u);
    EXPECT_EQ(out[0], e.mf);
  }
  ASSERT_TRUE(f.dpcls->SetLookupPriority("generic", 1).ok());
  for (const std::string& fn : LookupFns(*f.dpcls)) EXPECT_EQ(fn, BestDefault());
  ASSERT_TRUE(f.dpcls->SetLookupPriority("autovalidator", 255).ok());
  for (const std::string& fn : LookupFns(*f.dpcls))
    EXPECT_EQ(fn, "autovalidator");
  // New subtables follow the current priorities too.
  const Flow mask = f.gen.MaskOfWords(kFlowWords);
  const Flow v = f.gen.RandomFlow(12345);
  ASSERT_NE(f.dpcls->Install(v & mask, mask, Out(999)), nullptr);
  for (const std::string& fn : LookupFns(*f.dpcls))
    EXPECT_EQ(fn, "autovalidator");
}

TEST(LookupSelectionTest, ZeroDisablesTiesGoToTheFirstListedGenericIsFallback) {
  Fixture f({}, 13, 2);
  LookupPriorities p;
  p.priority = {5, 5, 5, 0};
  f.dpcls->SetLookupPriorities(p);
  for (const std::string& fn : LookupFns(*f.dpcls)) EXPECT_EQ(fn, "generic");
  p.priority = {0, 0, 0, 0};
  f.dpcls->SetLookupPriorities(p);
  for (const std::string& fn : LookupFns(*f.dpcls)) EXPECT_EQ(fn, "generic");
  p.priority = {0, 7, 0, 0};
  f.dpcls->SetLookupPriorities(p);
  for (const std::string& fn : LookupFns(*f.dpcls))
    EXPECT_EQ(fn, "specialised");
}

TEST(LookupSelectionTest, ForceScalarNeverPicksAvx512) {
  MegaflowClassifierOptions o;
  o.lookup.force_scalar = true;
  o.lookup.priority = {1, 2, 100, 0};
  Fixture f(o, 14, 2);
  for (const std::string& fn : LookupFns(*f.dpcls))
    EXPECT_EQ(fn, "specialised");
  for (const LookupImplStatus& s : ListLookupImpls(o.lookup)) {
    if (s.name == "avx512") {
      EXPECT_FALSE(s.available);
    }
  }
}

TEST(LookupSelectionTest, Avx512OnlyWhenTheCpuHasIt) {
  MegaflowClassifierOptions o;
  o.lookup = *LookupPriorities::Only("avx512");
  Fixture f(o, 15, 2);
  const std::string want = CpuHasAvx512Lookup() ? "avx512" : "generic";
  for (const std::string& fn : LookupFns(*f.dpcls)) EXPECT_EQ(fn, want);
  if (!CpuHasAvx512Lookup())
    GTEST_SKIP() << "checked the fallback; this CPU lacks AVX-512";
}

TEST(LookupSelectionTest, BadNamesAndPrioritiesAreRejected) {
  LookupPriorities p;
  absl::Status s = p.Set("sse9", 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sse9"));
  s = p.Set("avx512", 256);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("avx512"));
  EXPECT_THAT(s.message(), HasSubstr("256"));
  EXPECT_EQ(p.Set("avx512", -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p, LookupPriorities{});  // unchanged
  EXPECT_FALSE(LookupPriorities::Only("scalar").ok());
  EXPECT_FALSE(p.Get("nope").ok());
  EXPECT_EQ(*p.Get("specialised"), 2);

  MegaflowPool pool(16);
  MegaflowClassifierOptions o;
  o.lookup.priority[2] = 300;
  auto c = MegaflowClassifier::Create(&pool, o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("avx512"));

  Fixture f({}, 16, 1);
  const LookupPriorities before = f.dpcls->lookup_priorities();
  EXPECT_FALSE(f.dpcls->SetLookupPriority("generic", 1000).ok());
  EXPECT_EQ(f.dpcls->lookup_priorities(), before);
}

TEST(LookupSelectionTest, OnlyAndToString) {
  const LookupPriorities p = *LookupPriorities::Only("specialised");
  EXPECT_EQ(p.ToString(),
            "generic=1 specialised=255 avx512=0 autovalidator=0");
  LookupPriorities q;
  q.force_scalar = true;
  EXPECT_EQ(q.ToString(),
            "generic=1 specialised=2 avx512=3 autovalidator=0 force_scalar");
  const std::vector<LookupImplStatus> list = ListLookupImpls(q);
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[2].isa, "avx512f+avx512bw+avx512vl+avx512dq+bmi2+popcnt");
  EXPECT_TRUE(list[0].available);
}

TEST(LookupSelectionTest, PipelineForwardsPriorities) {
  PipelineConfig config;
  config.max_megaflows = 1024;
  config.cd_table.entries = 1024;
  config.smc_config.entries = 1024;
  config.dpcls.lookup = *LookupPriorities::Only("generic");
  auto p = Pipeline::Create(config);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->lookup_priorities().Get(LookupImplId::kSpecialised), 0);
  ASSERT_TRUE((*p)->SetLookupPriority("specialised", 9).ok());
  EXPECT_EQ((*p)->lookup_priorities().Get(LookupImplId::kSpecialised), 9);
  EXPECT_EQ((*p)->config().dpcls.lookup.priority[1], 9);
  EXPECT_FALSE((*p)->SetLookupPriority("x", 1).ok());
  EXPECT_EQ((*p)->lookup_mismatches(), 0u);
}

// --------------------------------------------------- autovalidator ----

int g_caught = 0;
LookupMismatch g_last;
void CountMismatch(const LookupMismatch& m) {
  ++g_caught;
  g_last = m;
}

// Deliberately wrong: loses the hit of the highest key index.
uint32_t DropsLastHit(const internal::SubtableDesc& st,
                      const internal::Table& table, const FlowKey* keys,
                      uint32_t todo, Megaflow** out, MegaflowPool& pool) {
  uint32_t hits =
      internal::SubtableLookupGeneric(st, table, keys, todo, out, pool);
  if (hits != 0) hits &= ~(1u << (31 - std::countl_zero(hits)));
  return hits;
}
// Deliberately wrong: right hit mask, wrong megaflow.
uint32_t WrongMegaflow(const internal::SubtableDesc& st,
                       const internal::Table& table, const FlowKey* keys,
                       uint32_t todo, Megaflow** out, MegaflowPool& pool) {
  const uint32_t hits =
      internal::SubtableLookupGeneric(st, table, keys, todo, out, pool);
  if (hits != 0) out[std::countr_zero(hits)] = &pool.Get(pool.capacity() - 1);
  return hits;
}

class AutovalidatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = SetLookupMismatchHook(&CountMismatch);
    g_caught = 0;
  }
  void TearDown() override { SetLookupMismatchHook(previous_); }

  // Runs bursts of keys of installed megaflows through an autovalidating
  // classifier that also checks `extra`; returns the classifier's count.
  uint64_t Run(internal::SubtableLookupFn extra, int* hits_seen) {
    MegaflowClassifierOptions o;
    o.lookup = *LookupPriorities::Only("autovalidator");
    o.extra_validated_lookup = extra;
    Fixture f(o, 21, 20);
    *hits_seen = 0;
    for (int round = 0; round < 50; ++round) {
      const InstalledMegaflow& e = f.installed[round % f.installed.size()];
      const uint32_t port = static_cast<uint32_t>(e.value.Get(Field::kInPort));
      FlowKey keys[4] = {FlowKey::FromFlow(e.value), f.RandomKey(),
                         f.gen.KeyNear(e.value, e.mask),
                         FlowKey::FromFlow(e.value)};
      Megaflow* out[kMaxBurst] = {};
      const uint32_t hits = f.dpcls->LookupBurst(port, keys, 0xf, out, nullptr);
      // The autovalidator always answers with generic's result.
      EXPECT_TRUE(hits & 1);
      EXPECT_EQ(out[0], e.mf);
      EXPECT_EQ(out[3], e.mf);
      *hits_seen += std::popcount(hits);
    }
    return f.dpcls->lookup_mismatches();
  }

  LookupMismatchHook previous_ = nullptr;
};

TEST_F(AutovalidatorTest, CatchesAWrongHitMask) {
  const uint64_t total_before = LookupMismatchesTotal();
  int hits = 0;
  const uint64_t found = Run(&DropsLastHit, &hits);
  EXPECT_GT(hits, 0);
  EXPECT_GE(found, 50u);  // every round has a hit to drop
  EXPECT_EQ(static_cast<uint64_t>(g_caught), found);
  EXPECT_EQ(LookupMismatchesTotal() - total_before, found);
  EXPECT_STREQ(g_last.impl, "test");
  EXPECT_NE(g_last.generic_hits, g_last.impl_hits);
  EXPECT_GE(g_last.key_index, 0);
}

TEST_F(AutovalidatorTest, CatchesAWrongMegaflow) {
  int hits = 0;
  const uint64_t found = Run(&WrongMegaflow, &hits);
  EXPECT_GE(found, 50u);
  EXPECT_EQ(g_last.generic_hits, g_last.impl_hits);
}

TEST_F(AutovalidatorTest, CorrectImplementationsGiveNoDifference) {
  int hits = 0;
  EXPECT_EQ(Run(&internal::SubtableLookupGeneric, &hits), 0u);
  EXPECT_EQ(Run(nullptr, &hits), 0u);
  EXPECT_EQ(g_caught, 0);
}

TEST_F(AutovalidatorTest, ChecksEveryEligibleImplementation) {
  // Indirectly: a classifier that validates while forced scalar must still
  // run specialised, and avx512 only when present and not forced scalar.
  MegaflowClassifierOptions o;
  o.lookup = *LookupPriorities::Only("autovalidator");
  Fixture f(o, 22, 2);
  const std::string dump = f.dpcls->DebugString();
  EXPECT_THAT(dump, HasSubstr("fn autovalidator"));
  EXPECT_THAT(dump, HasSubstr("autovalidator differences: 0"));
}

// Random differential traffic through the autovalidator (every shape, three
// hashes); the hook installed by the environment fails on any difference.
TEST(AutovalidatorRandomTest, NoDifferencesOverRandomTraffic) {
  uint64_t lookups = 0;
  for (const HashCase& hc : kTestHashes) {
    MegaflowClassifierOptions o;
    o.lookup = *LookupPriorities::Only("autovalidator");
    o.hash_override = hc.fn;
    Fixture f(o, 31, 80);
    for (int round = 0; round < 300 * kScale; ++round) {
      const uint32_t port = f.Port();
      FlowKey keys[kMaxBurst];
      for (FlowKey& k : keys) k = f.RandomKey(port);
      Megaflow* out[kMaxBurst];
      uint64_t l = 0;
      f.dpcls->LookupBurst(port, keys, ~0u, out, &l);
      lookups += kMaxBurst;
    }
    EXPECT_EQ(f.dpcls->lookup_mismatches(), 0u) << hc.name;
  }
  EXPECT_GT(lookups, 0u);
}

}  // namespace
}  // namespace flowclass
