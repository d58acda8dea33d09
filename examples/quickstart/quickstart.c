/* Every rank stores a value; every rank then reads its neighbour's from the replicated store.
 *   mpirun --with-ft ulfm -n 4 ./quickstart */
#include <rmastore/store.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                                                    \
  do {                                                                                                                 \
    store_status_t st_ = (call);                                                                                       \
    if (st_ != STORE_OK) {                                                                                             \
      fprintf(stderr, "%s failed: %s\n", #call, store_strerror(st_));                                                  \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                                    \
    }                                                                                                                  \
  } while (0)

int main(int argc, char **argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = size < 2 ? 1 : 2; /* two copies of every value, on different processes */
  store_t store;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &store));

  char value[64];
  snprintf(value, sizeof value, "checkpoint of rank %d", rank);
  CHECK(store_put(store, (store_key_t)rank, value, strlen(value) + 1)); /* all copies written */
  MPI_Barrier(MPI_COMM_WORLD);

  char got[64];
  size_t len;
  int peer = (rank + 1) % size;
  CHECK(store_get(store, (store_key_t)peer, got, sizeof got, &len));
  printf("rank %d read key %d: \"%s\" (%zu bytes)\n", rank, peer, got, len);

  CHECK(store_finalize(&store));
  MPI_Finalize();
  return 0;
}
