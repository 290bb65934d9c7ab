#include "dataplane/dpcls/megaflow_classifier.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <map>
#include <new>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/megaflow_testing.h"

// Counts every plain operator new in this binary, so tests can assert that
// the hot path and Install/Remove never allocate.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// noinline: once inlined, g++ 12 sees malloc paired with a delete-expression
// and warns (-Wmismatched-new-delete) although the pair is consistent.
[[gnu::noinline]] void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace flowclass {
namespace {

using ::testing::HasSubstr;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kScale = 5;  // ASan: fewer rounds, same coverage
#else
constexpr int kScale = 20;
#endif

using FieldValues = std::initializer_list<std::pair<Field, uint64_t>>;

// A megaflow mask: in_port exact, plus `fields` with their masks.
Flow PortMask(FieldValues fields = {}) {
  Flow m;
  m.Set(Field::kInPort, 0xffffffff);
  for (const auto& [field, mask] : fields) m.Set(field, mask);
  return m;
}

// A megaflow value: in_port `port`, plus `fields` with their values.
Flow PortFlow(uint32_t port, FieldValues fields = {}) {
  Flow v;
  v.Set(Field::kInPort, port);
  for (const auto& [field, value] : fields) v.Set(field, value);
  return v;
}

Verdict Out(uint32_t port, uint64_t rule = 1) {
  return Verdict{rule, Action::Output(port)};
}

// Brute-force reference: the list of installed megaflows.
using RefEntry = InstalledMegaflow;

class Reference {
 public:
  const Megaflow* Lookup(const FlowKey& key) const {
    return CoveringMegaflow(entries_, key);
  }
  bool OverlapsAny(const Flow& value, const Flow& mask) const {
    for (const RefEntry& e : entries_)
      if (MegaflowsOverlap(value, mask, e.value, e.mask)) return true;
    return false;
  }
  std::vector<RefEntry>& entries() { return entries_; }
  const std::vector<RefEntry>& entries() const { return entries_; }
  size_t SubtableCount() const {
    std::set<std::pair<uint64_t, std::vector<uint64_t>>> shapes;
    for (const RefEntry& e : entries_)
      shapes.insert({e.value.Get(Field::kInPort),
                     std::vector<uint64_t>(e.mask.w.begin(), e.mask.w.end())});
    return shapes.size();
  }

 private:
  std::vector<RefEntry> entries_;
};

// Random megaflows over a few ports and mask shapes, with values from small
// domains so keys near them both hit and narrowly miss.
class Generator : public RandomMegaflowGen<Generator> {
 public:
  explicit Generator(uint64_t seed) : RandomMegaflowGen(seed) {
    const uint32_t ports[] = {0, 1, 7, 0xffffffffu, 0x80000000u};
    ports_.assign(std::begin(ports), std::end(ports));
    for (int i = 0; i < 12; ++i) masks_.push_back(RandomMask());
  }

  uint32_t RandomPort() { return ports_[rng_() % ports_.size()]; }

  Flow RandomMask() {
    Flow m = PortMask();
    m.Set(Field::kEthType, 0xffff);
    // Always a fairly specific ipv4_src prefix, so that random megaflows
    // rarely overlap and the live population grows.
    m.Set(Field::kIpv4Src, PrefixMask(16 + 4 * (rng_() % 5)));
    if (Bit()) m.Set(Field::kIpv4Dst, PrefixMask(rng_() % 33));
    if (Bit()) m.Set(Field::kNwProto, 0xff);
    if (Bit()) m.Set(Field::kTpDst, Bit() ? 0xffff : 0xff00);
    if (rng_() % 4 == 0) m.Set(Field::kEthDst, 0xffffffffffffULL);
    if (rng_() % 4 == 0) m.w[kWordIpv6SrcLo] = ~uint64_t{0} << (rng_() % 64);
    return m;
  }

  // Megaflow (value, mask) for one of the fixed shapes.
  std::pair<Flow, Flow> RandomMegaflow() {
    const Flow& mask = masks_[rng_() % masks_.size()];
    Flow f = RandomFlow(RandomPort());
    return {f & mask, mask};
  }

  // A flow whose words are often zero (absent from the miniflow).
  Flow RandomFlow(uint32_t port) {
    Flow f;
    f.Set(Field::kInPort, port);
    f.Set(Field::kEthType, rng_() % 4 ? kEthTypeIpv4 : 0);
    if (Bit()) f.Set(Field::kIpv4Src, 0x0a000000u | (rng_() % 4096) << 8);
    if (Bit()) f.Set(Field::kIpv4Dst, 0xc0a80000u | (rng_() % 64));
    if (Bit()) f.Set(Field::kNwProto, Bit() ? kIpProtoTcp : kIpProtoUdp);
    if (Bit()) f.Set(Field::kTpDst, rng_() % 4 * 0x100 + rng_() % 16);
    if (Bit()) f.Set(Field::kEthDst, rng_() % 3);
    if (Bit()) f.w[kWordIpv6SrcLo] = rng_() % 2 ? ~uint64_t{0} : 0x1234;
    return f;
  }

 private:
  static uint64_t PrefixMask(int len) {
    return len == 0 ? 0 : (0xffffffffull << (32 - len)) & 0xffffffffull;
  }

  std::vector<uint32_t> ports_;
  std::vector<Flow> masks_;
};

std::unique_ptr<MegaflowClassifier> MakeClassifier(
    MegaflowPool* pool, MegaflowClassifierOptions options = {}) {
  auto c = MegaflowClassifier::Create(pool, options);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

// Checks every structural figure against the reference.
void CheckConsistent(const MegaflowClassifier& c, const Reference& ref,
                     const MegaflowPool& pool) {
  ASSERT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants();
  ASSERT_EQ(c.megaflow_count(), ref.entries().size());
  ASSERT_EQ(pool.live(), ref.entries().size());
  ASSERT_EQ(c.subtable_count(), ref.SubtableCount());
  size_t total = 0;
  for (const SubtableInfo& info : c.Subtables()) {
    total += info.megaflows;
    EXPECT_GT(info.megaflows, 0u);
    EXPECT_EQ(c.RankOf(info.id), info.rank);
  }
  EXPECT_EQ(total, ref.entries().size());
  for (const RefEntry& e : ref.entries()) {
    ASSERT_TRUE(e.mf->live);
    EXPECT_EQ(e.mf->value, e.value);
    EXPECT_EQ(e.mf->mask, e.mask);
    EXPECT_GE(c.RankOf(e.mf->subtable), 0);
  }
}

// ------------------------------------------------------------ creation ----

TEST(MegaflowClassifierTest, CreateRejectsBadOptions) {
  MegaflowPool pool(16);
  EXPECT_THAT(MegaflowClassifier::Create(nullptr).status().message(),
              HasSubstr("pool"));
  MegaflowClassifierOptions o;
  o.max_subtables = 0;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_subtables"));
  o.max_subtables = 70000;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_subtables"));
  o = {};
  o.max_ports = 0;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_ports"));
  o = {};
  o.max_ports = 60000;
  o.max_subtables = 60000;
  EXPECT_THAT(MegaflowClassifier::Create(&pool, o).status().message(),
              HasSubstr("max_ports x max_subtables"));
  auto ok = MegaflowClassifier::Create(&pool);
  ASSERT_TRUE(ok.ok());
  EXPECT_GE((*ok)->table_capacity(), 32u);  // >= 2 x pool capacity
}

// --------------------------------------------------------- differential ----

class DifferentialTest : public ::testing::TestWithParam<HashCase> {};

// Install/Remove churn with bursts of random keys near installed megaflows;
// every key must give the reference's megaflow or a miss, and the
// lookups_on_hits figure must be the sum of (rank + 1) over hits.
TEST_P(DifferentialTest, MatchesLinearScanThroughChurn) {
  const bool constant = GetParam().fn == &ConstantHash;
  MegaflowPool pool(constant ? 64 : 512);
  MegaflowClassifierOptions options;
  options.hash_override = GetParam().fn;
  auto c = MakeClassifier(&pool, options);
  Reference ref;
  Generator gen(0xc1a55 + (GetParam().fn ? 1 : 0));
  std::mt19937_64& rng = gen.rng();

  int installed = 0, failed = 0, hits_checked = 0, misses_checked = 0;
  for (int round = 0; round < 20 * kScale; ++round) {
    // Installs: non-overlapping candidates only.
    for (int k = 0; k < 40; ++k) {
      auto [value, mask] = gen.RandomMegaflow();
      if (ref.OverlapsAny(value, mask)) continue;
      Megaflow* mf = c->Install(value, mask, Out(round));
      if (mf == nullptr) {
        ++failed;
        continue;
      }
      ++installed;
      ref.entries().push_back({value, mask, mf});
      ASSERT_EQ(&pool.Get(mf->index), mf);
      EXPECT_EQ(mf->verdict, Out(round));
    }
    // Removals.
    for (size_t k = 0; k < ref.entries().size();) {
      if (rng() % 5 == 0) {
        c->Remove(ref.entries()[k].mf);
        ref.entries()[k] = ref.entries().back();
        ref.entries().pop_back();
      } else {
        ++k;
      }
    }
    ASSERT_NO_FATAL_FAILURE(CheckConsistent(*c, ref, pool));
    if (round % 7 == 3) c->Rank();

    // Lookups: one burst per port, keys near live megaflows or random.
    for (int b = 0; b < 6; ++b) {
      const uint32_t port = gen.RandomPort();
      std::vector<const RefEntry*> of_port;
      for (const RefEntry& e : ref.entries())
        if (e.value.Get(Field::kInPort) == port) of_port.push_back(&e);
      FlowKey keys[kMaxBurst];
      const int n = 1 + rng() % kMaxBurst;
      for (int i = 0; i < n; ++i) {
        if (!of_port.empty() && rng() % 8 != 0) {
          const RefEntry* e = of_port[rng() % of_port.size()];
          keys[i] = gen.KeyNear(e->value, e->mask);
        } else {
          keys[i] = FlowKey::FromFlow(gen.RandomFlow(port));
        }
      }
      Megaflow* out[kMaxBurst] = {};
      int ranks[kMaxBurst];
      uint64_t expected_lookups = 0;
      for (int i = 0; i < n; ++i) {
        const Megaflow* want = ref.Lookup(keys[i]);
        ranks[i] = want ? c->RankOf(want->subtable) : -1;
      }
      uint64_t lookups = 0;
      const uint32_t hits =
          c->LookupBurst(port, keys, BurstMap(n), out, &lookups);
      for (int i = 0; i < n; ++i) {
        const Megaflow* want = ref.Lookup(keys[i]);
        if (want != nullptr) {
          ASSERT_TRUE(hits & (1u << i)) << "key " << i << " should hit";
          ASSERT_EQ(out[i], want);
          expected_lookups += ranks[i] + 1;
          ++hits_checked;
        } else {
          ASSERT_FALSE(hits & (1u << i)) << "key " << i << " should miss";
          ASSERT_EQ(out[i], nullptr);
          ++misses_checked;
        }
      }
      EXPECT_EQ(hits & ~BurstMap(n), 0u);
      EXPECT_EQ(lookups, expected_lookups);
    }
  }
  EXPECT_GT(hits_checked, 100);
  EXPECT_GT(misses_checked, 20);
  if (constant) {
    // Every entry shares two buckets: at most 16 live megaflows.
    EXPECT_LE(c->megaflow_count(), 16u);
    EXPECT_GT(failed, 0);
  } else {
    EXPECT_GT(installed, 200);
  }
  c->Clear();
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_EQ(c->port_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Hashes, DifferentialTest,
                         ::testing::ValuesIn(kTestHashes), HashCaseName);

// ------------------------------------------------------------- bursts ----

class BurstTest : public ::testing::TestWithParam<HashCase> {};

// Every burst size 0..32 with every other key a hit; out[] pre-filled with a
// marker that must survive at misses and past the burst.
TEST_P(BurstTest, EverySizeWritesOnlyHits) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.hash_override = GetParam().fn;
  auto c = MakeClassifier(&pool, options);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  std::vector<Megaflow*> mfs;
  for (int i = 0; i < 16; ++i) {
    Megaflow* mf =
        c->Install(PortFlow(3, {{Field::kTpDst, 1000 + i}}), mask, Out(i));
    ASSERT_NE(mf, nullptr) << i;
    mfs.push_back(mf);
  }
  Megaflow marker;
  for (int n = 0; n <= kMaxBurst; ++n) {
    FlowKey keys[kMaxBurst];
    for (int i = 0; i < n; ++i) {
      const bool hit = i % 2 == 0;
      keys[i] = MakeFiveTupleKey(1, 2, 3, hit ? 1000 + i % 16 : 7, 6, 3);
    }
    Megaflow* out[kMaxBurst + 8];
    std::fill(std::begin(out), std::end(out), &marker);
    uint64_t lookups = 0;
    const uint32_t hits = c->LookupBurst(3, keys, BurstMap(n), out, &lookups);
    uint32_t want = 0;
    for (int i = 0; i < n; i += 2) want |= 1u << i;
    ASSERT_EQ(hits, want) << "n=" << n;
    for (int i = 0; i < kMaxBurst + 8; ++i) {
      if (i < kMaxBurst && (hits >> i) & 1) {
        EXPECT_EQ(out[i], mfs[i % 16]) << "n=" << n << " i=" << i;
      } else {
        EXPECT_EQ(out[i], &marker) << "n=" << n << " i=" << i;
      }
    }
    EXPECT_EQ(lookups, static_cast<uint64_t>(std::popcount(want)));
  }
}

INSTANTIATE_TEST_SUITE_P(Hashes, BurstTest, ::testing::ValuesIn(kTestHashes),
                         HashCaseName);

TEST(MegaflowClassifierTest, SparseTodoMapReadsAndWritesOnlyItsKeys) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  Megaflow* mf = c->Install(PortFlow(5), PortMask(), Out(1));
  ASSERT_NE(mf, nullptr);
  FlowKey keys[kMaxBurst];
  for (auto& k : keys) k = MakeFiveTupleKey(1, 2, 3, 4, 6, 5);  // all hit
  Megaflow marker;
  Megaflow* out[kMaxBurst];
  std::fill(std::begin(out), std::end(out), &marker);
  const uint32_t todo = 0x80010042u;
  uint64_t lookups = 0;
  EXPECT_EQ(c->LookupBurst(5, keys, todo, out, &lookups), todo);
  for (int i = 0; i < kMaxBurst; ++i)
    EXPECT_EQ(out[i], (todo >> i) & 1 ? mf : &marker) << i;
  EXPECT_EQ(mf->hits, 4u);
  EXPECT_EQ(lookups, 4u);
  // Nothing to do, nothing done (lookups_on_hits may be null).
  EXPECT_EQ(c->LookupBurst(5, keys, 0, out, nullptr), 0u);
  EXPECT_EQ(c->LookupBurst(6, keys, todo, out, nullptr), 0u);  // unknown port
}

// ---------------------------------------------------- install / remove ----

TEST(MegaflowClassifierTest, InstallEqualMegaflowReturnsExisting) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  const Flow mask = PortMask({{Field::kIpv4Dst, 0xffffff00}});
  // Bits outside the mask are dropped.
  Flow v = PortFlow(1, {{Field::kIpv4Dst, 0x0a000001}});
  Megaflow* a = c->Install(v, mask, Out(1));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->value.Get(Field::kIpv4Dst), 0x0a000000u);
  v.Set(Field::kIpv4Dst, 0x0a000077);
  Megaflow* b = c->Install(v, mask, Out(2));
  EXPECT_EQ(a, b);
  EXPECT_EQ(b->verdict, Out(1));
  EXPECT_EQ(c->megaflow_count(), 1u);
  EXPECT_EQ(pool.live(), 1u);
}

