// testing/ring_ports.h — what the in-process DpdkDataplane tests share: one
// EAL per test binary (a gtest environment), net_ring ports whose rings the
// test holds (it injects frames into rx rings and reads what the PMDs sent
// from tx rings), tagged packets and the reference classifier's answer.
//
// Test-only: included by exactly one source file of each dpdk_dataplane_*
// test binary, which registers the environment:
//   const auto* const kEnv =
//       ::testing::AddGlobalTestEnvironment(new EalEnvironment("<binary>"));
// Everything here runs on the test's (main, EAL main lcore) thread.
#ifndef FLOWCLASS_DATAPLANE_DPDK_TESTING_RING_PORTS_H_
#define FLOWCLASS_DATAPLANE_DPDK_TESTING_RING_PORTS_H_

#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "gtest/gtest.h"
#include "tests/common/packet_builder.h"
#include "tests/common/reference_classifier.h"

namespace flowclass {
namespace dpdk_testing {

using Clock = std::chrono::steady_clock;

inline constexpr size_t kTagOffset = 48;  // inside the zero padding of a 64-byte frame

// Mbufs the tests inject come from here (made by the environment).
inline rte_mempool* g_test_pool = nullptr;

class EalEnvironment : public ::testing::Environment {
 public:
  explicit EalEnvironment(std::string program) : program_(std::move(program)) {}
  void SetUp() override {
    EalOptions o;
    o.program = program_;
    o.main_lcore = 0;
    o.lcore_map = "0@0,1@1,2@1,3@0";  // 4 lcores on (at most) 2 CPUs
    o.hugepages = false;
    o.memory_mb = 256;
    o.pci = false;
    o.file_prefix = absl::StrCat("fc_dpt_", getpid());
    o.log_level = "error";
    absl::Status st = InitEal(o);
    ASSERT_TRUE(st.ok()) << st;
    g_test_pool = rte_pktmbuf_pool_create("test_inject", 32767, 256, 0,
                                          RTE_MBUF_DEFAULT_BUF_SIZE,
                                          static_cast<int>(rte_socket_id()));
    ASSERT_NE(g_test_pool, nullptr);
  }
  void TearDown() override {
    // EAL leaves /var/run/dpdk/<prefix>; ours is unique per run, so remove it.
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    CleanupEal();
    std::error_code ec;
    if (runtime_dir.find("fc_dpt_") != std::string::npos)
      std::filesystem::remove_all(runtime_dir, ec);
  }

 private:
  std::string program_;
};

// A net_ring ethdev whose rings the test holds.  All tx queues share one
// multi-producer ring so the test reads one ring per port.
struct RingPort {
  std::string name;
  std::vector<rte_ring*> rx;
  rte_ring* tx = nullptr;

  static RingPort Make(const std::string& name, int rx_queues, int tx_queues) {
    static int seq = 0;
    RingPort p;
    p.name = "net_ring_" + name;  // the ethdev name rte_eth_from_rings gives
    for (int q = 0; q < rx_queues; ++q) {
      p.rx.push_back(rte_ring_create(absl::StrCat("r", seq++).c_str(), 1024,
                                     static_cast<int>(rte_socket_id()), 0));
      EXPECT_NE(p.rx.back(), nullptr);
    }
    p.tx = rte_ring_create(absl::StrCat("t", seq++).c_str(), 8192,
                           static_cast<int>(rte_socket_id()), 0);
    EXPECT_NE(p.tx, nullptr);
    std::vector<rte_ring*> txs(static_cast<size_t>(tx_queues), p.tx);
    const int id = rte_eth_from_rings(name.c_str(), p.rx.data(),
                                      static_cast<unsigned>(rx_queues), txs.data(),
                                      static_cast<unsigned>(tx_queues),
                                      rte_socket_id());
    EXPECT_GE(id, 0) << name;
    uint16_t by_name = 0;
    EXPECT_EQ(rte_eth_dev_get_port_by_name(p.name.c_str(), &by_name), 0) << p.name;
    EXPECT_EQ(by_name, id);
    return p;
  }
};

inline Flow UdpFlow(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport,
             uint8_t proto = kIpProtoUdp) {
  Flow f;
  f.Set(Field::kEthDst, 0x020000000002);
  f.Set(Field::kEthSrc, 0x020000000001);
  f.Set(Field::kEthType, kEthTypeIpv4);
  f.Set(Field::kIpv4Src, src);
  f.Set(Field::kIpv4Dst, dst);
  f.Set(Field::kNwProto, proto);
  f.Set(Field::kNwTtl, 64);
  f.Set(Field::kTpSrc, sport);
  f.Set(Field::kTpDst, dport);
  return f;
}

// An mbuf holding the frame for `f` with `tag` written into its padding.
inline rte_mbuf* MakePacket(const Flow& f, uint64_t tag) {
  std::vector<uint8_t> frame = BuildFrameFromFlow(f, 64);
  if (frame.size() < kTagOffset + 8) frame.resize(kTagOffset + 8);
  std::memcpy(frame.data() + kTagOffset, &tag, 8);
  rte_mbuf* m = rte_pktmbuf_alloc(g_test_pool);
  if (!m) return nullptr;
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
  std::memcpy(p, frame.data(), frame.size());
  return m;
}

inline uint64_t TagOf(rte_mbuf* m) {
  uint64_t tag;
  std::memcpy(&tag, rte_pktmbuf_mtod_offset(m, const uint8_t*, kTagOffset), 8);
  return tag;
}

// The reference classifier's answer: the output port or -1.
inline int Expected(const ReferenceClassifier& reference, Flow key, uint32_t in_port) {
  key.Set(Field::kInPort, in_port);
  const Rule* best = reference.Lookup(key);
  if (!best || best->action.kind != Action::Kind::kOutput) return -1;
  return static_cast<int>(best->action.port);
}

inline PortOptions Port(uint32_t number, const std::string& device, bool poll = true,
                 int rx_queues = 1) {
  PortOptions p;
  p.number = number;
  p.device = device;
  p.poll = poll;
  p.rx_queues = rx_queues;
  return p;
}

inline bool WaitFor(const std::function<bool()>& pred, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return pred();
}

inline uint64_t TotalRx(const DpdkDataplane& dp) { return dp.Stats().Total().rx_packets; }

// Drains a tx ring: (port number, tag) for every packet, mbufs freed.
inline void DrainRing(rte_ring* r, uint32_t port,
                      std::vector<std::pair<uint32_t, uint64_t>>* out) {
  void* objs[64];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(r, objs, 64, nullptr)) > 0) {
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = static_cast<rte_mbuf*>(objs[i]);
      out->emplace_back(port, TagOf(m));
      rte_pktmbuf_free(m);
    }
  }
}

}  // namespace dpdk_testing
}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_DPDK_TESTING_RING_PORTS_H_
