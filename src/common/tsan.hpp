// What ThreadSanitizer cannot see by itself: a control message from this process's helper
// thread to one of its agents (a grant, a lock, a lookup) orders everything the helper did before
// sending it against everything the agent does after receiving it, because MPI's matching
// synchronises the two threads inside the library, which is not instrumented. Without this, the
// helper making a slot (mapping its region, writing its header) and the agent writing the slot
// once the grant arrived read as a race. No-ops outside a ThreadSanitizer build.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void *addr);
extern "C" void __tsan_release(void *addr);
#endif

namespace rmastore::internal {

#if defined(__SANITIZE_THREAD__)
inline void *reply_sync() {
  static char sync;
  return &sync;
}
// The helper, before it sends a reply.
inline void reply_sent() {
  __tsan_release(reply_sync());
}
// An agent, after replies arrived.
inline void replies_received() {
  __tsan_acquire(reply_sync());
}
#else
inline void reply_sent() {}
inline void replies_received() {}
#endif

} // namespace rmastore::internal
