// ProfileSink: where a profiled run reports its events (include/partita/profile.h).
//
// An executor given a sink records an event per run and per step; a module called
// with one (RuntimeModule::runProfiled) records what it executes inside the caller's
// step, as events of depth 2 whose interval lies within the step's. A run without a
// sink records nothing and costs nothing: the executor tests for the sink once per
// step.
//
// Not thread-safe: one run at a time reports to a sink (a Session owns one), and
// events are recorded by the thread that called run, not by kernel worker threads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "partita/profile.h"

namespace partita::runtime {

class ProfileSink {
 public:
  // Microseconds on the steady clock since the process's profiling origin (fixed by
  // the first call in the process).
  static double now();
  // A small number for the calling thread: 1 for the first thread that asks, 2 for
  // the next, ...
  static uint32_t threadNumber();

  // Starts an event at now() on the calling thread and returns its index; end() it
  // when the work is done. Events are kept in start order.
  size_t begin(std::string name, const char* cat, uint32_t depth);
  // Sets the duration of event `index` to now() minus its start.
  void end(size_t index);
  ProfileEvent& event(size_t index) { return events_[index]; }

  const std::vector<ProfileEvent>& events() const { return events_; }
  void clear() { events_.clear(); }

 private:
  std::vector<ProfileEvent> events_;
};

// Begins an event and ends it when destroyed (also when the work throws), unless end()
// was called first.
class ProfileScope {
 public:
  ProfileScope(ProfileSink& sink, std::string name, const char* cat, uint32_t depth)
      : sink_(sink), index_(sink.begin(std::move(name), cat, depth)) {}
  ~ProfileScope() {
    if (open_) sink_.end(index_);
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

  void end() {
    if (open_) sink_.end(index_);
    open_ = false;
  }
  // Adds a detail to the event (after end(), so formatting it is not timed).
  void arg(std::string key, std::string value) {
    sink_.event(index_).args.emplace_back(std::move(key), std::move(value));
  }
  void reserveArgs(size_t n) { sink_.event(index_).args.reserve(n); }
  void args(const std::vector<std::pair<std::string, std::string>>& more) {
    auto& a = sink_.event(index_).args;
    a.insert(a.end(), more.begin(), more.end());
  }

 private:
  ProfileSink& sink_;
  size_t index_;
  bool open_ = true;
};

}  // namespace partita::runtime