TEST(MegaflowClassifierTest, MaskWithoutExactInPortIsRejected) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  Flow mask;
  mask.Set(Field::kTpDst, 0xffff);
  EXPECT_EQ(c->Install(Flow{}, mask, Out(1)), nullptr);
  mask.Set(Field::kInPort, 0xffff0000);
  EXPECT_EQ(c->Install(Flow{}, mask, Out(1)), nullptr);
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_EQ(pool.live(), 0u);
}

TEST(MegaflowClassifierTest, RemoveIgnoresDeadAndForeignMegaflows) {
  MegaflowPool pool(16);
  MegaflowPool other_pool(16);
  auto c = MakeClassifier(&pool);
  const Flow v = PortFlow(1);
  Megaflow* mf = c->Install(v, PortMask(), Out(1));
  ASSERT_NE(mf, nullptr);
  Megaflow* foreign = other_pool.Alloc();
  foreign->value = v;
  foreign->mask = PortMask();
  foreign->subtable = mf->subtable;
  c->Remove(foreign);
  c->Remove(nullptr);
  EXPECT_EQ(c->megaflow_count(), 1u);
  EXPECT_TRUE(foreign->live);
  c->Remove(mf);
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_FALSE(mf->live);
  c->Remove(mf);  // twice: ignored
  EXPECT_EQ(pool.live(), 0u);
}

