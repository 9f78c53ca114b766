// Per-session publication order: returned rows first, then fresh rows, each run in id order.
#include "dispatch/session_queue.hpp"

#include <algorithm>
#include <iterator>

namespace outboxd::dispatch {

namespace {

using Offset = std::vector<core::RowId>::difference_type;

Offset offset(std::size_t index) { return static_cast<Offset>(index); }

}  // namespace

void SessionQueue::pop_front() {
  ++head_;
  if (returned_ > 0) --returned_;
  compact();
}

void SessionQueue::push_fresh(core::RowId id) {
  const std::size_t fresh_begin = head_ + returned_;
  if (ids_.size() == fresh_begin || ids_.back() < id) {
    ids_.push_back(id);
    return;
  }
  // A late commit: a lower id than rows already queued goes before them.
  const auto at = std::upper_bound(ids_.begin() + offset(fresh_begin), ids_.end(), id);
  ids_.insert(at, id);
}

void SessionQueue::push_returned(core::RowId id) {
  // Common case: the returned row precedes everything queued, and the slot
  // just before the head is free.
  if (head_ > 0 && (returned_ == 0 || id < ids_[head_])) {
    ids_[--head_] = id;
    ++returned_;
    return;
  }
  const auto first = ids_.begin() + offset(head_);
  const auto at = std::upper_bound(first, first + offset(returned_), id);
  ids_.insert(at, id);
  ++returned_;
}

void SessionQueue::clear() {
  ids_.clear();
  head_ = 0;
  returned_ = 0;
}

std::vector<core::RowId> SessionQueue::ids() const {
  return {ids_.begin() + offset(head_), ids_.end()};
}

// Reclaims the popped prefix once it is at least half the vector, so pops
// stay amortised O(1) and memory follows the live size.
void SessionQueue::compact() {
  if (head_ == ids_.size()) {
    ids_.clear();
    head_ = 0;
    return;
  }
  if (head_ >= 32 && head_ * 2 >= ids_.size()) {
    ids_.erase(ids_.begin(), ids_.begin() + offset(head_));
    head_ = 0;
  }
}

}  // namespace outboxd::dispatch
