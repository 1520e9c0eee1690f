// Reading one sample out of Prometheus text exposition, for tests of what the metrics say.
#pragma once

#include <optional>
#include <sstream>
#include <string>

namespace strata::testing {

// The value of the sample line that starts with `series` (name plus labels, exactly as
// exposed), or nullopt.
inline std::optional<double> MetricSample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

}  // namespace strata::testing
