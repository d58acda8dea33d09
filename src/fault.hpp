// Fault injection for tests: RMASTORE_FAULT_POINT("name") kills the calling process with
// SIGKILL when the environment variable RMASTORE_FAULT names that point for this process.
//
//   RMASTORE_FAULT=<point>@<rank>[#<n>][,...]
//
// kills process <rank> (its rank in the communicator the store was created on) the <n>-th time
// (default 1st) it reaches <point>. Points are compiled in only when the library is built with
// RMASTORE_FAULT_INJECTION (the test build, rmastore_internal); the installed library has none.
#pragma once

namespace rmastore::internal {

#if defined(RMASTORE_FAULT_INJECTION)
void fault_set_rank(int rank);
void fault_point(const char *name);
#define RMASTORE_FAULT_POINT(name) ::rmastore::internal::fault_point(name)
#else
inline void fault_set_rank(int) {}
#define RMASTORE_FAULT_POINT(name)                                                                                     \
  do {                                                                                                                 \
  } while (0)
#endif

} // namespace rmastore::internal