// ------------------------------------------------------ LookupInSubtable ----

TEST(MegaflowClassifierTest, LookupInSubtableRightWrongAndStaleIds) {
  MegaflowPool pool(16);
  MegaflowClassifierOptions options;
  options.max_subtables = 4;
  auto c = MakeClassifier(&pool, options);
  Megaflow* a = c->Install(PortFlow(9, {{Field::kTpDst, 80}}),
                            PortMask({{Field::kTpDst, 0xffff}}), Out(1));
  Megaflow* b = c->Install(PortFlow(9, {{Field::kIpv4Src, 0x01020304}}),
                            PortMask({{Field::kIpv4Src, 0xffffffff}}), Out(2));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(a->subtable, b->subtable);
  const uint16_t id_a = a->subtable;
  const uint16_t id_b = b->subtable;

  FlowKey keys[2] = {MakeFiveTupleKey(7, 8, 1, 80, 6, 9),
                     MakeFiveTupleKey(7, 8, 1, 81, 6, 9)};
  Megaflow marker;
  Megaflow* out[2] = {&marker, &marker};
  EXPECT_EQ(c->LookupInSubtable(id_a, keys, 0b11, out), 0b01u);
  EXPECT_EQ(out[0], a);
  EXPECT_EQ(out[1], &marker);
  EXPECT_EQ(a->hits, 1u);
  out[0] = &marker;
  EXPECT_EQ(c->LookupInSubtable(id_b, keys, 0b11, out), 0u);  // wrong id
  EXPECT_EQ(c->LookupInSubtable(3, keys, 0b11, out), 0u);     // never used
  EXPECT_EQ(c->LookupInSubtable(4, keys, 0b11, out), 0u);     // out of range
  EXPECT_EQ(c->LookupInSubtable(0xffff, keys, 0b11, out), 0u);
  EXPECT_EQ(out[0], &marker);

  // Stale: destroy subtable a; its id is dead, then reused by a new shape.
  c->Remove(a);
  EXPECT_EQ(c->RankOf(id_a), -1);
  EXPECT_EQ(c->LookupInSubtable(id_a, keys, 0b11, out), 0u);
  Megaflow* mc = c->Install(PortFlow(9, {{Field::kNwProto, 17}}),
                             PortMask({{Field::kNwProto, 0xff}}), Out(3));
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(mc->subtable, id_a);  // lowest free id reused
  EXPECT_EQ(c->LookupInSubtable(id_a, keys, 0b11, out), 0u);  // tcp keys
  FlowKey udp = MakeFiveTupleKey(7, 8, 1, 80, 17, 9);
  EXPECT_EQ(c->LookupInSubtable(id_a, &udp, 1, out), 1u);
  EXPECT_EQ(out[0], mc);
}

