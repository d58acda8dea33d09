#include "common/slot.hpp"

#include <sys/mman.h>

// The checksum is XXH3 (xxHash), compiled into this file from xxhash.h: the library links nothing
// for it. CMakeLists.txt compiles this file at -O3, at which GCC 12 makes xxHash 0.8.1's SSE2 loop
// 1.5 to 1.8 times as fast as at -O2 (benchmarks/checksum_bench, docs/benchmarks.md). XXH3's
// output is stable from 0.8.0 on.
#define XXH_INLINE_ALL
#include <xxhash.h>
#if XXH_VERSION_NUMBER < 800
#error "xxHash 0.8.0 or newer is needed (XXH3's output is stable from 0.8.0 on)"
#endif

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

namespace rmastore::internal {
namespace {

const unsigned char *writer_part(const SlotHeader &h) {
  return reinterpret_cast<const unsigned char *>(&h) + kWriterOffset;
}

} // namespace

// XXH3 over the writer's part of the header, with the checksum field 0.
std::uint64_t header_checksum(const SlotHeader &h) {
  SlotHeader c = h;
  c.checksum = 0;
  return XXH3_64bits(writer_part(c), kWriterBytes);
}

// The value's XXH3 takes the checksum field's place in the header, which is then hashed: every
// header field and the value are covered, and both calls use XXH3's default secret (a seeded call
// would derive a secret of its own for each value over 240 bytes).
std::uint64_t slot_checksum(const SlotHeader &h, const void *value) {
  return slot_checksum_of_sum(h, value_sum(value, static_cast<std::size_t>(h.length)));
}

std::uint64_t value_sum(const void *value, std::size_t len) {
  return XXH3_64bits(value, len);
}

std::uint64_t slot_checksum_of_sum(const SlotHeader &h, std::uint64_t sum) {
  SlotHeader c = h;
  c.checksum = sum;
  return XXH3_64bits(writer_part(c), kWriterBytes);
}

std::uint64_t copy_checksum(const SlotHeader &h, const void *value) {
  return in_place(h.length) || slot_summed(h) ? slot_checksum(h, value) : header_checksum(h);
}

std::uint64_t bytes_checksum(const void *data, std::size_t len) {
  return XXH3_64bits(data, len);
}

bool slot_valid(const SlotHeader &h, const void *value) {
  const std::uint64_t bits = flag_bits(h.flags);
  return h.version != kNoVersion && h.length <= h.capacity && in_place(h.length) &&
         (bits == 0 || (bits == kFlagDeleted && h.length == 0)) && slot_checksum(h, value) == h.checksum;
}

bool buffered_valid(const SlotHeader &before, const SlotHeader &after) {
  // The owner word may change between the two reads (a lock taken or released): only the
  // writer's part must be the same, and the slot must not have retired.
  return before.version != kNoVersion && (flag_bits(before.flags) & ~kFlagHalfB) == 0 && before.owner != kSlotRetired &&
         after.owner != kSlotRetired && before.capacity == after.capacity && !in_place(before.length) &&
         before.length <= before.capacity && header_checksum(before) == before.checksum &&
         std::memcmp(reinterpret_cast<const unsigned char *>(&before) + kWriterOffset,
                     reinterpret_cast<const unsigned char *>(&after) + kWriterOffset, kWriterBytes) == 0;
}

bool summed_valid(const SlotHeader &h, const void *value) {
  return h.version != kNoVersion && (flag_bits(h.flags) & ~kFlagHalfB) == kFlagSummed && h.owner != kSlotRetired &&
         summed_length(h.length) && h.length <= h.capacity && slot_checksum(h, value) == h.checksum;
}

std::size_t value_offset(const SlotHeader &h, std::uint64_t capacity) {
  return kHeaderBytes + ((flag_bits(h.flags) & kFlagHalfB) != 0 ? static_cast<std::size_t>(capacity) : 0);
}

SlotHeader empty_header(std::uint64_t capacity, std::uint64_t key, Ns ns) {
  SlotHeader h{};
  h.capacity = capacity;
  h.key = key;
  h.flags = make_flags(0, ns);
  h.checksum = header_checksum(h);
  return h;
}

SlotHeader lost_header(std::uint64_t capacity, std::uint64_t key, Ns ns) {
  SlotHeader h = empty_header(capacity, key, ns);
  h.flags = make_flags(kFlagLost, ns);
  h.checksum = header_checksum(h);
  return h;
}

bool slot_empty(const SlotHeader &h) {
  return h.version == kNoVersion && h.length == 0 && flag_bits(h.flags) == 0 && h.checksum == header_checksum(h);
}

bool slot_lost(const SlotHeader &h) {
  return h.version == kNoVersion && h.length == 0 && flag_bits(h.flags) == kFlagLost &&
         h.checksum == header_checksum(h);
}

std::size_t capacity_class(std::size_t need, std::size_t min_capacity) {
  return std::bit_ceil(need < min_capacity ? min_capacity : need);
}

std::size_t slot_bytes(std::size_t capacity) {
  const std::size_t half = (capacity + 63) & ~std::size_t{63};
  return kHeaderBytes + (capacity > kInPlaceLimit ? 2 * half : half);
}

SlotAllocator::SlotAllocator(std::size_t min_capacity, std::size_t first_region_bytes, AttachFn attach)
    : min_capacity_(std::bit_ceil(min_capacity < 8 ? std::size_t{8} : min_capacity)),
      next_region_bytes_(first_region_bytes < (std::size_t{1} << 16) ? std::size_t{1} << 16 : first_region_bytes),
      attach_(std::move(attach)), free_(64) {}

SlotAllocator::~SlotAllocator() {
  for (const Region &r : regions_) munmap(r.base, r.bytes);
}

std::atomic<std::uintptr_t> &SlotAllocator::entry(std::size_t i) const {
  const std::size_t j = i + kFirstChunk;
  const int c = static_cast<int>(std::bit_width(j)) - 1 - std::countr_zero(kFirstChunk);
  return chunks_[c][j - (kFirstChunk << c)];
}

void SlotAllocator::reserve_entry() {
  const std::size_t j = slots_.load(std::memory_order_relaxed) + kFirstChunk;
  const int c = static_cast<int>(std::bit_width(j)) - 1 - std::countr_zero(kFirstChunk);
  if (c >= kChunks) throw std::bad_alloc();
  if (!chunks_[c]) chunks_[c] = std::make_unique<std::atomic<std::uintptr_t>[]>(kFirstChunk << c);
}

std::size_t SlotAllocator::add_entry(std::byte *base) {
  const std::size_t i = slots_.load(std::memory_order_relaxed);
  entry(i).store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_relaxed);
  slots_.store(i + 1, std::memory_order_release);
  return i;
}

