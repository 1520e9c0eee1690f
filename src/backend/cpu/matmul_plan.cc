// MatMulPlan, the precision settings' names and the choice from measured timings.
#include "strata/backend/cpu/matmul_plan.h"

#include <cmath>
#include <cstdio>

#include "strata/common/check.h"

namespace strata::backend::cpu {
namespace {

size_t TypeIndex(model::GgmlType type) {
  const auto index = static_cast<size_t>(type);
  STRATA_CHECK(index < 64);
  return index;
}

}  // namespace

std::string_view MatMulPrecisionSettingName(MatMulPrecisionSetting setting) {
  switch (setting) {
    case MatMulPrecisionSetting::kFp32:
      return "fp32";
    case MatMulPrecisionSetting::kInt8:
      return "int8";
    case MatMulPrecisionSetting::kAuto:
      return "auto";
  }
  return "fp32";
}

bool ParseMatMulPrecisionSetting(std::string_view name, MatMulPrecisionSetting* setting) {
  for (MatMulPrecisionSetting s : {MatMulPrecisionSetting::kFp32, MatMulPrecisionSetting::kInt8,
                                   MatMulPrecisionSetting::kAuto}) {
    if (name == MatMulPrecisionSettingName(s)) {
      *setting = s;
      return true;
    }
  }
  return false;
}

MatMulPlan::MatMulPlan(MatMulPrecision precision) { by_type_.fill(precision); }

MatMulPrecision MatMulPlan::For(model::GgmlType type) const { return by_type_[TypeIndex(type)]; }

void MatMulPlan::Set(model::GgmlType type, MatMulPrecision precision) {
  by_type_[TypeIndex(type)] = precision;
}

std::string MatMulPlan::Describe() const {
  if (timings_.empty()) {
    // A given plan: int8 only where the CPU has the kernels (MatMul runs fp32 elsewhere).
    std::string int8_types;
    bool all_int8 = true;
    for (uint32_t raw = 0; raw < by_type_.size(); ++raw) {
      const auto type = static_cast<model::GgmlType>(raw);
      if (!model::GgmlTypeTraitsOf(raw).has_value() || !MatMulInt8Supports(type)) continue;
      if (For(type) != MatMulPrecision::kInt8) {
        all_int8 = false;
        continue;
      }
      int8_types +=
          std::string(int8_types.empty() ? "" : ", ") + std::string(model::GgmlTypeName(type));
    }
    if (int8_types.empty()) return "fp32 matmul";
    return all_int8 ? "int8 matmul" : "int8 matmul for " + int8_types + ", fp32 for the rest";
  }
  std::vector<model::GgmlType> types;
  bool any_int8 = false;
  for (const MatMulTypeTiming& t : timings_) {
    bool seen = false;
    for (model::GgmlType u : types) seen = seen || u == t.type;
    if (!seen) types.push_back(t.type);
  }
  std::string detail;
  for (model::GgmlType type : types) {
    const bool int8 = For(type) == MatMulPrecision::kInt8;
    any_int8 = any_int8 || int8;
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.2fx", Int8TimeRatio(timings_, type));
    if (!detail.empty()) detail += ", ";
    detail += std::string(model::GgmlTypeName(type)) + (int8 ? " int8 " : " fp32 ") + ratio;
  }
  return std::string(any_int8 ? "int8" : "fp32") + " matmul, measured (" + detail + ")";
}

double Int8TimeRatio(std::span<const MatMulTypeTiming> timings, model::GgmlType type) {
  double log_sum = 0;
  int n = 0;
  for (const MatMulTypeTiming& t : timings) {
    if (t.type != type || !(t.fp32_seconds > 0) || !(t.int8_seconds > 0)) continue;
    log_sum += std::log(t.int8_seconds / t.fp32_seconds);
    ++n;
  }
  return n == 0 ? 0.0 : std::exp(log_sum / n);
}

MatMulPlan ChooseMatMulPlan(std::vector<MatMulTypeTiming> timings) {
  MatMulPlan plan(MatMulPrecision::kFp32);
  for (const MatMulTypeTiming& t : timings) {
    const double ratio = Int8TimeRatio(timings, t.type);
    if (ratio > 0 && ratio < kInt8ChoiceMaxRatio) plan.Set(t.type, MatMulPrecision::kInt8);
  }
  plan.set_timings(std::move(timings));
  return plan;
}

}  // namespace strata::backend::cpu
