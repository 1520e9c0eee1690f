#include "strata/server/request_parse.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/common.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/log.h>

#include <cstdint>
#include <map>

#include "strata/common/logging.h"
#include "strata/common/utf8.h"

#if GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif

namespace strata::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Deeper than any message of ours nests; protobuf itself stops at 100.
constexpr int kMaxDepth = 64;

thread_local int t_client_parses = 0;

int WireTypeOf(const FieldDescriptor& field) {
  switch (field.type()) {
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
      return 2;
    case FieldDescriptor::TYPE_GROUP:
      return 3;
    case FieldDescriptor::TYPE_DOUBLE:
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
      return 1;
    case FieldDescriptor::TYPE_FLOAT:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
      return 5;
    default:
      return 0;
  }
}

// The first fault in `bytes` read as a `type`, or "" when none is found.
std::string FirstFault(const Descriptor& type, std::string_view bytes, const std::string& path,
                       int depth) {
  if (depth > kMaxDepth) {
    return "messages nest more than " + std::to_string(kMaxDepth) + " deep at '" + path + "'";
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  std::map<int, int> occurrences;  // of repeated fields, for their indices
  while (static_cast<size_t>(in.CurrentPosition()) < bytes.size()) {
    const int at = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0 || (tag >> 3) == 0) {
      std::string fault = "a malformed field tag at byte " + std::to_string(at);
      if (!path.empty()) fault += " of '" + path + "'";
      return fault;
    }
    const int number = static_cast<int>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    const FieldDescriptor* field = type.FindFieldByNumber(number);
    std::string name = path;
    if (!name.empty()) name += '.';
    if (field != nullptr) {
      name += field->name();
    } else {
      name += '#';
      name += std::to_string(number);
    }
    if (field != nullptr && field->is_repeated()) {
      name += '[';
      name += std::to_string(occurrences[number]++);
      name += ']';
    }
    if (field != nullptr && wire != WireTypeOf(*field) && !(field->is_packable() && wire == 2)) {
      return "field '" + name + "' has wire type " + std::to_string(wire) + ", expected " +
             std::to_string(WireTypeOf(*field));
    }
    const std::string truncated = "field '" + name + "' is truncated";
    switch (wire) {
      case 0: {
        uint64_t value = 0;
        if (!in.ReadVarint64(&value)) return truncated;
        break;
      }
      case 1: {
        uint64_t value = 0;
        if (!in.ReadLittleEndian64(&value)) return truncated;
        break;
      }
      case 5: {
        uint32_t value = 0;
        if (!in.ReadLittleEndian32(&value)) return truncated;
        break;
      }
      case 2: {
        uint32_t length = 0;
        std::string value;
        if (!in.ReadVarint32(&length) || !in.ReadString(&value, static_cast<int>(length))) {
          return truncated;
        }
        if (field == nullptr) break;
        if (field->type() == FieldDescriptor::TYPE_STRING) {
          size_t offset = 0;
          if (!IsValidUtf8(value, &offset)) {
            return "field '" + name + "' is not valid UTF-8 (invalid byte sequence at offset " +
                   std::to_string(offset) + ")";
          }
        } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
          std::string fault = FirstFault(*field->message_type(), value, name, depth + 1);
          if (!fault.empty()) return fault;
        }
        break;
      }
      default:
        return "field '" + name + "' has the unsupported wire type " + std::to_string(wire);
    }
  }
  return "";
}

#if GOOGLE_PROTOBUF_VERSION < 4022000
void LogFromProtobuf(google::protobuf::LogLevel level, const char* filename, int line,
                     const std::string& message) {
  LogLevel ours = LogLevel::kError;
  if (level == google::protobuf::LOGLEVEL_INFO) ours = LogLevel::kInfo;
  if (level == google::protobuf::LOGLEVEL_WARNING) ours = LogLevel::kWarn;
  // A client's bad bytes: the refusal is the call's to report.
  if (t_client_parses > 0) ours = LogLevel::kDebug;
  Log(ours, "protobuf: " + message,
      {{"source", std::string(filename != nullptr ? filename : "?") + ":" + std::to_string(line)}});
}
#endif

void LogFromGrpc(gpr_log_func_args* args) {
  LogLevel level = LogLevel::kWarn;
  if (args->severity == GPR_LOG_SEVERITY_DEBUG) level = LogLevel::kDebug;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = LogLevel::kInfo;
  Log(level, std::string("grpc: ") + (args->message != nullptr ? args->message : ""),
      {{"source",
        std::string(args->file != nullptr ? args->file : "?") + ":" + std::to_string(args->line)}});
}

}  // namespace

std::string DescribeUnparsable(const Descriptor& type, std::string_view bytes) {
  std::string fault = FirstFault(type, bytes, "", 0);
  return fault.empty() ? "the bytes are not a valid message of this type" : fault;
}

int MethodIndex(std::string_view service, std::string_view method) {
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(std::string(service));
  STRATA_CHECK(s != nullptr);
  const google::protobuf::MethodDescriptor* m = s->FindMethodByName(std::string(method));
  STRATA_CHECK(m != nullptr);
  return m->index();
}

std::string DescribeUnparsable(const Descriptor& type, grpc_byte_buffer* bytes) {
  grpc_byte_buffer_reader reader;
  if (bytes == nullptr || grpc_byte_buffer_reader_init(&reader, bytes) == 0) {
    return "the request is unreadable";
  }
  grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
  std::string why = DescribeUnparsable(
      type, std::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(all)),
                             GRPC_SLICE_LENGTH(all)));
  grpc_slice_unref(all);
  grpc_byte_buffer_reader_destroy(&reader);
  return why;
}

void RouteLibraryLogs() {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(&LogFromProtobuf);
#endif
  gpr_set_log_function(&LogFromGrpc);
}

ClientParseScope::ClientParseScope() { ++t_client_parses; }
ClientParseScope::~ClientParseScope() { --t_client_parses; }

}  // namespace strata::server
