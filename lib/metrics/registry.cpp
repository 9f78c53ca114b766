// Metric registration (under a mutex) and rendering; the values themselves are lock-free atomics.
#include "metrics/registry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "metrics/text_format.hpp"

namespace outboxd::metrics {

namespace {

// Metric definitions are fixed at compile time, so a bad one is a bug in the
// daemon, not an input to recover from: stop at the first start-up test.
[[noreturn]] void contract_violation(const std::string& what) {
  std::fprintf(stderr, "outboxd metrics: %s\n", what.c_str());
  std::abort();
}

bool name_char(char c, bool first, bool colon_allowed) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const bool digit = c >= '0' && c <= '9';
  return letter || (!first && digit) || (colon_allowed && c == ':');
}

bool valid_name(std::string_view name, bool colon_allowed) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, colon_allowed)) return false;
  }
  return true;
}

}  // namespace

const char* to_string(MetricType type) {
  switch (type) {
    case MetricType::counter: return "counter";
    case MetricType::gauge: return "gauge";
    case MetricType::histogram: return "histogram";
  }
  return "untyped";
}

bool valid_metric_name(std::string_view name) { return valid_name(name, true); }

bool valid_label_name(std::string_view name) {
  return valid_name(name, false) && name.substr(0, 2) != "__";
}

// ---- Histogram ----

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      slots_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  if (bounds_.empty()) contract_violation("histogram needs at least one bucket");
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i])) contract_violation("histogram bucket bounds must be finite");
    if (i > 0 && !(bounds_[i - 1] < bounds_[i])) {
      contract_violation("histogram bucket bounds must be strictly increasing");
    }
  }
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;
  // First bound >= value: buckets count observations less than or equal to `le`.
  const auto slot = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  slots_[static_cast<std::size_t>(slot)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::vector<std::uint64_t> Histogram::cumulative_counts() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    running += slots_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

std::uint64_t Histogram::count() const { return cumulative_counts().back(); }

std::vector<double> default_duration_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// ---- GaugeSet ----

void GaugeSet::replace(std::vector<Sample> samples) {
  for (const auto& sample : samples) {
    for (const auto& label : sample.first) {
      if (!valid_label_name(label.first)) contract_violation("invalid label name \"" + label.first + "\"");
    }
  }
  std::lock_guard lock(mutex_);
  samples_ = std::move(samples);
}

std::vector<GaugeSet::Sample> GaugeSet::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

// ---- Registry ----

struct Registry::Series {
  Labels labels;
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
};

struct Registry::Family {
  MetricType type;
  std::string name;
  std::string help;
  std::vector<double> bounds;  // histograms only
  std::vector<std::unique_ptr<Series>> series;
  std::unique_ptr<GaugeSet> set;  // gauge_set() families only, which have no `series`
};

Registry::Registry() = default;
Registry::~Registry() = default;

Counter& Registry::counter(std::string name, std::string help, Labels labels) {
  return *series(MetricType::counter, std::move(name), std::move(help), std::move(labels), nullptr).counter;
}

Gauge& Registry::gauge(std::string name, std::string help, Labels labels) {
  return *series(MetricType::gauge, std::move(name), std::move(help), std::move(labels), nullptr).gauge;
}

Histogram& Registry::histogram(std::string name, std::string help, Labels labels,
                               std::vector<double> bounds) {
  for (const auto& label : labels) {
    if (label.first == "le") contract_violation(name + ": label \"le\" is reserved for histogram buckets");
  }
  return *series(MetricType::histogram, std::move(name), std::move(help), std::move(labels), &bounds).histogram;
}

GaugeSet& Registry::gauge_set(std::string name, std::string help) {
  check_names(name, {});
  std::lock_guard lock(mutex_);
  Family& family = family_for(MetricType::gauge, name, std::move(help), nullptr);
  if (!family.series.empty()) contract_violation(name + ": registered as plain gauges, now asked for as a set");
  if (!family.set) family.set = std::make_unique<GaugeSet>();
  return *family.set;
}

Registry::Series& Registry::series(MetricType type, std::string name, std::string help, Labels labels,
                                   const std::vector<double>* bounds) {
  check_names(name, labels);
  std::lock_guard lock(mutex_);
  Family& family = family_for(type, name, std::move(help), bounds);
  if (family.set) contract_violation(name + ": registered as a gauge set, now asked for as one series");
  for (const auto& existing : family.series) {
    if (existing->labels == labels) return *existing;
  }
  auto added = std::make_unique<Series>();
  added->labels = std::move(labels);
  switch (type) {
    case MetricType::counter: added->counter = std::make_unique<Counter>(); break;
    case MetricType::gauge: added->gauge = std::make_unique<Gauge>(); break;
    case MetricType::histogram: added->histogram = std::make_unique<Histogram>(family.bounds); break;
  }
  family.series.push_back(std::move(added));
  return *family.series.back();
}

void Registry::check_names(const std::string& name, const Labels& labels) {
  if (!valid_metric_name(name)) contract_violation("invalid metric name \"" + name + "\"");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (!valid_label_name(labels[i].first)) {
      contract_violation(name + ": invalid label name \"" + labels[i].first + "\"");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (labels[j].first == labels[i].first) {
        contract_violation(name + ": label \"" + labels[i].first + "\" given twice");
      }
    }
  }
}

