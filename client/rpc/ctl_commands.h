// ctl_commands.h — the flowclassctl subcommands that talk to a flowclassd
// over flowclass.v1: add-rules, replace-rules, del-rules, dump-rules, stats, config, trace,
// lookup-impl, dump-megaflows, stats-clear.  flowclassctl_main.cc dispatches to RunRpcCommand.
//
// Every command prints its results on stdout and its errors on stderr
// ("flowclassctl <cmd>: <message>") and returns one of the exit codes below,
// which docs/flowclassctl.md lists.  Single-threaded except add-rules, which
// uses the client library's writer thread.
#ifndef FLOWCLASS_CLIENT_RPC_CTL_COMMANDS_H_
#define FLOWCLASS_CLIENT_RPC_CTL_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/completion.h"

namespace flowclass {

// Shared with `replay` (flowclassctl_main.cc): 0 ok, 1 replay mismatches,
// 2 usage, 3 bad input file.
inline constexpr int kCtlExitOk = 0;
// diff-rules: the server's rule set and the file differ (like diff).
inline constexpr int kCtlExitDiffers = 1;
inline constexpr int kCtlExitUsage = 2;
inline constexpr int kCtlExitBadInput = 3;
// The server answered with an error (a rejected batch, NOT_FOUND, ...).
inline constexpr int kCtlExitRejected = 4;
// No answer: cannot connect, TLS failure, deadline exceeded, cancelled.
inline constexpr int kCtlExitUnavailable = 5;

// Lines for the main help text.
extern const char kRpcCommandsHelp[];

bool IsRpcCommand(absl::string_view cmd);
// The commands above with their options (connection options included) and
// the values of those that take a fixed set, for `flowclassctl completion`.
std::vector<CompletionCommand> RpcCompletionCommands();
int RunRpcCommand(absl::string_view cmd, const std::vector<absl::string_view>& args);

}  // namespace flowclass

#endif  // FLOWCLASS_CLIENT_RPC_CTL_COMMANDS_H_
