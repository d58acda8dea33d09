// The one door through which tests look inside the core: the Store behind a live handle. Not
// installed and not part of any API; tests link the internal build (rmastore_internal).
#pragma once

#include "rmastore/store.h"
#include "store/store.hpp"

namespace rmastore::internal {
// The store behind a live handle, or nullptr.
Store *impl(store_t s);
} // namespace rmastore::internal
