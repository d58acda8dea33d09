// Slots and memory: the layout of a copy in window memory, its checksum, and the allocator that
// carves slots out of memory regions attached to the dynamic window.
//
// A slot is a 64-byte header followed by `capacity` bytes of value:
//
//   offset  0  capacity   u64  written by the holder only
//   offset  8  state      u64  written by the holder only: kSlotLive or kSlotRetired
//   offset 16  key        u64  -+
//   offset 24  version    u64   |  written by the writer together with the value, in one
//   offset 32  length     u64   |  RMA put: [16, 64 + length)
//   offset 40  epoch      u32   |
//   offset 44  writer     u32   |
//   offset 48  checksum   u64   |  over bytes [16, 48) and the value
//   offset 56  reserved   u64  -+
//   offset 64  value bytes ...
//
// A reader accepts a copy only if its checksum matches, so a read that races with a put (which
// may land in any byte order) is detected and retried instead of returning a torn value.
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
  std::uint64_t reserved1;
};
static_assert(sizeof(SlotHeader) == 64, "slot header must stay one cache line");

inline constexpr std::size_t kHeaderBytes = sizeof(SlotHeader);
// The part of the header a writer puts along with the value.
inline constexpr std::size_t kWriterOffset = offsetof(SlotHeader, key);
inline constexpr std::size_t kWriterBytes = kHeaderBytes - kWriterOffset;
inline constexpr std::size_t kChecksumCoveredBytes = offsetof(SlotHeader, checksum) - kWriterOffset;
// Version 0 marks a slot that was allocated but never written.
inline constexpr std::uint64_t kNoVersion = 0;
// A retired slot was given up by its key (it moved or was freed). A reader that still had its
// address must look the key up again rather than take the old contents for the latest value.
inline constexpr std::uint64_t kSlotLive = 0;
inline constexpr std::uint64_t kSlotRetired = 0x5245544952454421ULL; // "RETIRED!"

// 64-bit checksum of a byte string; four independent lanes so that it runs near memory speed.
std::uint64_t checksum64(const void *data, std::size_t len, std::uint64_t seed);

// Checksum a writer stores in h.checksum for `value`: covers key, version, length, epoch, writer
// and the value.
std::uint64_t slot_checksum(const SlotHeader &h, const void *value);

// True if `h` and `value` (h.length bytes) form a complete, untorn copy.
bool slot_valid(const SlotHeader &h, const void *value);

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

  // A slot whose capacity is the class of `need`; its header is zeroed but for capacity.
  // Throws std::bad_alloc when memory or regions run out.
  Block allocate(std::size_t need);
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
