// Tests of the workers' scratch buffers (lib/src/util/scratch_bytes.h, scratch_cache.h): sets
// reused (a thread's own first, else the most recent), kept while a call runs, trimmed to the
// bound when the last call ends, released on demand (release_scratch_memory), a fork's child
// with a cache of its own, and freed buffers given back to the kernel.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "jtree/options.h"
#include "util/scratch_cache.h"

namespace jtree {
namespace {

// Sets of one buffer; each test uses a type of its own, so that each starts from an empty
// cache (one per type and process).
template <int kTest>
struct OneBuffer {
  ScratchBytes b;
  size_t bytes() const { return b.capacity(); }
};

constexpr size_t kMiB = size_t{1} << 20;

// Resident memory of this process, from /proc/self/statm.
size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  REQUIRE(f != nullptr);
  unsigned long size = 0, resident = 0;
  REQUIRE(std::fscanf(f, "%lu %lu", &size, &resident) == 2);
  std::fclose(f);
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST_CASE("a set given back is the next one taken, its buffer as it was left") {
  using Cache = ScratchCache<OneBuffer<1>>;
  Cache& cache = Cache::shared();
  const std::byte* data = nullptr;
  {
    Cache::Lease a(cache);
    grow(a->b, 3 * kMiB);
    data = a->b.data();
  }
  CHECK(cache.kept_sets() == 1);
  CHECK(cache.kept_bytes() >= 3 * kMiB);
  {
    Cache::Lease again(cache);
    CHECK(again->b.data() == data);
    CHECK(cache.kept_sets() == 0);
    Cache::Lease other(cache);  // none left: a new, empty one
    CHECK(other->b.empty());
  }
  CHECK(cache.sets_made() == 2);
  CHECK(cache.kept_sets() == 2);
}

TEST_CASE("a thread gets back the set it gave back last, before more recent ones") {
  // (Its memory is near that thread: caches, NUMA node.) Another thread gets the most recent.
  using Cache = ScratchCache<OneBuffer<7>>;
  Cache& cache = Cache::shared();
  Cache::Use use(cache);  // (nothing trimmed meanwhile)
  const std::byte* theirs = nullptr;
  std::thread([&] {
    Cache::Lease l(cache);
    grow(l->b, kMiB);
    theirs = l->b.data();
  }).join();
  const std::byte* mine = nullptr;
  {
    Cache::Lease l(cache);  // (theirs is kept: another thread's, taken for want of one)
    CHECK(l->b.data() == theirs);
  }
  {
    Cache::Lease a(cache);  // theirs again, given back by this thread now
    Cache::Lease b(cache);  // a new one
    grow(b->b, kMiB);
    mine = b->b.data();
  }  // (b given back first, then a: theirs is the most recent)
  REQUIRE(cache.kept_sets() == 2);
  const std::byte* got_there = nullptr;
  std::thread([&] {
    Cache::Lease l(cache);  // none given back by this new thread: the most recent
    got_there = l->b.data();
  }).join();
  CHECK(got_there == theirs);  // (and that thread gave it back last: the most recent again)
  Cache::Lease here(cache);    // this thread's own, though not the most recent
  CHECK(here->b.data() == mine);
}

TEST_CASE("while a call holds a Use every set is kept; the last Use's end trims to the bound") {
  using Cache = ScratchCache<OneBuffer<2>>;
  Cache& cache = Cache::shared();
  constexpr size_t kSet = 24 * kMiB;  // two fit under the 64 MiB bound, three do not
  static_assert(2 * kSet <= Cache::kKeptBytes && 3 * kSet > Cache::kKeptBytes);
  std::vector<const std::byte*> order;  // data of the sets, in the order given back
  {
    Cache::Use outer(cache);
    {
      Cache::Use inner(cache);  // (calls may overlap: only the last one to end trims)
      std::vector<std::unique_ptr<Cache::Lease>> leases;
      for (int i = 0; i < 6; ++i) {
        leases.push_back(std::make_unique<Cache::Lease>(cache));
        grow((*leases.back())->b, kSet);
      }
      for (auto& l : leases) {
        order.push_back((*l)->b.data());
        l.reset();  // given back
      }
      CHECK(cache.kept_sets() == 6);
    }
    CHECK(cache.kept_sets() == 6);  // the outer call still runs
  }
  CHECK(cache.kept_sets() == 2);  // 2 x 24 MiB; a third would pass 64 MiB
  CHECK(cache.kept_bytes() <= Cache::kKeptBytes);
  // The ones kept are the most recently given back.
  Cache::Lease newest(cache);
  CHECK(newest->b.data() == order[5]);
  Cache::Lease next(cache);
  CHECK(next->b.data() == order[4]);
}

TEST_CASE("without a Use, a set given back is trimmed at once; one over the bound is not kept") {
  using Cache = ScratchCache<OneBuffer<3>>;
  Cache& cache = Cache::shared();
  {
    Cache::Lease big(cache);
    grow(big->b, Cache::kKeptBytes + kMiB);
  }
  CHECK(cache.kept_sets() == 0);
  CHECK(cache.kept_bytes() == 0);
  {
    Cache::Lease small(cache);
    grow(small->b, kMiB);
  }
  CHECK(cache.kept_sets() == 1);
}

TEST_CASE("freeing a large scratch buffer gives its memory back to the kernel") {
  // (Why ScratchBytes maps large blocks itself: malloc may keep a freed block resident.)
  constexpr size_t kBytes = 64 * kMiB;
  auto buffer = std::make_unique<ScratchBytes>(kBytes);
  std::memset(buffer->data(), 1, kBytes);  // every page resident
  const size_t with = resident_bytes();
  buffer.reset();
  const size_t without = resident_bytes();
  CHECK(with > without);
  CHECK(with - without >= kBytes - kMiB);
}

TEST_CASE("a scratch buffer's resize does not zero what it adds") {
  // Seen through the allocator: construct() default-initialises (a std::vector<std::byte>
  // would memset every byte it adds).
  ScratchAllocator<std::byte> a;
  std::byte* p = a.allocate(ScratchAllocator<std::byte>::kMappedBytes);
  p[0] = std::byte{7};
  a.construct(p);
  CHECK(p[0] == std::byte{7});
  a.deallocate(p, ScratchAllocator<std::byte>::kMappedBytes);
}

TEST_CASE("release_scratch_memory frees the kept sets of every cache; leased sets stay") {
  using A = ScratchCache<OneBuffer<5>>;
  using B = ScratchCache<OneBuffer<6>>;
  A::Lease held(A::shared());  // leased through the release: not freed by it
  grow(held->b, kMiB);
  {
    A::Lease a(A::shared());
    grow(a->b, 2 * kMiB);
    B::Lease b(B::shared());
    grow(b->b, 3 * kMiB);
  }
  REQUIRE(A::shared().kept_bytes() >= 2 * kMiB);
  REQUIRE(B::shared().kept_bytes() >= 3 * kMiB);
  const size_t kept = A::shared().kept_bytes() + B::shared().kept_bytes();
  CHECK(release_scratch_memory() >= kept);  // (other caches of this process may add theirs)
  CHECK(A::shared().kept_sets() == 0);
  CHECK(B::shared().kept_sets() == 0);
  CHECK(held->b.size() == kMiB);  // still usable
}

TEST_CASE("a child of fork() gets a cache of its own, empty") {
  using Cache = ScratchCache<OneBuffer<4>>;
  Cache& parent = Cache::shared();
  {
    Cache::Lease l(parent);
    grow(l->b, kMiB);
  }
  REQUIRE(parent.kept_sets() == 1);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    Cache& child = Cache::shared();
    bool ok = &child != &parent && child.kept_sets() == 0;
    {
      Cache::Lease l(child);
      ok = ok && l->b.empty();
    }
    ok = ok && child.kept_sets() == 1 && &Cache::shared() == &child;
    // The release frees the child's sets, and never touches the parent's cache (which the
    // child inherited as memory).
    ok = ok && release_scratch_memory() >= child.kept_bytes() && child.kept_sets() == 0;
    ok = ok && parent.kept_sets() == 1;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(parent.kept_sets() == 1);  // the parent's untouched
}

}  // namespace
}  // namespace jtree
