// The planner's destination rules: priority classes, rate limits, rows in flight per destination.
#include <algorithm>
#include <utility>

#include "dispatch/planner.hpp"

namespace outboxd::dispatch {

// The destination's policy as configured now. A rate already running keeps
// its saved tokens, up to the new burst, so a reload lets out no extra burst.
void Planner::apply_policy(Destination& destination, core::SteadyTime now) {
  const auto found = policy_.destinations.find(*destination.name);
  const DestinationPolicy policy = found == policy_.destinations.end() ? DestinationPolicy{} : found->second;
  if (policy.max_rate <= 0) {
    destination.bucket.reset();
  } else if (destination.bucket) {
    destination.bucket->change(policy.max_rate, effective_burst(policy), now);
  } else {
    destination.bucket.emplace(policy.max_rate, effective_burst(policy), now);
  }
  destination.policy = policy;
  if (policy.limited()) limited_.push_back(&destination);
}

// A reload: every destination takes its new policy, the entries held back
// are weighed again under the new limits, and the ready entries take their
// destinations' new classes.
void Planner::apply_destination_policies() {
  const core::SteadyTime now = clock_.now();
  limited_.clear();
  for (auto& entry : destinations_) apply_policy(entry.second, now);
  for (const auto& entry : policy_.destinations) destination_of(entry.first);
  for (Destination* destination : holding_) {
    for (; !destination->held.empty(); destination->held.pop()) ready_.push(destination->held.top());
    destination->held_by = Limit::none;
  }
  holding_.clear();
  std::vector<ReadyEntry> entries;
  entries.reserve(ready_.size());
  for (; !ready_.empty(); ready_.pop()) {
    ReadyEntry entry = ready_.top();
    // A stale entry keeps its class: it goes out as nothing, or requeues its session.
    if (const auto row = rows_.find(entry.key); row != rows_.end()) {
      entry.priority = row->second.destination->policy.priority;
    }
    entries.push_back(entry);
  }
  ready_ = ReadyHeap(std::greater<>(), std::move(entries));
}

// Whether the entry's row may go out now; if not, the destination holds the
// entry until its limit lets a row out (release_held()).
bool Planner::admit(Destination& destination, const ReadyEntry& entry, core::SteadyTime now) {
  if (!destination.policy.limited()) return true;
  Limit limit = Limit::none;
  if (destination.policy.max_in_flight > 0 && destination.in_flight >= destination.policy.max_in_flight) {
    limit = Limit::in_flight;
  } else if (destination.bucket && !destination.bucket->ready(now)) {
    limit = Limit::rate;
  }
  if (limit == Limit::none) return true;
  if (destination.held.empty()) holding_.push_back(&destination);
  destination.held.push(entry);
  destination.held_by = limit;
  return false;
}

// Puts back in the ready heap as many held entries of each destination as
// its limits let out now, first in line first. Returns whether it put any.
bool Planner::release_held(core::SteadyTime now) {
  bool released = false;
  std::erase_if(holding_, [&](Destination* destination) {
    const DestinationPolicy& policy = destination->policy;
    std::size_t room = destination->held.size();
    if (policy.max_in_flight > 0) {
      room = std::min(room, policy.max_in_flight > destination->in_flight
                                ? policy.max_in_flight - destination->in_flight
                                : std::size_t{0});
      if (room == 0) destination->held_by = Limit::in_flight;
    }
    if (room > 0 && destination->bucket) {
      room = std::min(room, destination->bucket->available(now));
      if (room == 0) destination->held_by = Limit::rate;
    }
    released = released || room > 0;
    for (; room > 0; --room, destination->held.pop()) ready_.push(destination->held.top());
    if (!destination->held.empty()) return false;
    destination->held_by = Limit::none;
    return true;
  });
  return released;
}

std::size_t Planner::limited_buffer() const { return std::max<std::size_t>(policy_.max_buffered / 8, 1); }

// Rows of limited destinations waiting, each counted up to limited_buffer():
// what claim_room() leaves out.
std::size_t Planner::limited_waiting() const {
  std::size_t waiting = 0;
  for (const Destination* destination : limited_) {
    waiting += std::min(destination->rows - destination->in_flight, limited_buffer());
  }
  return waiting;
}

bool Planner::any_held_back() const {
  return std::any_of(limited_.begin(), limited_.end(), [this](const Destination* destination) {
    return destination->rows - destination->in_flight >= limited_buffer();
  });
}

std::vector<std::string> Planner::held_back() const {
  std::vector<std::string> names;
  for (const Destination* destination : limited_) {
    if (destination->rows - destination->in_flight >= limited_buffer()) names.push_back(*destination->name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Configured destinations are never pruned (destination_of()): each is found.
std::vector<DestinationState> Planner::configured_destinations() const {
  std::vector<DestinationState> states;
  states.reserve(policy_.destinations.size());
  for (const auto& entry : policy_.destinations) {
    const auto found = destinations_.find(entry.first);
    if (found == destinations_.end()) continue;
    const Destination& destination = found->second;
    states.push_back({entry.first, destination.policy, destination.rows - destination.in_flight,
                      destination.in_flight, destination.held.empty() ? Limit::none : destination.held_by});
  }
  return states;
}

}  // namespace outboxd::dispatch
