// Counters, gauges and histograms in a registry that renders Prometheus text format 0.0.4.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace outboxd::metrics {

// Label name/value pairs of one series, rendered in the order given.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { counter, gauge, histogram };
// The word used on the `# TYPE` line.
const char* to_string(MetricType type);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool valid_metric_name(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, and not starting with "__" (reserved by Prometheus).
bool valid_label_name(std::string_view name);

// Hot-path updates are single relaxed atomic operations: the threads that
// count never contend with each other or with a scrape.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void set(std::int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void add(std::int64_t delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  std::int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// A gauge family whose series are replaced together: figures computed now and
// then whose label values come from data, so a series may also disappear.
// replace() and samples() take a mutex of their own, locked only to swap or copy;
// replace() checks label names as the registry does (a bad one aborts).
class GaugeSet {
 public:
  using Sample = std::pair<Labels, double>;
  GaugeSet() = default;
  GaugeSet(const GaugeSet&) = delete;
  GaugeSet& operator=(const GaugeSet&) = delete;

  void replace(std::vector<Sample> samples);
  std::vector<Sample> samples() const;

 private:
  mutable std::mutex mutex_;
  std::vector<Sample> samples_;
};

// Fixed upper bounds (`le`), strictly increasing and finite; the +Inf bucket
// is implicit. Each observation lands in exactly one slot; the cumulative
// counts and the total are summed at render time, so `_count` always equals
// the +Inf bucket even while other threads observe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // NaN is ignored: it would turn `_sum` into NaN for the life of the process.
  void observe(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative count per bound, then the +Inf bucket (bounds().size() + 1 entries).
  std::vector<std::uint64_t> cumulative_counts() const;
  std::uint64_t count() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> slots_;  // bounds_.size() + 1
  std::atomic<double> sum_{0.0};
};

// 5 ms .. 10 s: the range of a publish round trip or a database statement.
std::vector<double> default_duration_buckets();

// Owns every metric; the references it hands out stay valid for its
// lifetime. Asking again for a name and label set already registered returns
// the same object. One name is one family (one HELP/TYPE block) whatever its
// label sets. Invalid names, a name reused with another type, help text or
// bucket layout, and duplicate label names are programming errors: they abort.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Counter& counter(std::string name, std::string help, Labels labels = {});
  Gauge& gauge(std::string name, std::string help, Labels labels = {});
  Histogram& histogram(std::string name, std::string help, Labels labels = {},
                       std::vector<double> bounds = default_duration_buckets());
  // A gauge family of its own: no other series may share its name.
  GaugeSet& gauge_set(std::string name, std::string help);

  // Families and their series in registration order.
  std::string render() const;

 private:
  struct Family;
  struct Series;

  static void check_names(const std::string& name, const Labels& labels);
  Family& family_for(MetricType type, std::string name, std::string help, const std::vector<double>* bounds);
  Series& series(MetricType type, std::string name, std::string help, Labels labels,
                 const std::vector<double>* bounds);

  mutable std::mutex mutex_;  // guards the structure, never the values
  std::vector<std::unique_ptr<Family>> families_;
  std::unordered_map<std::string, Family*> by_name_;
};

}  // namespace outboxd::metrics
