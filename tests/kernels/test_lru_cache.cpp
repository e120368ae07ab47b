// LruCache (kernels/src/lru_cache.hpp): the bound, the order of use, every way out through the
// callback and the destructor exactly once, and a long random run against a plain list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gs/base/error.hpp"
#include "lru_cache.hpp"

namespace gs::kernels {
namespace {

using Cache = LruCache<int, std::string>;

std::vector<int> keys_in_order(Cache& c) {
  std::vector<int> keys;
  c.for_each([&](const int& k, std::string&) { keys.push_back(k); });
  return keys;
}

TEST(LruCache, EvictsTheLeastRecentlyUsedBeyondTheCapacity) {
  std::vector<std::pair<int, std::string>> left;
  Cache c(3, [&](const int& k, std::string& v) { left.emplace_back(k, v); });
  EXPECT_EQ(c.capacity(), 3u);
  EXPECT_TRUE(c.empty());
  c.insert(1, "one");
  c.insert(2, "two");
  c.insert(3, "three");
  EXPECT_EQ(c.size(), 3u);
  EXPECT_TRUE(left.empty());
  EXPECT_EQ(keys_in_order(c), (std::vector<int>{3, 2, 1}));  // most recently used first

  ASSERT_NE(c.find(1), nullptr);  // 1 is now the most recently used: 2 is the oldest
  EXPECT_EQ(*c.find(1), "one");
  EXPECT_EQ(keys_in_order(c), (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(c.insert(4, "four"), "four");
  EXPECT_EQ(c.size(), 3u);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0], (std::pair<int, std::string>{2, "two"}));
  EXPECT_EQ(c.find(2), nullptr);
  EXPECT_FALSE(c.contains(2));
  EXPECT_TRUE(c.contains(3));
  EXPECT_EQ(keys_in_order(c), (std::vector<int>{4, 1, 3}));  // contains() leaves the order alone

  // The same key again replaces its entry: the old value leaves, nothing else does.
  c.insert(3, "THREE");
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[1], (std::pair<int, std::string>{3, "three"}));
  EXPECT_EQ(*c.find(3), "THREE");
  EXPECT_EQ(c.size(), 3u);

  EXPECT_TRUE(c.erase(4));
  EXPECT_FALSE(c.erase(4));
  EXPECT_EQ(left.back().first, 4);
  c.clear();  // least recently used first
  EXPECT_TRUE(c.empty());
  ASSERT_EQ(left.size(), 5u);
  EXPECT_EQ(left[3].first, 1);
  EXPECT_EQ(left[4].first, 3);
}

TEST(LruCache, EveryValueIsReleasedOnceWhicheverWayItLeaves) {
  // Values are the only owners of a shared_ptr: expired once destroyed. The callback counts.
  std::map<int, int> callbacks;
  std::vector<std::weak_ptr<int>> values;
  {
    LruCache<int, std::shared_ptr<int>> c(2, [&](const int& k, std::shared_ptr<int>& v) {
      ++callbacks[k];
      EXPECT_EQ(*v, k);  // the value is still alive when the callback sees it
    });
    auto add = [&](int k) {
      auto v = std::make_shared<int>(k);
      values.push_back(v);
      c.insert(k, std::move(v));
    };
    add(0);
    add(1);
    add(2);  // evicts 0
    EXPECT_TRUE(values[0].expired());
    EXPECT_FALSE(values[1].expired());
    c.erase(1);
    EXPECT_TRUE(values[1].expired());
    add(3);
    add(4);  // evicts 2
    EXPECT_TRUE(values[2].expired());
    EXPECT_FALSE(values[3].expired());
  }  // the destructor releases 3 and 4
  for (const auto& v : values) EXPECT_TRUE(v.expired());
  EXPECT_EQ(callbacks, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}}));
}

TEST(LruCache, MoveOnlyValuesTupleKeysAndNoCallback) {
  // The cuFFT engine's key: (length, batch, direction).
  using Key = std::tuple<std::uint64_t, std::uint64_t, int>;
  LruCache<Key, std::unique_ptr<int>> c(2);
  c.insert({1024, 4, 0}, std::make_unique<int>(1));
  c.insert({1024, 4, 1}, std::make_unique<int>(2));
  ASSERT_NE(c.find({1024, 4, 0}), nullptr);
  c.insert({512, 4, 0}, std::make_unique<int>(3));
  EXPECT_EQ(c.find({1024, 4, 1}), nullptr);
  EXPECT_EQ(**c.find({1024, 4, 0}), 1);
  EXPECT_EQ(**c.find({512, 4, 0}), 3);
}

TEST(LruCache, CapacityZeroIsRefused) { EXPECT_THROW(Cache(0), gs::Error); }

// A long random run (fixed seed) against a plain list of keys, most recently used first.
TEST(LruCache, AgreesWithAPlainListOnARandomRun) {
  std::mt19937_64 rng(35);
  for (const std::size_t capacity : {1u, 2u, 7u, 16u}) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    std::vector<int> model;  // keys, most recently used first
    std::vector<int> evicted, expected_evicted;
    Cache c(capacity, [&](const int& k, std::string& v) {
      EXPECT_EQ(v, std::to_string(k));
      evicted.push_back(k);
    });
    std::uniform_int_distribution<int> key(0, int(2 * capacity + 3)), op(0, 9);
    for (int step = 0; step < 20000; ++step) {
      const int k = key(rng), o = op(rng);
      const auto at = std::find(model.begin(), model.end(), k);
      if (o < 5) {  // find
        std::string* v = c.find(k);
        ASSERT_EQ(v != nullptr, at != model.end()) << step;
        if (v) {
          EXPECT_EQ(*v, std::to_string(k));
          model.erase(at);
          model.insert(model.begin(), k);
        }
      } else if (o < 9) {  // insert
        if (at != model.end()) {
          expected_evicted.push_back(k);
          model.erase(at);
        }
        while (model.size() >= capacity) {
          expected_evicted.push_back(model.back());
          model.pop_back();
        }
        model.insert(model.begin(), k);
        c.insert(k, std::to_string(k));
      } else {  // erase
        EXPECT_EQ(c.erase(k), at != model.end());
        if (at != model.end()) {
          expected_evicted.push_back(k);
          model.erase(at);
        }
      }
      ASSERT_EQ(evicted, expected_evicted) << step;
      ASSERT_LE(c.size(), capacity);
    }
    std::vector<int> order;
    c.for_each([&](const int& k, std::string&) { order.push_back(k); });
    EXPECT_EQ(order, model);
  }
}

}  // namespace
}  // namespace gs::kernels
