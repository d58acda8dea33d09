// Stores the application did not finalize are taken down inside MPI_Finalize, before their
// threads could call MPI after it (which aborts the job): a hook on MPI_COMM_SELF's attributes,
// and the list of live stores it walks.
#pragma once

#include "capi/handle.hpp"

namespace rmastore::internal::capi {

// Sets the attribute whose deletion (the first step of MPI_Finalize) finalizes the live stores,
// once per MPI initialisation. STORE_ERR_MPI if MPI refuses.
store_status_t install_finalize_hook() noexcept;

// Adds a new store to the list MPI_Finalize takes down, or takes it off (store_finalize).
void remember_store(store_t s) noexcept;
void forget_store(store_t s) noexcept;

// The store's own teardown (collective). If it does not complete, what it holds is left
// allocated: freeing more could hang or abort, and MPI_Finalize frees the MPI objects.
void finalize_impl(store_t s);

} // namespace rmastore::internal::capi
