#include "bench/load/report.h"

#include <cstdarg>
#include <fstream>

#include "bench/load/json_fields.h"

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

// {"count", "mean", "p50", "p90", "p95", "p99", "max"}; the numbers null when count is 0.
nlohmann::ordered_json SummaryJson(const Summary& s) {
  nlohmann::ordered_json j;
  j["count"] = s.count;
  for (const auto& [key, value] : {std::pair<const char*, double>{"mean", s.mean},
                                   {"p50", s.p50},
                                   {"p90", s.p90},
                                   {"p95", s.p95},
                                   {"p99", s.p99},
                                   {"max", s.max}}) {
    j[key] = s.count > 0 ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
  }
  return j;
}

void TableRow(std::string* out, const char* name, const Summary& s) {
  if (s.count == 0) {
    Appendf(out, "%-10s %10s\n", name, "-");
    return;
  }
  Appendf(out, "%-10s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, s.mean, s.p50, s.p90,
          s.p95, s.p99, s.max);
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
  nlohmann::ordered_json server = nlohmann::ordered_json::parse(server_json, /*cb=*/nullptr,
                                                                /*allow_exceptions=*/false);
  if (!server.is_object()) server = nlohmann::ordered_json::object();
  nlohmann::ordered_json errors_by_kind = nlohmann::ordered_json::object();
  for (const auto& [kind, n] : r.errors_by_kind) errors_by_kind[kind] = n;

  nlohmann::ordered_json results;
  results["duration_s"] = r.duration_s;
  results["completed"] = r.completed;
  results["errors"] = r.errors;
  results["errors_by_kind"] = std::move(errors_by_kind);
  results["output_length_mismatches"] = r.output_length_mismatches;
  results["stopped_early"] = outcome.stopped_early;
  results["stop_reason"] = outcome.stop_reason;
  results["first_error"] = outcome.first_error;
  results["total_prompt_tokens"] = r.total_prompt_tokens;
  results["total_output_tokens"] = r.total_output_tokens;
  results["requests_per_s"] = r.requests_per_s;
  results["output_tokens_per_s"] = r.output_tokens_per_s;
  results["total_tokens_per_s"] = r.total_tokens_per_s;
  results["goodput_requests_per_s"] = r.goodput_requests_per_s;
  results["ttft_ms"] = SummaryJson(r.ttft_ms);
  results["itl_ms"] = SummaryJson(r.itl_ms);
  results["tpot_ms"] = SummaryJson(r.tpot_ms);
  results["e2e_ms"] = SummaryJson(r.e2e_ms);

  nlohmann::ordered_json line;
  line["label"] = config.label;
  line["config"] = ConfigJson(config);
  line["server"] = std::move(server);
  line["results"] = std::move(results);
  return JsonText(line);
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