// ------------------------------------------------------------- ranking ----

TEST(MegaflowClassifierTest, RankOrdersByRecentHitsAndDrivesLookupCost) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  // Three shapes on port 1, created in order A, B, C.
  Megaflow* mf[3];
  const Field fields[3] = {Field::kTpDst, Field::kTpSrc, Field::kNwProto};
  for (int s = 0; s < 3; ++s) {
    mf[s] = c->Install(PortFlow(1, {{fields[s], 50 + s}}),
                       PortMask({{fields[s], 0xff}}), Out(s));
    ASSERT_NE(mf[s], nullptr);
    EXPECT_EQ(c->RankOf(mf[s]->subtable), s);
  }
  auto key_for = [](int s) {
    return MakeFiveTupleKey(0, 0, s == 1 ? 51 : 1, s == 0 ? 50 : 1,
                            s == 2 ? 52 : 6, 1);
  };
  auto send = [&](int s, int count, uint64_t* lookups) {
    for (int i = 0; i < count; ++i) {
      FlowKey k = key_for(s);
      Megaflow* out = nullptr;
      ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, lookups), 1u);
      ASSERT_EQ(out, mf[s]);
    }
  };
  uint64_t lookups = 0;
  send(2, 1, &lookups);
  EXPECT_EQ(lookups, 3u);  // C is third
  send(0, 10, &lookups);
  send(1, 50, &lookups);
  send(2, 99, &lookups);
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[1]->subtable), 1);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 2);
  std::vector<SubtableInfo> infos = c->Subtables();
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0].id, mf[2]->subtable);
  EXPECT_EQ(infos[0].hits, 100u);
  // Default lookup priorities: the best implementation available.
  EXPECT_EQ(infos[0].lookup_fn, CpuHasAvx512Lookup() ? "avx512" : "specialised");
  EXPECT_EQ(infos[2].hits, 10u);
  lookups = 0;
  send(2, 1, &lookups);
  EXPECT_EQ(lookups, 1u);  // C is now first
  send(0, 1, &lookups);
  EXPECT_EQ(lookups, 4u);  // A is third

  // Counters were zeroed: with equal recent hits (1 each for C and A, 0 for
  // B) the sort is stable: C before A, B last.
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 1);
  EXPECT_EQ(c->RankOf(mf[1]->subtable), 2);
  // No traffic: order unchanged.
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 1);
  // CD hits count for ranking too.
  FlowKey kb = key_for(1);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupInSubtable(mf[1]->subtable, &kb, 1, &out), 1u);
  c->Rank();
  EXPECT_EQ(c->RankOf(mf[1]->subtable), 0);
  // Destroying the first subtable closes the gap.
  c->Remove(mf[1]);
  EXPECT_EQ(c->RankOf(mf[2]->subtable), 0);
  EXPECT_EQ(c->RankOf(mf[0]->subtable), 1);
  EXPECT_THAT(c->DebugString(), HasSubstr("2 subtables"));
}

