// Errors inside the core are exceptions carrying a store status; the C boundary (capi.cpp) turns
// them back into statuses. Every MPI return code goes through check_mpi.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

#include "rmastore/store.h"

namespace rmastore::internal {

class StoreError : public std::runtime_error {
public:
  StoreError(store_status_t status, const std::string &what) : std::runtime_error(what), status_(status) {}
  store_status_t status() const { return status_; }

private:
  store_status_t status_;
};

[[noreturn]] void throw_mpi_error(int rc, const char *call);

inline void check_mpi(int rc, const char *call) {
  if (rc != MPI_SUCCESS) throw_mpi_error(rc, call);
}

} // namespace rmastore::internal
