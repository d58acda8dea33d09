#include "variants/tx.hpp"

#include "common/fault.hpp"

namespace rmastore::internal {

std::vector<std::uint64_t> decision_record(std::uint64_t seq, const TxValues &values) {
  std::vector<std::uint64_t> record;
  record.push_back(seq);
  for (const auto &kv : values) record.push_back(kv.first);
  return record;
}

void write_commit(std::uint64_t seq, const std::vector<TxItem> &items, const SlotId &record,
                  const std::vector<Copy> &record_copies, const std::vector<std::uint64_t> &contents,
                  const SlotWriter &write) {
  RMASTORE_FAULT_POINT("tx.before_pending");
  bool first = true;
  for (const TxItem &it : items) {
    if (!first) RMASTORE_FAULT_POINT("tx.between_pending");
    first = false;
    write(it.pending_copies, it.key, it.version, it.op->bytes.size(),
          make_flags(it.op->del ? kFlagDeleted : 0, Ns::kPending, seq), it.op->bytes.data());
  }
  RMASTORE_FAULT_POINT("tx.before_record");
  write(record_copies, record.key, seq, contents.size() * sizeof(std::uint64_t), make_flags(0, Ns::kTxRecord),
        contents.data());
  RMASTORE_FAULT_POINT("tx.after_record");
  first = true;
  for (const TxItem &it : items) {
    if (!first) RMASTORE_FAULT_POINT("tx.during_apply");
    first = false;
    write(it.value_copies, it.key, it.version, it.op->bytes.size(),
          make_flags(it.op->del ? kFlagDeleted : 0, Ns::kValue), it.op->bytes.data());
  }
}

} // namespace rmastore::internal
