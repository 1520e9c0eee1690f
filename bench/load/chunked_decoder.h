// ChunkedDecoder: incremental decoding of HTTP/1.1 chunked transfer coding (RFC 9112 §7.1).
//
// Bytes may arrive split anywhere (inside a size line, a CRLF, a chunk); each Feed appends the
// chunk data decoded so far. Chunk extensions and trailer fields are skipped. A bare LF is
// accepted where CRLF is due (RFC 9112 §2.2 lets a recipient do so).
//
// Thread rules: not thread-safe; one connection's reader owns it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::bench {

class ChunkedDecoder {
 public:
  // Decodes `input`, appending chunk data to `*out`. kDataLoss on malformed framing (the
  // decoder is then stuck in error). Bytes after the final chunk are ignored.
  Status Feed(std::string_view input, std::string* out);

  // True once the last chunk (size 0) and its trailer section have been read.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSizeLine, kData, kDataEnd, kTrailer, kDone, kError };

  Status Fail(std::string message);

  State state_ = State::kSizeLine;
  std::string line_;  // the partial size or trailer line
  uint64_t remaining_ = 0;
  bool saw_cr_ = false;  // the CR of the CRLF after a chunk's data was read
};

}  // namespace strata::bench
