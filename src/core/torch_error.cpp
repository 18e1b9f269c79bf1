#include "saturate/core/torch_error.h"

#include <cstring>
#include <typeinfo>

#include <c10/util/Exception.h>

namespace saturate {
namespace {

bool starts_with(const std::string& s, size_t at, const char* prefix) {
  return s.compare(at, std::strlen(prefix), prefix) == 0;
}

}  // namespace

// The message without the TorchScript tracebacks: their indented lines quote the model's source
// code (comments and names included), which must not make an ordinary error look like an OOM.
std::string without_script_traceback(const std::string& msg) {
  std::string out;
  out.reserve(msg.size());
  bool in_traceback = false;
  size_t pos = 0;
  while (pos < msg.size()) {
    size_t end = msg.find('\n', pos);
    if (end == std::string::npos) end = msg.size();
    const bool indented = pos < end && (msg[pos] == ' ' || msg[pos] == '\t');
    if (starts_with(msg, pos, "Traceback of TorchScript")) {
      in_traceback = true;
    } else if (in_traceback && indented) {
      // a source line, its "~~~ <--- HERE" marker or a "File ..., line N" line: skipped
    } else {
      in_traceback = false;
      out.append(msg, pos, end - pos).push_back('\n');
    }
    pos = end + 1;
  }
  return out;
}

std::string torch_error_text(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = without_script_traceback(c10_error ? c10_error->what_without_backtrace() : e.what());
  // TorchScript's frame: "The following operation failed in the TorchScript interpreter." and
  // the error itself after "RuntimeError: "
  const std::string frame = "The following operation failed in the TorchScript interpreter.\n";
  if (text.rfind(frame, 0) == 0) text = text.substr(frame.size());
  if (const size_t at = text.find("RuntimeError: "); at != std::string::npos) text = text.substr(at + 14);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.empty())
    return std::string("an error without a message (") + typeid(e).name() +
           "): when it follows another rank's exit, that rank's error says what happened";
  for (const char* mark : {"shapes cannot be multiplied", "size mismatch", "Expected input batch_size",
                           "Given groups=", "expected input", "must match the size of tensor"})
    if (text.find(mark) != std::string::npos)
      return text + " (the model's forward does not take the batch it was given: the model's `input` and the "
                    "data's samples differ; give `input` as the model takes it)";
  return text;
}

}  // namespace saturate
