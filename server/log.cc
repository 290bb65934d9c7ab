#include "server/log.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace flowclass {
namespace {

// Length of the well-formed UTF-8 sequence that starts at s[i] of at least
// two bytes (Unicode's table 3-7), 0 when there is none.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = byte(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // no overlong forms
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xbf) return 0;
  return n;
}

std::string_view LevelName(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return LogLevelName(LogLevel::kDebug);
    case spdlog::level::info:
      return LogLevelName(LogLevel::kInfo);
    case spdlog::level::warn:
      return LogLevelName(LogLevel::kWarn);
    default:
      return LogLevelName(LogLevel::kError);
  }
}

void Append(std::string_view s, spdlog::memory_buf_t& dest) {
  dest.append(s.data(), s.data() + s.size());
}

// %~: the level as log.level names it ("warn", not spdlog's "warning").
class LevelFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& m, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    Append(LevelName(m.level), dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelFlag>();
  }
};

// %*: the message, escaped for a JSON string.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& m, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    Append(JsonEscape(std::string_view(m.payload.data(), m.payload.size())), dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

std::unique_ptr<spdlog::formatter> NewFormatter(LogFormat format) {
  constexpr const char* kTime = "%Y-%m-%dT%H:%M:%S.%eZ";
  const std::string pattern =
      format == LogFormat::kJson
          ? absl::StrFormat(R"({"ts":"%s","level":"%%~","msg":"%%*"})", kTime)
          : absl::StrFormat("%s %%~ %%n: %%v", kTime);
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  f->add_flag<LevelFlag>('~').add_flag<JsonMessageFlag>('*').set_pattern(pattern);
  return f;
}

// debug and info to `out`, warn and error to `err`.
class SplitSink final : public spdlog::sinks::sink {
 public:
  SplitSink(spdlog::sink_ptr out, spdlog::sink_ptr err)
      : out_(std::move(out)), err_(std::move(err)) {}
  void log(const spdlog::details::log_msg& m) override {
    (m.level >= spdlog::level::warn ? err_ : out_)->log(m);
  }
  void flush() override {
    out_->flush();
    err_->flush();
  }
  void set_pattern(const std::string& pattern) override {
    out_->set_pattern(pattern);
    err_->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
    out_->set_formatter(f->clone());
    err_->set_formatter(std::move(f));
  }

 private:
  spdlog::sink_ptr out_, err_;
};

}  // namespace

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const size_t n = Utf8SequenceLength(s, i); n != 0) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\\ufffd";
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          absl::StrAppendFormat(&out, "\\u%04x", c);
        else
          out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  return out;
}

spdlog::level::level_enum ToSpdlogLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger> NewLogger(const LogOptions& options, spdlog::sink_ptr out,
                                          spdlog::sink_ptr err) {
  auto sink = std::make_shared<SplitSink>(std::move(out), std::move(err));
  sink->set_formatter(NewFormatter(options.format));
  auto logger = std::make_shared<spdlog::logger>("flowclassd", std::move(sink));
  logger->set_level(ToSpdlogLevel(options.level));
  logger->flush_on(spdlog::level::trace);  // every line
  return logger;
}

void SetUpDaemonLog(const LogOptions& options) {
  spdlog::set_default_logger(NewLogger(options, std::make_shared<spdlog::sinks::stdout_sink_mt>(),
                                       std::make_shared<spdlog::sinks::stderr_sink_mt>()));
}

void LogLines(spdlog::logger& log, LogLevel level, std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.empty()) return;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n'))
    log.log(ToSpdlogLevel(level), "{}", std::string_view(line.data(), line.size()));
}

}  // namespace flowclass
