// The rows of one session waiting to be published, in the order they must go out.
#pragma once

#include <cstddef>
#include <vector>

#include "core/outbox_message.hpp"

namespace outboxd::dispatch {

// Two runs kept back to back: first the rows that came back from the broker
// (rejected or released) in id order, then the rows never handed out, in id
// order. A row that was already published once goes out again before any row
// that has not been published yet, even one with a lower id that committed
// late: the session is blocked behind the row it is retrying.
//
// Rows are usually appended in id order and popped from the front, so both
// are amortised O(1); a late lower id is a sorted insert (rare).
class SessionQueue {
 public:
  bool empty() const { return head_ == ids_.size(); }
  std::size_t size() const { return ids_.size() - head_; }
  std::size_t returned() const { return returned_; }
  core::RowId front() const { return ids_[head_]; }

  void pop_front();
  void push_fresh(core::RowId id);     // a row never handed out
  void push_returned(core::RowId id);  // a row back from the broker: ahead of every fresh row
  void clear();

  // Removes the rows for which `drop(id)` is true; returns how many.
  template <class Predicate>
  std::size_t remove_if(Predicate drop);

  // Ids in publication order (tests and diagnostics).
  std::vector<core::RowId> ids() const;

 private:
  void compact();

  std::vector<core::RowId> ids_;
  std::size_t head_ = 0;      // ids_[0, head_) were popped
  std::size_t returned_ = 0;  // ids_[head_, head_ + returned_) came back from the broker
};

template <class Predicate>
std::size_t SessionQueue::remove_if(Predicate drop) {
  std::size_t kept = head_;
  std::size_t kept_returned = 0;
  for (std::size_t i = head_; i < ids_.size(); ++i) {
    if (drop(ids_[i])) continue;
    if (i < head_ + returned_) ++kept_returned;
    ids_[kept++] = ids_[i];
  }
  const std::size_t removed = ids_.size() - kept;
  ids_.resize(kept);
  returned_ = kept_returned;
  compact();
  return removed;
}

}  // namespace outboxd::dispatch
