// SseParser: incremental parsing of a text/event-stream body (Server-Sent Events, WHATWG HTML
// §9.2.6) into the data payloads of its events.
//
// Lines end with CRLF, LF or CR, which may be split across Feed calls. "data:" lines (one
// optional space after the colon stripped) accumulate, joined by "\n"; a blank line dispatches
// the event if it has data. Comments (":...") and other fields (event, id, retry) are ignored.
// An unfinished event at the end of the stream is dropped, as the standard says.
//
// Thread rules: not thread-safe; one stream's reader owns it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"

namespace strata::bench {

class SseParser {
 public:
  // Parses `input`, appending each completed event's data to `*events`. kDataLoss when a line
  // exceeds 16 MiB (a stream that is not SSE).
  Status Feed(std::string_view input, std::vector<std::string>* events);

 private:
  void EndLine(std::vector<std::string>* events);

  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool skip_lf_ = false;  // the previous byte was a CR ending a line: a following LF is its pair
};

}  // namespace strata::bench