void SlotAllocator::mark_moved(const Block &b) {
  if (b.base != nullptr)
    entry(b.index).store(reinterpret_cast<std::uintptr_t>(b.base) | kSkip, std::memory_order_release);
}

std::byte *SlotAllocator::carve(std::size_t bytes) {
  if (bump_ == nullptr || static_cast<std::size_t>(bump_end_ - bump_) < bytes) {
    std::size_t region = next_region_bytes_;
    if (region < bytes) region = bytes;
    region = (region + 4095) & ~std::size_t{4095};
    void *mem = mmap(nullptr, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) throw std::bad_alloc();
    // Huge pages where the kernel offers them on request (transparent_hugepage=madvise, Debian's
    // default): a fresh slot's first write then faults once per 2 MiB, not once per 4 KiB, and
    // recovery writes every moved and quarantined copy into fresh slots.
    (void)madvise(mem, region, MADV_HUGEPAGE);
    try {
      attach_(mem, region);
    } catch (...) {
      munmap(mem, region);
      throw;
    }
    // The tail of the previous region is abandoned: at most one slot's worth per region.
    regions_.push_back(Region{static_cast<std::byte *>(mem), region});
    attached_bytes_.fetch_add(region, std::memory_order_relaxed);
    region_count_.fetch_add(1, std::memory_order_relaxed);
    bump_ = static_cast<std::byte *>(mem);
    bump_end_ = bump_ + region;
    next_region_bytes_ = std::min(region * 2, kMaxRegionStep);
  }
  std::byte *p = bump_;
  bump_ += bytes;
  return p;
}

SlotAllocator::Block SlotAllocator::allocate(std::size_t need, std::uint64_t key, Ns ns) {
  const std::size_t cap = capacity_class(need, min_capacity_);
  const auto cls = static_cast<std::size_t>(std::countr_zero(cap));
  const SlotHeader h = empty_header(cap, key, ns);
  // The header is written before the slot is published in the directory (for_each_slot).
  Block b;
  if (!free_[cls].empty()) {
    b = free_[cls].back();
    free_[cls].pop_back();
    store_header(b.base, h);
    entry(b.index).store(reinterpret_cast<std::uintptr_t>(b.base), std::memory_order_release);
  } else {
    reserve_entry(); // first: a slot carved must find its place in the directory
    b.base = carve(slot_bytes(cap));
    b.capacity = cap;
    store_header(b.base, h);
    b.index = add_entry(b.base);
  }
  return b;
}

std::size_t SlotAllocator::copy_value(const Block &from, const Block &to) {
  SlotHeader h = load_header(from.base);
  std::size_t length = 0;
  if (h.version != kNoVersion && h.length <= from.capacity && h.length <= to.capacity) length = h.length;
  const std::byte *copied = to.base + kHeaderBytes;
  copy_within_window(to.base + kHeaderBytes, from.base + value_offset(h, from.capacity), length);
  if ((flag_bits(h.flags) & kFlagHalfB) != 0) {
    // A copy that was not valid stays invalid: a new checksum must not bless a torn one. The
    // value is hashed once, for both checksums.
    const bool summed = slot_summed(h);
    const std::uint64_t sum = summed ? value_sum(copied, length) : 0;
    const auto checksum = [&] { return summed ? slot_checksum_of_sum(h, sum) : header_checksum(h); };
    const bool valid = length == h.length && checksum() == h.checksum;
    h.flags &= ~kFlagHalfB;
    if (valid) h.checksum = checksum();
  }
  copy_to_window(to.base + kWriterOffset, reinterpret_cast<const std::byte *>(&h) + kWriterOffset, kWriterBytes);
  return kWriterBytes + length;
}

void SlotAllocator::release(Block b) {
  if (b.base == nullptr) return;
  SlotHeader h{};
  h.capacity = b.capacity;
  h.owner = kSlotRetired;
  store_header(b.base, h);
  entry(b.index).store(reinterpret_cast<std::uintptr_t>(b.base) | kSkip, std::memory_order_release);
  free_[static_cast<std::size_t>(std::countr_zero(b.capacity))].push_back(b);
}

} // namespace rmastore::internal
