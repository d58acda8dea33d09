#include "variants/tx.hpp"

#include "common/fault.hpp"

namespace rmastore::internal {

std::vector<std::uint64_t> decision_record(std::uint64_t seq, const TxValues &values) {
  std::vector<std::uint64_t> record;
  record.push_back(seq);
  for (const auto &kv : values) record.push_back(kv.first);
  return record;
}

CommitWrites write_commit(std::uint64_t seq, const std::vector<TxItem> &items, const SlotId &record,
                          const std::vector<Copy> &record_copies, const std::vector<std::uint64_t> &contents,
                          const Engine &engine, const SlotsWriter &write) {
  const auto jobs = [&](Ns ns) {
    std::vector<Engine::WriteJob> out;
    for (const TxItem &it : items) {
      const std::uint64_t flags = make_flags(it.op->del ? kFlagDeleted : 0, ns, ns == Ns::kPending ? seq : 0);
      out.push_back(Engine::WriteJob{ns == Ns::kPending ? it.pending_copies : it.value_copies,
                                     engine.header(it.key, it.version, it.op->bytes.size(), flags),
                                     it.op->bytes.data()});
    }
    return out;
  };
  CommitWrites w;
  RMASTORE_FAULT_POINT("tx.before_pending");
  w.pending = jobs(Ns::kPending);
  write(w.pending, [] { RMASTORE_FAULT_POINT("tx.between_pending"); });
  RMASTORE_FAULT_POINT("tx.before_record");
  w.record.push_back(Engine::WriteJob{
      record_copies,
      engine.header(record.key, seq, contents.size() * sizeof(std::uint64_t), make_flags(0, Ns::kTxRecord)),
      contents.data()});
  write(w.record, nullptr);
  RMASTORE_FAULT_POINT("tx.after_record");
  w.values = jobs(Ns::kValue);
  write(w.values, [] { RMASTORE_FAULT_POINT("tx.during_apply"); });
  return w;
}

} // namespace rmastore::internal