TEST(MegaflowClassifierTest, LookupsOnHitsSumsRankPlusOneOverABurst) {
  MegaflowPool pool(64);
  auto c = MakeClassifier(&pool);
  // Subtable r (rank r) holds tp_dst == 100 + r; its tp_src mask makes the
  // shape distinct (keys have tp_src 0, so only tp_dst decides).
  std::vector<Megaflow*> mfs;
  for (int r = 0; r < 5; ++r) {
    // A new shape per r.
    const Flow mask =
        PortMask({{Field::kTpDst, 0xffff}, {Field::kTpSrc, 0xffff >> r}});
    mfs.push_back(
        c->Install(PortFlow(2, {{Field::kTpDst, 100 + r}}), mask, Out(r)));
    ASSERT_NE(mfs.back(), nullptr);
    ASSERT_EQ(c->RankOf(mfs.back()->subtable), r);
  }
  FlowKey keys[6];
  for (int r = 0; r < 5; ++r) keys[r] = MakeFiveTupleKey(1, 1, 0, 100 + r, 6, 2);
  keys[5] = MakeFiveTupleKey(1, 1, 0, 99, 6, 2);  // miss: costs nothing
  Megaflow* out[6] = {};
  uint64_t lookups = 7;  // accumulates
  EXPECT_EQ(c->LookupBurst(2, keys, 0x3f, out, &lookups), 0x1fu);
  EXPECT_EQ(lookups, 7u + 1 + 2 + 3 + 4 + 5);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(out[r], mfs[r]);
}

