#pragma once
// Pinned host blocks for the copies between host and device and for the device's own writes into
// host memory (a selection's report and pairs), reused only once the event recorded after their
// last use says it is done. A block still in flight is passed over, never waited for, so an upload
// returns at once; past kMaxBlocks blocks the oldest one in flight is waited for (a blocking
// synchronization, counted). Written once over a backend's host side H: the CUDA runtime's pinned
// memory and events (cuda/device.cu) and cuda-host's host memory and modelled events
// (cuda_host/staging.cpp), so the reuse rule runs in the tests.
//   H::Event (default-constructible, "none"), void* H::alloc(size_t), void H::free(void*),
//   void H::record(Event&, StreamHandle) (makes the event where needed), bool H::done(const Event&),
//   void H::wait(const Event&), void H::destroy(Event&)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gs/kernels/device.hpp"

namespace gs::kernels::detail {

template <class H>
class StagingPool {
 public:
  static constexpr std::size_t kMaxBlocks = 16;
  static constexpr std::size_t kMinBytes = std::size_t{64} << 10;

  struct Block {
    void* p = nullptr;
    std::size_t size = 0;
    typename H::Event event{};
    bool leased = false;
    bool in_flight = false;  // an event was recorded after its last use
    std::uint64_t used = 0;  // the order of its last use, to find the oldest
  };

  explicit StagingPool(H host = H{}) : h_(std::move(host)) {}
  ~StagingPool() {
    for (auto& b : blocks_) {
      h_.destroy(b->event);
      h_.free(b->p);
    }
  }
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A block of at least `bytes` that no copy is using, leased until release() or release_after().
  Block& acquire(std::size_t bytes) {
    Block* pick = nullptr;
    for (auto& b : blocks_) {
      if (b->leased || (b->in_flight && !h_.done(b->event))) continue;
      b->in_flight = false;
      if (!pick || (b->size >= bytes && (pick->size < bytes || b->size < pick->size))) pick = b.get();
    }
    if ((!pick || pick->size < bytes) && blocks_.size() < kMaxBlocks) {
      blocks_.push_back(std::make_unique<Block>());
      pick = blocks_.back().get();
    } else if (!pick) {
      pick = &oldest_in_flight();
      h_.wait(pick->event);  // every block is in flight: the one device copy the host waits for
      pick->in_flight = false;
    }
    if (pick->size < bytes) {
      const std::size_t grown = std::max({bytes, 2 * pick->size, kMinBytes});
      h_.free(pick->p);
      pick->p = nullptr;
      pick->size = 0;
      pick->p = h_.alloc(grown);
      pick->size = grown;
      ++allocations_;
    }
    pick->leased = true;
    pick->used = ++uses_;
    return *pick;
  }
  // After its copies were queued on `stream`: reusable once they are done.
  void release_after(Block& b, StreamHandle stream) {
    h_.record(b.event, stream);
    b.in_flight = true;
    b.leased = false;
  }
  // After the host waited for the block's copies (or never queued any): reusable at once.
  void release(Block& b) { b.leased = false; }

  std::uint64_t allocations() const { return allocations_; }
  std::size_t blocks() const { return blocks_.size(); }

 private:
  Block& oldest_in_flight() {
    Block* o = nullptr;
    for (auto& b : blocks_)
      if (!b->leased && (!o || b->used < o->used)) o = b.get();
    if (!o) throw gs::Error("staging: every pinned block is leased at once (please report)");
    return *o;
  }

  H h_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::uint64_t allocations_ = 0;
  std::uint64_t uses_ = 0;
};

}  // namespace gs::kernels::detail

namespace gs::kernels::detail {

// A block of a StagingPool held for one use: released when it goes (the host is done with it), or
// handed back with done_after(stream) once copies or kernels using it are queued there.
template <class Pool>
class StagingLease {
 public:
  StagingLease(Pool& pool, std::size_t bytes) : pool_(&pool), b_(&pool.acquire(bytes)) {}
  ~StagingLease() {
    if (b_) pool_->release(*b_);
  }
  StagingLease(StagingLease&& o) noexcept : pool_(o.pool_), b_(o.b_) { o.b_ = nullptr; }
  StagingLease(const StagingLease&) = delete;
  StagingLease& operator=(const StagingLease&) = delete;
  StagingLease& operator=(StagingLease&&) = delete;
  void* data() const { return b_->p; }
  void done_after(StreamHandle stream) {
    pool_->release_after(*b_, stream);
    b_ = nullptr;
  }

 private:
  Pool* pool_;
  typename Pool::Block* b_;
};

}  // namespace gs::kernels::detail
