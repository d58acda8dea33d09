// The ULFM extensions (MPIX_Comm_revoke, _shrink, _agree, _get_failed, _ack_failed). Open MPI's
// mpi-ext.h needs mpi.h first, which include sorting would undo; include this instead.
#pragma once

#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>
