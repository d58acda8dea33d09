// The global recovery variant: each slot's holder gives a write grant to one writer, which the
// writer caches, so that a repeat put is purely one-sided; readers cache lookups. Writers of one
// key must not overlap. A failure stops everybody (STORE_ERR_PROC_FAILED) until all survivors
// call store_recover, which decides what every failure interrupted (rereplicate.hpp); after it,
// puts must be in transactions until store_back_to_normal.
#pragma once

#include "client/core.hpp"
#include "variants/variant.hpp"

namespace rmastore::internal {

class GlobalVariant final : public Variant {
public:
  explicit GlobalVariant(Core &core) : c_(core) {}

  std::function<void()> start() override { return {}; }
  void stop() override {}
  void after_helper_stopped() override {}
  void check_usable() const override;
  void put(std::uint64_t key, const void *buf, std::size_t len) override;
  void del(std::uint64_t key) override;
  void put_many(const std::vector<PutItem> &items) override;
  void get_many(std::vector<GetItem> &items) override;
  std::vector<std::uint64_t> list(std::uint64_t first, std::uint64_t last, std::size_t limit, bool *more) override;
  store_status_t get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) override;
  void commit(const TxValues &values) override;
  void on_message(const CtrlMsg &, int) override {}
  store_mode_t mode() const override { return mode_; }
  void back_to_normal(bool tx_open) override;
  bool finalize_barrier() override;
  void before_recover() override {}
  void after_recover() override { mode_ = STORE_MODE_TRANSACTION; }
  const store_key_t *lost_keys(const std::vector<store_key_t> &recovered, std::size_t *count) const override;
  void stats(store_info_t &) const override {}
  std::vector<int> holders(std::uint64_t key) override;

private:
  // Write grants big enough for `len` at every holder of `id`. `asked`: some holder was asked;
  // `fresh`: some holder's reply shows no complete value there (the key may be new).
  struct Grants {
    std::vector<Copy> copies;
    bool asked = false;
    bool fresh = false;
  };
  Grants acquire_write(const SlotId &id, std::size_t len, std::uint64_t *version);
  // Whether a put of value `id` that got `g` must record its key at the witnesses: when a holder
  // showed no complete value, or nobody was asked and this process never recorded it. Holders
  // that all showed a complete value prove the records exist (witnesses.hpp): from then on the
  // key counts as recorded here too, or a second writer's next put would record it again.
  bool needs_record(const SlotId &id, const Grants &g) {
    if (g.asked && !g.fresh) c_.cache.set_witnessed(id);
    return g.fresh || (!g.asked && !c_.cache.witnessed(id));
  }
  // Writes one slot's copies; a holder's failure is an error.
  void write(const std::vector<Copy> &copies, std::uint64_t key, std::uint64_t version, std::size_t length,
             std::uint64_t flags, const void *buf);
  // Write grants of `id` at the holders that have a slot for it, made by nobody: the copies to
  // delete. Other writers' grants of them end.
  std::vector<Copy> existing_grants(const SlotId &id, std::uint64_t *version);
  // Records `keys` at their witnesses, so that a recovery that finds all their copies gone
  // reports them lost; or (`type` kUnwitness) drops the records of deleted keys everywhere.
  void record(const std::vector<std::uint64_t> &keys, MsgType type = MsgType::kWitness);
  // A deleted key's slots: this process forgets them, and their holders free them unless
  // another writer took them since (kReclaim).
  void reclaim(std::uint64_t key, std::uint64_t version);

  Core &c_;
  store_mode_t mode_ = STORE_MODE_NORMAL;
  std::uint64_t tx_seq_ = 0; // transactions committed (or attempted) by this process
};

} // namespace rmastore::internal
