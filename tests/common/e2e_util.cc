#include "tests/common/e2e_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
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

std::vector<std::vector<uint8_t>> ReadPcap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::vector<uint8_t>> frames;
  uint32_t hdr[6];
  if (!in.read(reinterpret_cast<char*>(hdr), sizeof(hdr))) return frames;
  uint32_t rec[4];
  while (in.read(reinterpret_cast<char*>(rec), sizeof(rec))) {
    std::vector<uint8_t> f(rec[2]);
    in.read(reinterpret_cast<char*>(f.data()), rec[2]);
    frames.push_back(std::move(f));
  }
  return frames;
}

CmdResult RunCommand(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

absl::string_view LogMessageFrom(absl::string_view line, absl::string_view tag) {
  for (size_t at = line.find(tag); at != absl::string_view::npos; at = line.find(tag, at + 1))
    if (at == 0 || line[at - 1] == ' ') return line.substr(at);
  return "";
}

std::map<std::string, uint64_t> OutputFields(const std::string& output,
                                             const std::string& prefix) {
  std::map<std::string, uint64_t> m;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = LogMessageFrom(line, prefix);
    if (line.empty()) continue;
    for (absl::string_view kv : absl::StrSplit(line, ' ')) {
      std::pair<std::string, std::string> p =
          absl::StrSplit(kv, absl::MaxSplits('=', 1));
      uint64_t v;
      if (absl::SimpleAtoi(p.second, &v)) m[p.first] = v;
    }
    break;
  }
  return m;
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
  path_ = mkdtemp(tmpl.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(path_, ec);
}

ChildProcess::ChildProcess(std::vector<std::string> argv, const std::string& out)
    : out_(out) {
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Dies with the test (killed by ctest's timeout, say) instead of staying
    // behind with its ports and EAL prefix; kept across exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !exited_) kill(pid_, sig);
}

bool ChildProcess::CatchesSignal(int sig) const {
  if (pid_ <= 0 || exited_) return false;
  for (absl::string_view line :
       absl::StrSplit(ReadFile("/proc/" + std::to_string(pid_) + "/status"), '\n')) {
    uint64_t mask = 0;
    if (absl::ConsumePrefix(&line, "SigCgt:") &&
        absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &mask))
      return (mask >> (sig - 1)) & 1;
  }
  return false;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

bool ChildProcess::Running() {
  if (exited_) return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

int ChildProcess::Wait(double seconds) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (!Running()) return WIFEXITED(status_) ? WEXITSTATUS(status_) : -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  exited_ = true;
  return -1;
}

int ChildProcess::Stop(double seconds) {
  Signal(SIGTERM);
  return Wait(seconds);
}

std::string WaitForOutputAfter(ChildProcess& p, const std::string& tag, double seconds,
                               const std::string& stop) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (absl::string_view line : absl::StrSplit(p.Output(), '\n')) {
      const size_t at = line.find(tag);
      if (at == absl::string_view::npos) continue;
      line.remove_prefix(at + tag.size());
      return std::string(line.substr(0, line.find_first_of(stop)));
    }
    if (!p.Running()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

namespace {
std::vector<std::string> EalArgv(const std::string& binary,
                                 std::vector<std::string> args,
                                 const std::string& prefix) {
  args.insert(args.begin(), binary);
  args.push_back("--file-prefix");
  args.push_back(prefix);
  return args;
}
}  // namespace

EalDaemonProcess::EalDaemonProcess(const std::string& binary,
                                   const std::vector<std::string>& args,
                                   const std::string& prefix,
                                   const std::string& out)
    : ChildProcess(EalArgv(binary, args, prefix), out), prefix_(prefix) {}

EalDaemonProcess::~EalDaemonProcess() {
  Signal(SIGKILL);
  Wait(10);
  RemoveEalRuntimeDir(prefix_);
}

void RemoveEalRuntimeDir(const std::string& prefix) {
  std::error_code ec;
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  for (const std::string& base :
       {std::string("/var/run/dpdk"), std::string(xdg ? xdg : "/tmp") + "/dpdk"}) {
    std::filesystem::remove_all(base + "/" + prefix, ec);
  }
}

}  // namespace flowclass
