// e2e_util.h — small helpers shared by the end-to-end tests that run real
// processes (flowclassd, flowclassctl, prometheus): files, pcaps, temp dirs,
// shell commands, child processes and EAL daemons.
#ifndef FLOWCLASS_TESTS_COMMON_E2E_UTIL_H_
#define FLOWCLASS_TESTS_COMMON_E2E_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace flowclass {

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);
// A classic (microsecond) pcap file of Ethernet frames.
void WritePcap(const std::string& path,
               const std::vector<std::vector<uint8_t>>& frames);
// The frames of a pcap WritePcap (or net_pcap's tx_pcap) wrote; empty when
// the file is missing or has no header.
std::vector<std::vector<uint8_t>> ReadPcap(const std::string& path);

// Runs `cmd` with popen (a shell command line: add " 2>&1" to capture
// stderr too) and returns its exit code (-1 when it could not be started or
// did not exit normally) and its stdout.
struct CmdResult {
  int code = -1;
  std::string out;
};
CmdResult RunCommand(const std::string& cmd);

// `line` from `tag` on when `tag` starts the line or a word of it (a
// flowclassd log line has a timestamp, a level and "flowclassd: " before
// its message: server/log.h), else "".
absl::string_view LogMessageFrom(absl::string_view line, absl::string_view tag);

// The key=value fields with a numeric value of the first line of `output`
// whose LogMessageFrom(line, prefix) is not empty (flowclassd's "stats" /
// "final" lines).
std::map<std::string, uint64_t> OutputFields(const std::string& output,
                                             const std::string& prefix);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0,
// then released), for a server the test starts.
int FreePort();

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

// A child process (argv[0] is the binary's path) with stdout and stderr in
// the file `out`; killed by PID at destruction if still running, and by the
// kernel if the test process dies first (PR_SET_PDEATHSIG: create it on the
// thread that outlives it, the test's own).
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, const std::string& out);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void Signal(int sig);
  // True once the process has a handler installed for `sig` (its SigCgt in
  // /proc/<pid>/status): a signal sent after that is not fatal.
  bool CatchesSignal(int sig) const;
  // Exit code; -1 on timeout (the process is then killed), -2 when it was
  // ended by a signal.
  int Wait(double seconds);
  // SIGTERM, then Wait(seconds): a daemon's clean stop.
  int Stop(double seconds);
  // False once the process has exited (reaps it; Wait() then returns -2).
  bool Running();
  std::string Output() const { return ReadFile(out_); }

 private:
  std::string out_;
  int pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// A flowclassd (or other EAL program) child: `binary` `args`... --file-prefix
// `prefix`, stdout and stderr in `out`.  At destruction it is killed by PID
// and EAL's runtime directory of `prefix` is removed.
class EalDaemonProcess : public ChildProcess {
 public:
  EalDaemonProcess(const std::string& binary,
                   const std::vector<std::string>& args,
                   const std::string& prefix, const std::string& out);
  ~EalDaemonProcess();
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
};

// The text after `tag` on the first line of `p`'s output that contains it,
// up to the first character of `stop` (or the line's end): e.g. the address
// of "flowclassd: grpc listening on 127.0.0.1:PORT (...)".  "" after
// `seconds`, or once `p` exited without printing it.
std::string WaitForOutputAfter(ChildProcess& p, const std::string& tag, double seconds,
                               const std::string& stop = " ");

// Removes EAL's runtime directory of a unique --file-prefix (root:
// /var/run/dpdk, others: $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk).
void RemoveEalRuntimeDir(const std::string& prefix);

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_E2E_UTIL_H_