// ----------------------------------------------------------- capacity ----

TEST(MegaflowClassifierTest, PoolExhaustionFailsCleanly) {
  MegaflowPool pool(8);
  auto c = MakeClassifier(&pool);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  std::vector<Megaflow*> mfs;
  for (int i = 0; i < 8; ++i) {
    mfs.push_back(c->Install(PortFlow(1, {{Field::kTpDst, i}}), mask, Out(i)));
    ASSERT_NE(mfs.back(), nullptr);
  }
  Flow v = PortFlow(1, {{Field::kTpDst, 100}});
  EXPECT_EQ(c->Install(v, mask, Out(1)), nullptr);
  // A failed install of a new shape on a new port leaves nothing behind.
  v.Set(Field::kInPort, 2);
  EXPECT_EQ(c->Install(v, PortMask(), Out(1)), nullptr);
  EXPECT_EQ(c->megaflow_count(), 8u);
  EXPECT_EQ(c->subtable_count(), 1u);
  EXPECT_EQ(c->port_count(), 1u);
  // Everything installed still hits; freeing one makes room.
  for (int i = 0; i < 8; ++i) {
    FlowKey k = MakeFiveTupleKey(0, 0, 0, i, 6, 1);
    Megaflow* out = nullptr;
    ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u);
    EXPECT_EQ(out, mfs[i]);
  }
  c->Remove(mfs[3]);
  EXPECT_NE(c->Install(v, PortMask(), Out(1)), nullptr);
}

TEST(MegaflowClassifierTest, SubtableAndPortExhaustionFailCleanly) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.max_subtables = 3;
  options.max_ports = 2;
  auto c = MakeClassifier(&pool, options);
  auto install = [&](uint32_t port, int shape) {
    return c->Install(PortFlow(port),
                      PortMask({{Field::kTpDst, 0xffffu << shape & 0xffff}}),
                      Out(port));
  };
  Megaflow* p1s0 = install(1, 0);
  Megaflow* p1s1 = install(1, 1);
  Megaflow* p2s0 = install(2, 0);
  ASSERT_NE(p1s0, nullptr);
  ASSERT_NE(p1s1, nullptr);
  ASSERT_NE(p2s0, nullptr);
  EXPECT_EQ(install(1, 2), nullptr);  // fourth subtable
  EXPECT_EQ(install(3, 0), nullptr);  // third port
  EXPECT_EQ(pool.live(), 3u);
  EXPECT_EQ(c->subtable_count(), 3u);
  EXPECT_EQ(c->port_count(), 2u);
  // Emptying port 2 frees its subtable and its port slot.
  c->Remove(p2s0);
  EXPECT_EQ(c->port_count(), 1u);
  Megaflow* p3 = install(3, 0);
  ASSERT_NE(p3, nullptr);
  FlowKey k = MakeFiveTupleKey(0, 0, 0, 0, 6, 3);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupBurst(3, &k, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, p3);
  k = MakeFiveTupleKey(0, 0, 0, 0, 6, 2);
  EXPECT_EQ(c->LookupBurst(2, &k, 1, &out, nullptr), 0u);
}

TEST(MegaflowClassifierTest, ConstantHashFillsBothBucketsThenFails) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.hash_override = &ConstantHash;
  auto c = MakeClassifier(&pool, options);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  std::vector<Megaflow*> mfs;
  for (int i = 0; i < 17; ++i) {
    Megaflow* mf = c->Install(PortFlow(4, {{Field::kTpDst, i}}), mask, Out(i));
    if (i < 2 * internal::kBucketEntries) {
      ASSERT_NE(mf, nullptr) << i;
      mfs.push_back(mf);
    } else {
      EXPECT_EQ(mf, nullptr);
    }
  }
  EXPECT_EQ(pool.live(), 16u);
  EXPECT_EQ(c->megaflow_count(), 16u);
  FlowKey keys[17];
  for (int i = 0; i < 17; ++i) keys[i] = MakeFiveTupleKey(0, 0, 0, i, 6, 4);
  Megaflow* out[17] = {};
  EXPECT_EQ(c->LookupBurst(4, keys, BurstMap(17), out, nullptr), 0xffffu);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], mfs[i]);
  c->Remove(mfs[5]);
  Megaflow* again =
      c->Install(PortFlow(4, {{Field::kTpDst, 16}}), mask, Out(16));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(c->LookupBurst(4, keys, BurstMap(17), out, nullptr),
            0x1ffffu & ~(1u << 5));
  EXPECT_EQ(out[16], again);
}

