// text_file.h — reading a whole file as text, with errors that name it.
//
// Every file flowclassd and flowclassctl read (config, rules, traces, TLS
// certificates and keys) is read with ReadTextFile, so they all fail the same
// way.  Control path only (allocates); any thread.
#ifndef FLOWCLASS_COMMON_TEXT_FILE_H_
#define FLOWCLASS_COMMON_TEXT_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace flowclass {

// The whole content of `path` (any readable file: a pipe or /dev/stdin too).
// NOT_FOUND "<path>: cannot open: <reason>" when it cannot be opened,
// FAILED_PRECONDITION "<path>: cannot read: <reason>" when reading fails (a
// directory opens but is not readable: it is never taken for an empty file).
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace flowclass

#endif  // FLOWCLASS_COMMON_TEXT_FILE_H_
