// log_options.h — flowclassd's log settings (config keys log.level and
// log.format, flags --log-level and --log-format); the sink is server/log.h.
//
// Plain values, no logging library here: the config parser and its fuzzer
// use them without linking one.
#ifndef FLOWCLASS_SERVER_LOG_OPTIONS_H_
#define FLOWCLASS_SERVER_LOG_OPTIONS_H_

#include <array>
#include <optional>
#include <string_view>

namespace flowclass {

// The least severe level printed; every line carries its level.
enum class LogLevel { kDebug, kInfo, kWarn, kError };
// text: "TIMESTAMP LEVEL flowclassd: MESSAGE"; json: one object a line,
// {"ts": ..., "level": ..., "msg": ...}.
enum class LogFormat { kText, kJson };

struct LogOptions {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};

// The names the config keys and flags take, which the lines also print.
inline constexpr std::array<std::string_view, 4> kLogLevelNames = {"debug", "info", "warn",
                                                                   "error"};
inline constexpr std::array<std::string_view, 2> kLogFormatNames = {"text", "json"};

inline std::string_view LogLevelName(LogLevel l) { return kLogLevelNames[static_cast<int>(l)]; }
inline std::string_view LogFormatName(LogFormat f) {
  return kLogFormatNames[static_cast<int>(f)];
}

// nullopt for anything but one of the names above.
inline std::optional<LogLevel> ParseLogLevel(std::string_view s) {
  for (size_t i = 0; i < kLogLevelNames.size(); ++i)
    if (s == kLogLevelNames[i]) return static_cast<LogLevel>(i);
  return std::nullopt;
}
inline std::optional<LogFormat> ParseLogFormat(std::string_view s) {
  for (size_t i = 0; i < kLogFormatNames.size(); ++i)
    if (s == kLogFormatNames[i]) return static_cast<LogFormat>(i);
  return std::nullopt;
}

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_LOG_OPTIONS_H_