// Cuckoo moves under load: a small table filled to its pool capacity with
// the good hash keeps every megaflow reachable.
TEST(MegaflowClassifierTest, FullLoadWithCuckooMovesKeepsEverythingReachable) {
  MegaflowPool pool(1024);
  MegaflowClassifierOptions options;
  options.table_entries = 1024;  // load factor 1.0 at pool capacity
  auto c = MakeClassifier(&pool, options);
  const Flow mask = PortMask({{Field::kIpv4Dst, 0xffffffff}});
  std::vector<Megaflow*> mfs;
  for (uint32_t i = 0; i < 1024; ++i) {
    Megaflow* mf = c->Install(PortFlow(1, {{Field::kIpv4Dst, i * 2654435761u}}),
                              mask, Out(i));
    if (mf == nullptr) break;
    mfs.push_back(mf);
  }
  // Bucketised cuckoo with 8-way buckets holds > 90% before the first failure.
  EXPECT_GT(mfs.size(), 920u);
  ASSERT_TRUE(c->CheckInvariants().ok()) << c->CheckInvariants();
  for (size_t i = 0; i < mfs.size(); ++i) {
    FlowKey k = MakeFiveTupleKey(0, static_cast<uint32_t>(i) * 2654435761u, 0,
                                 0, 0, 1);
    Megaflow* out = nullptr;
    ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u) << i;
    ASSERT_EQ(out, mfs[i]);
  }
}

// Churn near full load (pool 480 of 512 table entries) with the good and the
// identity-like hash: cuckoo moves must leave every entry in one of its two
// buckets, and every live megaflow reachable.
class HighLoadTest : public ::testing::TestWithParam<HashCase> {};

TEST_P(HighLoadTest, CuckooChurnKeepsInvariants) {
  MegaflowPool pool(480);
  MegaflowClassifierOptions options;
  options.table_entries = 512;
  options.hash_override = GetParam().fn;
  auto c = MakeClassifier(&pool, options);
  const Flow mask =
      PortMask({{Field::kIpv4Src, 0xffffffff}, {Field::kIpv4Dst, 0xffffffff}});
  std::mt19937_64 rng(5);
  std::map<uint64_t, Megaflow*> live;
  size_t max_live = 0;
  int failed = 0;
  for (int step = 0; step < 1500 * kScale; ++step) {
    const uint64_t addrs = rng() % 1000;  // src and dst from one draw
    auto it = live.find(addrs);
    if (it != live.end()) {
      if (rng() % 4 == 0) {
        c->Remove(it->second);
        live.erase(it);
      }
      continue;
    }
    const Flow v = PortFlow(1, {{Field::kIpv4Src, addrs * 0x9e3779b1u},
                                {Field::kIpv4Dst, addrs * 0x01000193u}});
    if (Megaflow* mf = c->Install(v, mask, Out(1))) {
      live[addrs] = mf;
    } else {
      ++failed;
    }
    max_live = std::max(max_live, live.size());
    if (step % 8 == 0) {
      ASSERT_TRUE(c->CheckInvariants().ok()) << c->CheckInvariants();
    }
  }
  ASSERT_TRUE(c->CheckInvariants().ok()) << c->CheckInvariants();
  EXPECT_GE(max_live, 440u) << "failed inserts: " << failed;
  for (auto [addrs, mf] : live) {
    FlowKey k = MakeFiveTupleKey(static_cast<uint32_t>(addrs * 0x9e3779b1u),
                                 static_cast<uint32_t>(addrs * 0x01000193u), 0,
                                 0, 0, 1);
    Megaflow* out = nullptr;
    ASSERT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u);
    ASSERT_EQ(out, mf);
  }
}

// The constant hash holds only 16 entries: covered by the tests above.
INSTANTIATE_TEST_SUITE_P(Hashes, HighLoadTest,
                         ::testing::Values(kTestHashes[0], kTestHashes[1]),
                         HashCaseName);

// --------------------------------------------------------------- ports ----

