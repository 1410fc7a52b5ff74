#include "runtime/profile.h"

#include <atomic>
#include <chrono>

namespace partita::runtime {

namespace {
std::chrono::steady_clock::time_point origin() {
  static const std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
  return t;
}
}  // namespace

double ProfileSink::now() {
  const auto t0 = origin();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

uint32_t ProfileSink::threadNumber() {
  static std::atomic<uint32_t> next{1};
  thread_local const uint32_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

size_t ProfileSink::begin(std::string name, const char* cat, uint32_t depth) {
  ProfileEvent& e = events_.emplace_back();
  e.name = std::move(name);
  e.cat = cat;
  e.tid = threadNumber();
  e.depth = base_depth_ + depth;
  e.args = context_;
  e.ts = now();
  return events_.size() - 1;
}

void ProfileSink::end(size_t index) {
  ProfileEvent& e = events_[index];
  e.dur = now() - e.ts;
}

}  // namespace partita::runtime
