// eal.cc — EAL: the argv flowclassd and the tests hand to rte_eal_init, and
// its one initialisation per process.  Main thread only (see
// dpdk_dataplane.h).
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"

namespace flowclass {
namespace {

std::atomic<bool> g_eal_initialized{false};

}  // namespace

absl::Status dpdk_internal::DpdkError(absl::string_view what, int err) {
  return absl::InternalError(
      absl::StrCat(what, ": ", rte_strerror(err < 0 ? -err : err)));
}

static_assert(kMaxEalLcores == RTE_MAX_LCORE, "kMaxEalLcores must be DPDK's RTE_MAX_LCORE");

std::vector<std::string> BuildEalArgs(const EalOptions& o) {
  std::vector<std::string> a = {o.program};
  if (!o.lcore_map.empty()) {
    a.push_back("--lcores=" + o.lcore_map);
  } else {
    std::vector<int> lc = {o.main_lcore};
    for (int l : o.pmd_lcores)
      if (std::find(lc.begin(), lc.end(), l) == lc.end()) lc.push_back(l);
    a.push_back("-l");
    a.push_back(absl::StrJoin(lc, ","));
  }
  a.push_back(absl::StrCat("--main-lcore=", o.main_lcore));
  if (!o.hugepages) a.push_back("--no-huge");
  if (o.memory_mb > 0) {
    a.push_back("-m");
    a.push_back(absl::StrCat(o.memory_mb));
  }
  if (!o.file_prefix.empty()) a.push_back("--file-prefix=" + o.file_prefix);
  // Only configured PCI devices are probed: with none (and no -a / -b of
  // the user's own in extra_args), none at all, rather than every device
  // EAL can bind.
  // (The config allow-lists the PCI devices a vdev port names too, such as
  // net_bonding's slave=0000:3b:00.0.)
  bool user_picks_pci = false;
  for (const std::string& e : o.extra_args)
    for (const char* f : {"-a", "-b", "--allow", "--block"})
      user_picks_pci |= absl::StartsWith(e, f);
  if (!o.pci || (o.pci_allow.empty() && !user_picks_pci)) a.push_back("--no-pci");
  for (const std::string& p : o.pci_allow) {
    a.push_back("-a");
    a.push_back(p);
  }
  for (const std::string& v : o.vdevs) a.push_back("--vdev=" + v);
  if (!o.log_level.empty()) a.push_back("--log-level=" + o.log_level);
  for (const std::string& e : o.extra_args) a.push_back(e);
  return a;
}

absl::Status InitEal(const EalOptions& opts) {
  if (g_eal_initialized.load()) {
    return absl::FailedPreconditionError(
        "eal: already initialised in this process (DPDK allows it once)");
  }
  std::vector<std::string> args = BuildEalArgs(opts);
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (rc < 0) {
    // Some refusals leave rte_errno 0 ("Success"): e.g. another primary
    // process holding the file prefix.  EAL printed its reason on stderr.
    const std::string why =
        rte_errno != 0 ? rte_strerror(rte_errno)
                       : "EAL gave no error code; its own message is above (another running "
                         "process with this eal.file_prefix, an lcore the machine lacks, "
                         "too little memory, ...)";
    return absl::InternalError(absl::StrCat("eal: rte_eal_init failed: ", why, " (args: ",
                                            absl::StrJoin(args, " "), ")"));
  }
  g_eal_initialized.store(true);
  return absl::OkStatus();
}

bool EalInitialized() { return g_eal_initialized.load(); }

void CleanupEal() {
  if (g_eal_initialized.exchange(false)) rte_eal_cleanup();
}

}  // namespace flowclass