TEST(MegaflowClassifierTest, PortsAreIsolated) {
  MegaflowPool pool(64);
  auto c = MakeClassifier(&pool);
  const Flow mask = PortMask({{Field::kTpDst, 0xffff}});
  Flow v = PortFlow(1, {{Field::kTpDst, 22}});
  Megaflow* m1 = c->Install(v, mask, Out(10));
  v.Set(Field::kInPort, 2);
  Megaflow* m2 = c->Install(v, mask, Out(20));
  ASSERT_NE(m1, nullptr);
  ASSERT_NE(m2, nullptr);
  EXPECT_NE(m1, m2);
  EXPECT_NE(m1->subtable, m2->subtable);  // one subtable list per port
  EXPECT_EQ(c->RankOf(m1->subtable), 0);
  EXPECT_EQ(c->RankOf(m2->subtable), 0);
  FlowKey k1 = MakeFiveTupleKey(0, 0, 0, 22, 6, 1);
  FlowKey k2 = MakeFiveTupleKey(0, 0, 0, 22, 6, 2);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupBurst(1, &k1, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, m1);
  EXPECT_EQ(c->LookupBurst(2, &k2, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, m2);
  // Removing port 1's megaflow does not disturb port 2.
  c->Remove(m1);
  EXPECT_EQ(c->LookupBurst(1, &k1, 1, &out, nullptr), 0u);
  EXPECT_EQ(c->LookupBurst(2, &k2, 1, &out, nullptr), 1u);
  EXPECT_EQ(c->port_count(), 1u);
}

// Port slots come and go (the in_port map deletes by backward shift); every
// present port must stay findable.
TEST(MegaflowClassifierTest, PortChurnKeepsEveryPortFindable) {
  MegaflowPool pool(64);
  MegaflowClassifierOptions options;
  options.max_ports = 8;
  auto c = MakeClassifier(&pool, options);
  std::mt19937 rng(7);
  std::map<uint32_t, Megaflow*> present;
  for (int step = 0; step < 300 * kScale; ++step) {
    // Few distinct values so the 16-cell map sees clusters and wrap-around.
    const uint32_t port = (rng() % 24) * 0x10001u;
    auto it = present.find(port);
    if (it != present.end()) {
      c->Remove(it->second);
      present.erase(it);
    } else {
      Megaflow* mf = c->Install(PortFlow(port), PortMask(), Out(port));
      if (present.size() < 8) {
        ASSERT_NE(mf, nullptr);
        present[port] = mf;
      } else {
        ASSERT_EQ(mf, nullptr);
      }
    }
    ASSERT_EQ(c->port_count(), present.size());
    for (auto [p, mf] : present) {
      FlowKey k = MakeFiveTupleKey(0, 0, 0, 0, 0, p);
      Megaflow* out = nullptr;
      ASSERT_EQ(c->LookupBurst(p, &k, 1, &out, nullptr), 1u) << p;
      ASSERT_EQ(out, mf);
    }
  }
}

// ------------------------------------------------ no allocation, clear ----

TEST(MegaflowClassifierTest, HotPathAndInstallRemoveRankNeverAllocate) {
  MegaflowPool pool(256);
  auto c = MakeClassifier(&pool);
  Generator gen(99);
  FlowKey keys[kMaxBurst];
  for (int i = 0; i < kMaxBurst; ++i)
    keys[i] = FlowKey::FromFlow(gen.RandomFlow(7));
  Megaflow* out[kMaxBurst];
  std::vector<Megaflow*> mfs;
  mfs.reserve(1000);
  const long before = g_allocations.load();
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 20; ++i) {
      auto [value, mask] = gen.RandomMegaflow();
      value.Set(Field::kInPort, 7);
      if (Megaflow* mf = c->Install(value, mask, Out(1))) mfs.push_back(mf);
    }
    uint64_t lookups = 0;
    c->LookupBurst(7, keys, ~0u, out, &lookups);
    if (!mfs.empty()) c->LookupInSubtable(mfs[0]->subtable, keys, ~0u, out);
    c->Rank();
    while (mfs.size() > 10) {
      c->Remove(mfs.back());
      mfs.pop_back();
    }
  }
  c->Clear();
  EXPECT_EQ(g_allocations.load(), before);
}

TEST(MegaflowClassifierTest, ClearEmptiesEverythingAndAllowsReuse) {
  MegaflowPool pool(32);
  auto c = MakeClassifier(&pool);
  for (uint32_t p = 0; p < 4; ++p)
    ASSERT_NE(c->Install(PortFlow(p), PortMask(), Out(p)), nullptr);
  Megaflow* stale = &pool.Get(0);
  const uint32_t version = stale->version;
  c->Clear();
  EXPECT_EQ(c->megaflow_count(), 0u);
  EXPECT_EQ(c->subtable_count(), 0u);
  EXPECT_EQ(c->port_count(), 0u);
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_NE(pool.Get(0).version, version);
  FlowKey k = MakeFiveTupleKey(0, 0, 0, 0, 0, 1);
  Megaflow* out = nullptr;
  EXPECT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 0u);
  Megaflow* mf = c->Install(PortFlow(1), PortMask(), Out(1));
  ASSERT_NE(mf, nullptr);
  EXPECT_EQ(c->LookupBurst(1, &k, 1, &out, nullptr), 1u);
  EXPECT_EQ(out, mf);
}

TEST(MegaflowClassifierTest, DebugStringShowsPortsRanksAndMasks) {
  MegaflowPool pool(16);
  auto c = MakeClassifier(&pool);
  ASSERT_NE(c->Install(PortFlow(12), PortMask({{Field::kIpv4Src, 0xffff0000}}),
                       Out(1)),
            nullptr);
  const std::string s = c->DebugString();
  EXPECT_THAT(s, HasSubstr("1 megaflows, 1 subtables, 1 ports"));
  EXPECT_THAT(s, HasSubstr("in_port 12:"));
  EXPECT_THAT(s, HasSubstr("rank 0: subtable 0"));
  EXPECT_THAT(s, HasSubstr("in_port,ipv4_src/0xffff0000"));
  EXPECT_THAT(s, HasSubstr(CpuHasAvx512Lookup() ? "fn avx512" : "fn specialised"));
}

}  // namespace
}  // namespace flowclass
