// log.h — flowclassd's log: levelled, timestamped lines, text or JSON, through
// spdlog (Debian's libspdlog-dev).
//
// Contract
// --------
// One line a message, the time in UTC with milliseconds, the level named as
// log.level takes it (debug, info, warn, error):
//   text: 2026-12-07T11:40:00.123Z info flowclassd: grpc listening on 127.0.0.1:50051 (plaintext)
//   json: {"ts":"2026-12-07T11:40:00.123Z","level":"info","msg":"grpc listening on ..."}
// Text keeps each message's words after "flowclassd: " (what scripts and
// tests look for); JSON escapes the message so every line is one JSON object,
// whatever bytes it holds (invalid UTF-8 becomes U+FFFD).  Lines below
// LogOptions::level are dropped.  debug and info lines go to the `out` sink
// (the daemon: stdout), warn and error to `err` (stderr), each line flushed.
//
// Threads: a logger may be used from any thread (spdlog's _mt sinks).  The
// daemon logs from its control thread and the gRPC and /metrics threads;
// never from a PMD: the per-packet path logs nothing.  SetUpDaemonLog
// replaces spdlog's default logger, so it runs before any thread logs.
#ifndef FLOWCLASS_SERVER_LOG_H_
#define FLOWCLASS_SERVER_LOG_H_

#include <memory>
#include <string>
#include <string_view>

#include "server/log_options.h"
#include "spdlog/spdlog.h"

namespace flowclass {

// The logger "flowclassd" over two sinks, formatted as `options` says.
std::shared_ptr<spdlog::logger> NewLogger(const LogOptions& options, spdlog::sink_ptr out,
                                          spdlog::sink_ptr err);

// NewLogger(options, stdout, stderr) as spdlog's default logger: what
// spdlog::info(...) and friends write to.  Call while no other thread logs.
void SetUpDaemonLog(const LogOptions& options);

spdlog::level::level_enum ToSpdlogLevel(LogLevel level);

// Each line of `text` ('\n'-separated; a final '\n' ends the last line) as a
// message of its own at `level`: multi-line reports keep a timestamp a line.
void LogLines(spdlog::logger& log, LogLevel level, std::string_view text);

// `s` as the inside of a JSON string (RFC 8259): quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by \ufffd.
std::string JsonEscape(std::string_view s);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_LOG_H_
