// completion.h — `flowclassctl completion bash`: a bash completion script
// generated from flowclassctl's command table (the commands, their options
// and the fixed values an option takes), so that it cannot drift from the
// parser.
#ifndef FLOWCLASS_CLIENT_COMPLETION_H_
#define FLOWCLASS_CLIENT_COMPLETION_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace flowclass {

struct CompletionCommand {
  std::string name;
  std::vector<std::string> options;  // "--format", "-o", ...
  // Options with a fixed set of values ("--format" -> auto, native, classbench).
  std::map<std::string, std::vector<std::string>> values;
  std::vector<std::string> words;  // first positional words ("get", "set")
};

// The options a help text names ("--name" tokens, in order, once each).
std::vector<std::string> OptionsInHelp(absl::string_view help);

// The values of options written "--name a|b|c" in a help text.
std::map<std::string, std::vector<std::string>> OptionValuesInHelp(absl::string_view help);

// The script: completes the command names (and `extra_words`: help,
// version, ...), each command's options, an option's fixed values, a
// command's first words, else file names.  Defines _flowclassctl and
// registers it for `flowclassctl`.
std::string BashCompletionScript(const std::vector<CompletionCommand>& commands,
                                 const std::vector<std::string>& extra_words);

}  // namespace flowclass

#endif  // FLOWCLASS_CLIENT_COMPLETION_H_
