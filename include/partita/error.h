// partita::Error: the one exception type partita throws. It carries a code (what kind
// of failure) and a message that names what went wrong and where.
#pragma once

#include <stdexcept>
#include <string>

namespace partita {

enum class ErrorCode {
  kInvalidModel,     // a malformed or inconsistent model file
  kUnsupported,      // a valid model using something partita does not implement
  kInvalidArgument,  // bad input from the caller: shape, dtype, name, option
  kInvalidArtifact,  // a corrupted, truncated or foreign .pta file
  kIo,               // the file system said no
  kInternal,         // a bug in partita
};

const char* errorCodeName(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace partita
