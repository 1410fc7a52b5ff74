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

#include <algorithm>
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
  // when the work is done. Events are kept in start order. `depth` counts from the
  // innermost subgraph being run (Nest below).
  size_t begin(std::string name, const char* cat, uint32_t depth);
  // Sets the duration of event `index` to now() minus its start.
  void end(size_t index);
  ProfileEvent& event(size_t index) { return events_[index]; }

  const std::vector<ProfileEvent>& events() const { return events_; }
  void clear() { events_.clear(); }

  // While a control-flow step runs a subgraph (runtime/control_flow.cpp): the events
  // begun nest `levels` deeper than their own depth says (the body's steps below the
  // node's step, a region's primitives below the region), and start with `context` in
  // their args (the branch taken, the iteration), added to the enclosing subgraph's
  // (a key both have takes the inner value). Both are restored when the Nest ends.
  class Nest {
   public:
    Nest(ProfileSink& sink, uint32_t levels, const std::vector<std::pair<std::string, std::string>>& context)
        : sink_(sink), levels_(levels), saved_(sink.context_) {
      for (const auto& entry : context) {  // (no structured binding: clang 14 cannot capture one)
        auto it = std::find_if(sink_.context_.begin(), sink_.context_.end(),
                               [&](const auto& kv) { return kv.first == entry.first; });
        if (it != sink_.context_.end())
          it->second = entry.second;
        else
          sink_.context_.emplace_back(entry.first, entry.second);
      }
      sink_.base_depth_ += levels_;
    }
    ~Nest() {
      sink_.base_depth_ -= levels_;
      sink_.context_ = std::move(saved_);
    }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    ProfileSink& sink_;
    uint32_t levels_ = 0;
    std::vector<std::pair<std::string, std::string>> saved_;
  };

 private:
  std::vector<ProfileEvent> events_;
  uint32_t base_depth_ = 0;
  std::vector<std::pair<std::string, std::string>> context_;
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
