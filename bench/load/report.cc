#include "bench/load/report.h"

#include <cstdarg>
#include <fstream>

#include "bench/load/json_writer.h"

namespace strata::bench {

namespace {

void Appendf(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Appendf(std::string* out, const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  *out += buffer;
}

void WriteSummary(const Summary& s, JsonWriter& w) {
  w.BeginObject();
  w.Key("count").Int(s.count);
  for (const auto& [key, value] : {std::pair<const char*, double>{"mean", s.mean},
                                   {"p50", s.p50},
                                   {"p90", s.p90},
                                   {"p95", s.p95},
                                   {"p99", s.p99},
                                   {"max", s.max}}) {
    w.Key(key);
    if (s.count > 0) {
      w.Number(value);
    } else {
      w.Null();
    }
  }
  w.EndObject();
}

void TableRow(std::string* out, const char* name, const Summary& s) {
  if (s.count == 0) {
    Appendf(out, "%-10s %10s\n", name, "-");
    return;
  }
  Appendf(out, "%-10s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, s.mean, s.p50, s.p90,
          s.p95, s.p99, s.max);
}

// One line of JSON: raw newlines (legal only between tokens) become spaces.
std::string OneLine(std::string json) {
  for (char& c : json) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return json;
}

}  // namespace

std::string FormatTable(const BenchConfig& config, const BenchResults& r,
                        const LoadOutcome& outcome) {
  std::string out;
  const int64_t concurrency = config.EffectiveConcurrency();
  Appendf(&out, "strata-bench: target %s at %s, ", config.target.c_str(),
          (config.target == "strata" ? config.addr : config.url).c_str());
  if (config.request_rate > 0) {
    Appendf(&out, "open loop %.3g req/s (burstiness %.3g)", config.request_rate, config.burstiness);
    if (concurrency > 0) Appendf(&out, ", at most %lld in flight", (long long)concurrency);
  } else {
    Appendf(&out, "closed loop, %lld in flight", (long long)concurrency);
  }
  Appendf(&out, "\n  prompt %s tokens, output %s tokens%s%s\n",
          config.dataset.empty() ? config.prompt_tokens_text.c_str() : "dataset",
          config.dataset.empty() ? config.output_tokens_text.c_str() : "dataset",
          config.label.empty() ? "" : ", label ", config.label.c_str());
  Appendf(&out, "completed %lld, errors %lld in %.2f s", (long long)r.completed,
          (long long)r.errors, r.duration_s);
  for (const auto& [kind, n] : r.errors_by_kind) {
    Appendf(&out, " [%s: %lld]", kind.c_str(), (long long)n);
  }
  out += "\n";
  if (r.output_length_mismatches > 0) {
    Appendf(&out, "warning: %lld requests generated a different length than asked for\n",
            (long long)r.output_length_mismatches);
  }
  Appendf(&out, "requests/s %10.3f   goodput req/s %10.3f\n", r.requests_per_s,
          r.goodput_requests_per_s);
  Appendf(&out, "output tok/s %8.2f   total tok/s %12.2f   (prompt %lld, output %lld tokens)\n",
          r.output_tokens_per_s, r.total_tokens_per_s, (long long)r.total_prompt_tokens,
          (long long)r.total_output_tokens);
  Appendf(&out, "%-10s %10s %10s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p90", "p95", "p99",
          "max");
  TableRow(&out, "TTFT", r.ttft_ms);
  TableRow(&out, "ITL", r.itl_ms);
  TableRow(&out, "TPOT", r.tpot_ms);
  TableRow(&out, "E2E", r.e2e_ms);
  if (outcome.stopped_early) Appendf(&out, "STOPPED EARLY: %s\n", outcome.stop_reason.c_str());
  if (!outcome.first_error.empty()) {
    Appendf(&out, "first error: %.300s\n", outcome.first_error.c_str());
  }
  return out;
}

std::string FormatJsonLine(const BenchConfig& config, const std::string& server_json,
                           const BenchResults& r, const LoadOutcome& outcome) {
  JsonWriter w;
  w.BeginObject();
  w.Key("label").String(config.label);
  w.Key("config");
  WriteConfigJson(config, w);
  w.Key("server").Raw(OneLine(server_json.empty() ? "{}" : server_json));
  w.Key("results").BeginObject();
  w.Key("duration_s").Number(r.duration_s);
  w.Key("completed").Int(r.completed);
  w.Key("errors").Int(r.errors);
  w.Key("errors_by_kind").BeginObject();
  for (const auto& [kind, n] : r.errors_by_kind) w.Key(kind).Int(n);
  w.EndObject();
  w.Key("output_length_mismatches").Int(r.output_length_mismatches);
  w.Key("stopped_early").Bool(outcome.stopped_early);
  w.Key("stop_reason").String(outcome.stop_reason);
  w.Key("first_error").String(outcome.first_error);
  w.Key("total_prompt_tokens").Int(r.total_prompt_tokens);
  w.Key("total_output_tokens").Int(r.total_output_tokens);
  w.Key("requests_per_s").Number(r.requests_per_s);
  w.Key("output_tokens_per_s").Number(r.output_tokens_per_s);
  w.Key("total_tokens_per_s").Number(r.total_tokens_per_s);
  w.Key("goodput_requests_per_s").Number(r.goodput_requests_per_s);
  w.Key("ttft_ms");
  WriteSummary(r.ttft_ms, w);
  w.Key("itl_ms");
  WriteSummary(r.itl_ms, w);
  w.Key("tpot_ms");
  WriteSummary(r.tpot_ms, w);
  w.Key("e2e_ms");
  WriteSummary(r.e2e_ms, w);
  w.EndObject();
  w.EndObject();
  return w.text();
}

Status AppendJsonLine(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  if (!out) return NotFoundError("cannot open " + path + " for appending");
  out << line << '\n';
  out.flush();
  if (!out) return InternalError("cannot write " + path);
  return OkStatus();
}

}  // namespace strata::bench
