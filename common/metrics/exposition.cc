#include "common/metrics/exposition.h"

#include <cassert>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"

namespace sn::metrics {
namespace {

bool NameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

bool IsName(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    assert(std::isfinite(bounds_[i]) && (i == 0 || bounds_[i - 1] < bounds_[i]));
  }
}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::vector<double> LatencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

bool IsMetricName(std::string_view name) { return IsName(name, true); }
bool IsLabelName(std::string_view name) { return IsName(name, false); }

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 9.007199254740992e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

void Exposition::Family(std::string_view name, std::string_view help, std::string_view type) {
  assert(IsMetricName(name));
  absl::StrAppend(&out_, "# HELP ", AV(name), " ", EscapeHelp(help), "\n# TYPE ", AV(name), " ",
                  AV(type), "\n");
}

void Exposition::Sample(std::string_view name, const Labels& labels, double value) {
  absl::StrAppend(&out_, AV(name));
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      assert(IsLabelName(labels[i].first));
      absl::StrAppend(&out_, i == 0 ? "" : ",", AV(labels[i].first), "=\"",
                      EscapeLabelValue(labels[i].second), "\"");
    }
    out_ += '}';
  }
  absl::StrAppend(&out_, " ", FormatValue(value), "\n");
}

void Exposition::HistogramSamples(std::string_view name, const Labels& labels, const Histogram& h) {
  const std::string bucket = absl::StrCat(AV(name), "_bucket");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts().size(); ++i) {
    cumulative += h.counts()[i];
    Labels with = labels;
    with.emplace_back("le",
                      i < h.upper_bounds().size() ? FormatValue(h.upper_bounds()[i]) : "+Inf");
    Sample(bucket, with, static_cast<double>(cumulative));
  }
  Sample(absl::StrCat(AV(name), "_sum"), labels, h.sum());
  Sample(absl::StrCat(AV(name), "_count"), labels, static_cast<double>(h.count()));
}

}  // namespace sn::metrics