// The family of `name`, registered now or checked against its first registration. Under mutex_.
Registry::Family& Registry::family_for(MetricType type, std::string name, std::string help,
                                       const std::vector<double>* bounds) {
  if (const auto found = by_name_.find(name); found != by_name_.end()) {
    Family& family = *found->second;
    if (family.type != type) {
      contract_violation(name + ": registered as " + to_string(family.type) + ", now asked for as " +
                         to_string(type));
    }
    if (family.help != help) contract_violation(name + ": registered again with different help text");
    if (bounds != nullptr && family.bounds != *bounds) {
      contract_violation(name + ": registered again with different buckets");
    }
    return family;
  }
  auto created = std::make_unique<Family>();
  created->type = type;
  created->name = name;
  created->help = std::move(help);
  if (bounds != nullptr) created->bounds = *bounds;
  Family& family = *created;
  families_.push_back(std::move(created));
  by_name_.emplace(std::move(name), &family);
  return family;
}

namespace {

void render_histogram(std::string& out, const std::string& name, const Labels& labels,
                      const Histogram& histogram) {
  const auto counts = histogram.cumulative_counts();
  const auto& bounds = histogram.bounds();
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::pair<std::string, std::string> le{
        "le", i < bounds.size() ? text_format::format_double(bounds[i]) : "+Inf"};
    out += name + "_bucket" + text_format::label_block(labels, &le) + ' ' + std::to_string(counts[i]) + '\n';
  }
  const auto block = text_format::label_block(labels);
  out += name + "_sum" + block + ' ' + text_format::format_double(histogram.sum()) + '\n';
  out += name + "_count" + block + ' ' + std::to_string(counts.back()) + '\n';
}

void render_set(std::string& out, const std::string& name, const GaugeSet& set) {
  for (const auto& [labels, value] : set.samples()) {
    out += name + text_format::label_block(labels) + ' ' + text_format::format_double(value) + '\n';
  }
}

}  // namespace

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& family : families_) {
    out += "# HELP " + family->name + ' ' + text_format::escape_help(family->help) + '\n';
    out += "# TYPE " + family->name + ' ' + to_string(family->type) + '\n';
    if (family->set) render_set(out, family->name, *family->set);
    for (const auto& series : family->series) {
      switch (family->type) {
        case MetricType::counter:
          out += family->name + text_format::label_block(series->labels) + ' ' +
                 std::to_string(series->counter->value()) + '\n';
          break;
        case MetricType::gauge:
          out += family->name + text_format::label_block(series->labels) + ' ' +
                 std::to_string(series->gauge->value()) + '\n';
          break;
        case MetricType::histogram:
          render_histogram(out, family->name, series->labels, *series->histogram);
          break;
      }
    }
  }
  return out;
}

}  // namespace outboxd::metrics
