#pragma once
// LruCache: a map that holds at most `capacity` entries and, when a new one would pass that,
// first evicts the least recently used. Used for what is costly to make and holds a resource (the
// cuFFT engine's plans, kernels/src/cuda/fft.cu). A value leaves through its destructor, after the
// optional on_evict callback has seen it (e.g. to release a handle the value does not own); both
// run on every way out: eviction, erase, clear and the cache's own destruction. Host-only, no
// locking (an engine is used by one thread at a time).
#include <cstddef>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <utility>

#include "gs/base/error.hpp"

namespace gs::kernels {

template <class Key, class Value, class Compare = std::less<Key>>
class LruCache {
 public:
  // Called with each entry as it leaves, before its value is destroyed. Must not throw: it also
  // runs in the destructor.
  using OnEvict = std::function<void(const Key&, Value&)>;

  // gs::Error for capacity 0 (a cache that keeps nothing returns nothing it made).
  explicit LruCache(std::size_t capacity, OnEvict on_evict = {}) : capacity_(capacity), on_evict_(std::move(on_evict)) {
    if (capacity_ == 0) throw gs::Error("LruCache: the capacity must be at least 1");
  }
  ~LruCache() { clear(); }
  // One owner: the callback releases each entry's resource once.
  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;

  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }
  bool empty() const { return entries_.empty(); }

  // The value of key, made the most recently used; nullptr when absent.
  Value* find(const Key& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);  // iterators stay valid
    return &it->second->second;
  }
  bool contains(const Key& key) const { return index_.count(key) != 0; }

  // Adds (key, value) as the most recently used, evicting the least recently used entry first
  // when the cache is full; an entry of the same key is replaced (it leaves as an evicted one).
  // Returns the stored value, valid until it leaves.
  Value& insert(const Key& key, Value value) {
    erase(key);
    while (entries_.size() >= capacity_) evict(std::prev(entries_.end()));
    entries_.emplace_front(key, std::move(value));
    try {
      index_.emplace(key, entries_.begin());
    } catch (...) {  // out of memory: the value leaves as any other, so its resource is released
      if (on_evict_) on_evict_(entries_.front().first, entries_.front().second);
      entries_.pop_front();
      throw;
    }
    return entries_.front().second;
  }

  // Removes key's entry (through on_evict); false when there was none.
  bool erase(const Key& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return false;
    evict(it->second);
    return true;
  }

  // Removes every entry, least recently used first.
  void clear() {
    while (!entries_.empty()) evict(std::prev(entries_.end()));
  }

  // f(key, value) for every entry, from the most to the least recently used; the order is unchanged.
  template <class F>
  void for_each(F&& f) {
    for (auto& [key, value] : entries_) f(static_cast<const Key&>(key), value);
  }

 private:
  using Entries = std::list<std::pair<Key, Value>>;  // front: the most recently used

  void evict(typename Entries::iterator it) {
    if (on_evict_) on_evict_(it->first, it->second);
    index_.erase(it->first);
    entries_.erase(it);
  }

  std::size_t capacity_;
  OnEvict on_evict_;
  Entries entries_;
  std::map<Key, typename Entries::iterator, Compare> index_;
};

}  // namespace gs::kernels
