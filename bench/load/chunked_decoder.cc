#include "bench/load/chunked_decoder.h"

#include <algorithm>

namespace strata::bench {

namespace {
constexpr size_t kMaxLine = 4096;
constexpr uint64_t kMaxChunk = uint64_t{1} << 40;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Status ChunkedDecoder::Fail(std::string message) {
  state_ = State::kError;
  return DataLossError("chunked encoding: " + message);
}

Status ChunkedDecoder::Feed(std::string_view input, std::string* out) {
  size_t i = 0;
  while (i < input.size()) {
    switch (state_) {
      case State::kError:
        return DataLossError("chunked encoding: fed after an error");
      case State::kDone:
        return OkStatus();
      case State::kSizeLine:
      case State::kTrailer: {
        const char c = input[i++];
        if (c != '\n') {
          line_ += c;
          if (line_.size() > kMaxLine) return Fail("line longer than 4096 bytes");
          break;
        }
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        if (state_ == State::kTrailer) {
          if (line_.empty()) state_ = State::kDone;
          line_.clear();
          break;
        }
        // chunk-size [ ; extensions ]
        const std::string_view size_text =
            std::string_view(line_).substr(0, std::min(line_.find(';'), line_.size()));
        size_t end = size_text.find_last_not_of(" \t");
        if (end == std::string_view::npos) return Fail("empty chunk size line");
        uint64_t size = 0;
        for (size_t k = 0; k <= end; ++k) {
          const int d = HexDigit(size_text[k]);
          if (d < 0) return Fail("bad chunk size '" + line_ + "'");
          size = size * 16 + static_cast<uint64_t>(d);
          if (size > kMaxChunk) return Fail("chunk size too large");
        }
        line_.clear();
        remaining_ = size;
        state_ = size == 0 ? State::kTrailer : State::kData;
        break;
      }
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, input.size() - i));
        out->append(input.data() + i, n);
        i += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::kDataEnd;
        break;
      }
      case State::kDataEnd: {
        // CRLF (or a bare LF) after the chunk's data.
        const char c = input[i++];
        if (c == '\r' && !saw_cr_) {
          saw_cr_ = true;
        } else if (c == '\n') {
          saw_cr_ = false;
          state_ = State::kSizeLine;
        } else {
          return Fail("missing CRLF after chunk data");
        }
        break;
      }
    }
  }
  return OkStatus();
}

}  // namespace strata::bench
