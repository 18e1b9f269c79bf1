// Implements: a LibTorch error as a person reads it: the C++ backtrace and the TorchScript
// traceback (the model's source, quoted line by line) left out, the error itself kept; a shape
// mismatch between the model and its input said as such, with what to check; an exception
// without a message named by what it is instead of an empty line.
#pragma once
#include <exception>
#include <string>

namespace saturate {

/// The message of `e` (a c10::Error, a TorchScript JITException, any std::exception) for an
/// error line: one or a few lines, never empty.
std::string torch_error_text(const std::exception& e);

/// The message without TorchScript's tracebacks (their indented source lines and markers).
std::string without_script_traceback(const std::string& message);

}  // namespace saturate
