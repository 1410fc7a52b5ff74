// ShapeCache: a small LRU cache keyed by a function number and the shapes of a list of
// tensors, holding up to `capacity` shapes per function. Shape-polymorphic modules keep what they compiled for each input shape in
// one (primitives, buffer plans), the graph executor its per-shape arena plans.
//
// A lookup allocates nothing: it compares the tensors' shapes with each key in place
// and copies a shared_ptr. Entries are shared, so one evicted while a run still uses
// it lives until that run ends. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/tensor.h"

namespace partita::runtime {

template <class T>
class ShapeCache {
 public:
  // `capacity`: entries per function.
  explicit ShapeCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) { entries_.reserve(capacity_); }

  size_t capacity() const { return capacity_; }

  // The entry for function `fn` at the shapes of `tensors`, or null.
  std::shared_ptr<T> find(uint32_t fn, const std::vector<ir::Tensor>& tensors) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Entry& e : entries_)
      if (e.fn == fn && matches(e.key, tensors)) {
        e.used = ++tick_;
        ++hits_;
        return e.value;
      }
    return nullptr;
  }

  // Adds `value` for these shapes, evicting function `fn`'s least recently used entry
  // when it has `capacity` of them.
  // When another thread added the same shapes meanwhile, keeps and returns that one.
  std::shared_ptr<T> insert(uint32_t fn, const std::vector<ir::Tensor>& tensors, std::shared_ptr<T> value) {
    std::vector<int64_t> key;
    for (const ir::Tensor& t : tensors) {
      key.push_back(int64_t(t.shape.size()));
      key.insert(key.end(), t.shape.begin(), t.shape.end());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (Entry& e : entries_)
      if (e.fn == fn && e.key == key) {
        e.used = ++tick_;
        return e.value;
      }
    // The bound is per function: a module whose functions each see one new shape (a
    // model split into many shape-polymorphic regions) keeps them all.
    Entry fresh{fn, std::move(key), std::move(value), ++tick_};
    size_t count = 0, oldest = entries_.size();
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].fn != fn) continue;
      ++count;
      if (oldest == entries_.size() || entries_[i].used < entries_[oldest].used) oldest = i;
    }
    if (count < capacity_) {
      entries_.push_back(std::move(fresh));
      return entries_.back().value;
    }
    entries_[oldest] = std::move(fresh);
    ++evictions_;
    return entries_[oldest].value;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }
  size_t evictions() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return evictions_;
  }
  size_t hits() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_;
  }

 private:
  struct Entry {
    uint32_t fn = 0;
    std::vector<int64_t> key;  // per tensor: its rank, then its dims
    std::shared_ptr<T> value;
    uint64_t used = 0;
  };

  static bool matches(const std::vector<int64_t>& key, const std::vector<ir::Tensor>& tensors) {
    size_t at = 0;
    for (const ir::Tensor& t : tensors) {
      if (at >= key.size() || key[at] != int64_t(t.shape.size())) return false;
      ++at;
      if (key.size() - at < t.shape.size()) return false;
      for (int64_t d : t.shape)
        if (key[at++] != d) return false;
    }
    return at == key.size();
  }

  const size_t capacity_;
  mutable std::mutex mutex_;
  mutable std::vector<Entry> entries_;
  mutable uint64_t tick_ = 0;
  mutable size_t hits_ = 0;
  size_t evictions_ = 0;
};

}  // namespace partita::runtime
