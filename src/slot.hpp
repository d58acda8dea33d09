// Slots and memory: the layout of a copy in window memory, its checksum, and the allocator that
// carves slots out of memory regions attached to the dynamic window.
//
// A slot is a 64-byte header followed by `capacity` bytes of value:
//
//   offset  0  capacity   u64  written by the holder only
//   offset  8  state      u64  written by the holder only: kSlotLive or kSlotRetired
//   offset 16  key        u64  -+
//   offset 24  version    u64   |  written by the writer: [16, 64) and the value
//   offset 32  length     u64   |
//   offset 40  epoch      u32   |
//   offset 44  writer     u32   |
//   offset 48  checksum   u64   |  over bytes [16, 64) (this field as 0), and the value
//   offset 56  flags      u64  -+  kFlagWriting while a sequenced value is being written
//   offset 64  value bytes ...
//
// A put may land in any byte order, and a get may race with it; even one 8-byte field of the
// header can be read half old, half new (seen in tests). So a reader takes no decision on a
// header it has not validated. Two protocols make sure a get never returns a torn value:
//   checksummed (length <= kChecksumLimit): header and value go out together in one round trip;
//     the checksum covers both, and a reader accepts a copy only if it matches.
//   sequenced (larger values, where hashing would cost more than two round trips): the writer
//     puts the header marked kFlagWriting and waits for completion, puts the value and waits,
//     then puts the header unmarked. The checksum covers the header only. A reader reads the
//     header, then the value, then the header again, and accepts two identical, valid, unmarked
//     headers.
// A slot that was never written holds a valid empty header (version 0, length 0), so "not found"
// is also a validated answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace rmastore::internal {

struct SlotHeader {
  std::uint64_t capacity;
  std::uint64_t state;
  std::uint64_t key;
  std::uint64_t version;
  std::uint64_t length;
  std::uint32_t epoch;
  std::uint32_t writer;
  std::uint64_t checksum;
  std::uint64_t flags;
};
static_assert(sizeof(SlotHeader) == 64, "slot header must stay one cache line");

inline constexpr std::size_t kHeaderBytes = sizeof(SlotHeader);
// The part of the header a writer puts along with the value.
inline constexpr std::size_t kWriterOffset = offsetof(SlotHeader, key);
inline constexpr std::size_t kWriterBytes = kHeaderBytes - kWriterOffset;
inline constexpr std::size_t kChecksumCoveredBytes = offsetof(SlotHeader, checksum) - kWriterOffset;
// Values above this length use the sequenced protocol.
inline constexpr std::size_t kChecksumLimit = 256 * 1024;
inline constexpr std::uint64_t kFlagWriting = 1;
inline bool sequenced(std::uint64_t length) {
  return length > kChecksumLimit;
}

// Version 0 marks a slot that was allocated but never written.
inline constexpr std::uint64_t kNoVersion = 0;
// A retired slot was given up by its key (it moved or was freed). A reader that still had its
// address must look the key up again rather than take the old contents for the latest value.
inline constexpr std::uint64_t kSlotLive = 0;
inline constexpr std::uint64_t kSlotRetired = 0x5245544952454421ULL; // "RETIRED!"

// 64-bit checksum of a byte string; four independent lanes so that it runs near memory speed.
std::uint64_t checksum64(const void *data, std::size_t len, std::uint64_t seed);

// Checksum of the writer's part of the header, and of a checksummed copy (header and value).
std::uint64_t header_checksum(const SlotHeader &h);
std::uint64_t slot_checksum(const SlotHeader &h, const void *value);

// Checksummed copies: true if `h` and `value` (h.length bytes) form a complete, untorn copy.
bool slot_valid(const SlotHeader &h, const void *value);
// Sequenced copies: true if the headers read before and after the value show that no put
// touched the value meanwhile.
bool sequenced_valid(const SlotHeader &before, const SlotHeader &after);
// True if `h` is the untorn header of a slot that was never written. The key is part of it: a
// slot freed and handed to another key must not read as "not found" for the old one.
bool slot_empty(const SlotHeader &h);
// The header of a slot for `key` that was never written.
SlotHeader empty_header(std::uint64_t capacity, std::uint64_t key);

// Capacity classes are powers of two, at least `min_capacity` (itself a power of two >= 8).
std::size_t capacity_class(std::size_t need, std::size_t min_capacity);
// Bytes a slot of `capacity` takes in memory: header plus capacity, 64-byte aligned.
std::size_t slot_bytes(std::size_t capacity);

// Hands out slots from memory regions ("arenas") attached to the window. Regions are mapped
// lazily, so a large region costs address space, not memory, until it is written. Each region is
// attached once; the number of regions grows logarithmically with the memory held, which keeps
// well below Open MPI's limit on attached regions per window (osc_rdma_max_attach, 64).
class SlotAllocator {
public:
  struct Region {
    std::byte *base;
    std::size_t bytes;
  };
  struct Block {
    std::byte *base = nullptr; // the slot header
    std::size_t capacity = 0;  // value bytes after the header
  };
  using AttachFn = std::function<void(void *, std::size_t)>;

  SlotAllocator(std::size_t min_capacity, std::size_t first_region_bytes, AttachFn attach);
  ~SlotAllocator();
  SlotAllocator(const SlotAllocator &) = delete;
  SlotAllocator &operator=(const SlotAllocator &) = delete;

  // A slot for `key` whose capacity is the class of `need`, with an empty header. Throws
  // std::bad_alloc when memory or regions run out.
  Block allocate(std::size_t need, std::uint64_t key);
  // Marks the slot retired and makes it available again.
  void release(Block b);

  const std::vector<Region> &regions() const { return regions_; }
  std::size_t attached_bytes() const;
  std::size_t min_capacity() const { return min_capacity_; }

  // Largest region added in one step once regions are large; bounds the unused address space.
  static constexpr std::size_t kMaxRegionStep = std::size_t{1} << 30;

private:
  std::byte *carve(std::size_t bytes);

  std::size_t min_capacity_;
  std::size_t next_region_bytes_;
  AttachFn attach_;
  std::vector<Region> regions_;
  std::byte *bump_ = nullptr;
  std::byte *bump_end_ = nullptr;
  std::vector<std::vector<std::byte *>> free_; // free slots per capacity class (log2)
};

} // namespace rmastore::internal
