/* A program that defines store_init, store_put and store_get of its own (name_clash_app.c)
 * links with rmastore, and each side reaches its own functions: rmastore's calls are exported
 * as rmastore_store_* (include/rmastore/store.h, "Link names"). With bare store_* symbols, the
 * static link fails with multiple definitions, and against the shared library the program's
 * store_put and store_get take the place of rmastore's, so the round trip below fails. */
#include <rmastore/store.h>

#include <stdio.h>
#include <string.h>

#include "c_check.h"

int app_table_works(void); /* name_clash_app.c */

int main(int argc, char **argv) {
  int provided = 0, rank = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  CHECK(app_table_works());

  store_config_t cfg;
  CHECK(store_config_init(&cfg) == STORE_OK);
  cfg.replicas = size < 2 ? size : 2;
  store_t store = NULL;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &store) == STORE_OK);
  CHECK(store != NULL);
  if (store != NULL) {
    const long mine = 1000 + rank;
    CHECK(store_put(store, (store_key_t)rank, &mine, sizeof mine) == STORE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    const int peer = (rank + 1) % size;
    long got = 0;
    size_t len = 0;
    CHECK(store_get(store, (store_key_t)peer, &got, sizeof got, &len) == STORE_OK);
    CHECK(len == sizeof got && got == 1000 + peer);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(store_finalize(&store) == STORE_OK);
  }
  /* rmastore's calls did not disturb the application's table, nor the other way round. */
  CHECK(app_table_works());

  const int rc = write_verdict(rank);
  MPI_Finalize();
  return rc;
}
