#include "common/errors.hpp"

namespace rmastore::internal {

void throw_mpi_error(int rc, const char *call) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS) n = 0;
  throw StoreError(STORE_ERR_MPI, std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(n)));
}

} // namespace rmastore::internal
