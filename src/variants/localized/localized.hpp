// The localized recovery variant: every put takes the lock of each copy's slot (locks.hpp);
// locks of failed processes are broken by repairs, which the repair thread of each process runs
// in the background (repair.hpp). Nobody has to stop for a failure: placement leaves the failed
// out as soon as this process learns of them (Membership::follow), and operations that a
// failure hit start over on the new holders. store_recover is optional, a compaction.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "client/core.hpp"
#include "variants/localized/locks.hpp"
#include "variants/localized/repair.hpp"
#include "variants/variant.hpp"

namespace rmastore::internal {

class LocalizedVariant final : public Variant {
public:
  explicit LocalizedVariant(Core &core) : c_(core), locks_(core) {}
  ~LocalizedVariant() override;

  std::function<void()> start() override;
  void stop() override;
  void after_helper_stopped() override { repairer_.reset(); }
  void check_usable() const override {}
  void put(std::uint64_t key, const void *buf, std::size_t len) override;
  void del(std::uint64_t key) override;
  void put_many(const std::vector<PutItem> &items) override;
  void get_many(std::vector<GetItem> &items) override;
  std::vector<std::uint64_t> list(std::uint64_t first, std::uint64_t last, std::size_t limit, bool *more) override;
  store_status_t get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) override;
  void commit(const TxValues &values) override;
  void on_message(const CtrlMsg &msg, int source) override;
  void give_back_locks() override;
  store_mode_t mode() const override { return STORE_MODE_NORMAL; }
  void back_to_normal(bool tx_open) override;
  bool finalize_barrier() override;
  void before_recover() override;
  void after_recover() override {}
  const store_key_t *lost_keys(const std::vector<store_key_t> &recovered, std::size_t *count) const override;
  void stats(store_info_t &out) const override;
  std::vector<int> holders(std::uint64_t key) override;

private:
  // Decides whether an operation that failed with `e` starts over. It does when a process
  // failed: the failure set and placement are first brought up to what MPI knows (the helper's
  // notice may lag behind the error the operation saw), with a short wait while nothing new is
  // known. Not for other errors, after a revocation, or after 30 s without news. One object per
  // operation: it carries the failure count and deadline between attempts.
  class Retry {
  public:
    explicit Retry(Core &c) : c_(c), seen_(c.rt.failures->failures()) {}
    bool after(const StoreError &e);

  private:
    Core &c_;
    int seen_;
    std::int64_t deadline_ = 0;
  };

  // One attempt's start: brings placement up to the failures known, then takes the locks that
  // requests() lists under it. Nothing when the attempt met a failure after which it starts over
  // (Retry::after); any other error is thrown.
  // With `cache`, a put's: locks cached by earlier puts are taken again (LockClient::acquire).
  template <class Requests>
  std::optional<std::vector<Lock>> lock_attempt(Retry &retry, Requests &&requests, bool cache = false);
  // One attempt's work under the locks lock_attempt took, then their release (with
  // `unlock_flags`). False when the work met a failure after which the operation starts over:
  // the locks are released then too, without the flags, since the work is not done.
  template <class Work>
  bool under_locks(Retry &retry, std::vector<Lock> &locks, Work &&work, std::uint32_t unlock_flags = 0);
  // The same, with `done` in place of the release once the work succeeded.
  template <class Work, class Done>
  bool under_locks_then(Retry &retry, std::vector<Lock> &locks, Work &&work, Done &&done);

  // Helper thread, after it recorded new failures: placement leaves them out, their queued lock
  // requests go, and every slot whose lock a failed process holds is repaired.
  void on_failures();
  // Records `keys` at their witnesses (witnesses.hpp), under the locks of their copies: once
  // they are released, the next locker finds complete copies and relies on the records.
  void record(const std::vector<std::uint64_t> &keys, MsgType type = MsgType::kWitness);
  // After a failure, no holder had a copy of `key`: under the locks of its holders (so that no
  // put or delete is half done), whether it was lost (a lost marker, or a record at a holder or
  // witness: STORE_ERR_DATA_LOST), deleted or never put (STORE_ERR_NOT_FOUND), or has a copy
  // after all (STORE_OK: a put completed meanwhile, read again).
  store_status_t confirm_absent(std::uint64_t key);
  // A get found `key` lost: it joins this process's loss list (store_last_recovery) before the
  // get returns, so that the list never lags behind what a get said; the repair's notice to
  // every process may still be on its way. Returns STORE_ERR_DATA_LOST.
  store_status_t lost_here(std::uint64_t key);
  // Throws STORE_ERR_PROC_FAILED if fewer than `copies` copies were written.
  static void all_written(std::size_t written, std::size_t copies);
  // Writes one slot's copies; a holder that fails meanwhile makes it throw STORE_ERR_PROC_FAILED
  // (all_written), after the other copies were written.
  std::vector<Copy> write(const std::vector<Copy> &copies, std::uint64_t key, std::uint64_t version, std::size_t length,
                          std::uint64_t flags, const void *buf);

  Core &c_;
  LockClient locks_;
  // One per runtime: made before the helper starts, destroyed once it stopped (until then the
  // helper may hand it work).
  std::unique_ptr<Repairer> repairer_;
  std::uint64_t tx_seq_ = 0;                     // transactions committed (or attempted) by this process
  mutable std::vector<store_key_t> lost_report_; // what lost_keys hands out
};

} // namespace rmastore::internal
