#include "partita/error.h"

namespace partita {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidModel: return "invalid model";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kInvalidArtifact: return "invalid artifact";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kInternal: return "internal error";
  }
  return "error";
}

}  // namespace partita
