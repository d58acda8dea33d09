/* The public headers compile as C11 and the library links from a C program, with the test
 * hooks of store_hooks.h exported. */
#include <rmastore/store.h>
#include <rmastore/store_hooks.h>

#include <stdio.h>
#include <string.h>

#include "c_check.h"

int main(int argc, char **argv) {
  int provided = 0, rank = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  store_config_t cfg;
  CHECK(store_config_init(&cfg) == STORE_OK);
  cfg.replicas = size < 2 ? size : 2;
  store_t store = NULL;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &store) == STORE_OK);

  char value[64];
  snprintf(value, sizeof value, "hello from rank %d", rank);
  CHECK(store_put(store, (store_key_t)rank, value, strlen(value) + 1) == STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);

  int peer = (rank + 1) % size;
  char expect[64], got[64];
  size_t len = 0;
  snprintf(expect, sizeof expect, "hello from rank %d", peer);
  CHECK(store_get(store, (store_key_t)peer, got, sizeof got, &len) == STORE_OK);
  CHECK(len == strlen(expect) + 1 && strcmp(got, expect) == 0);
  CHECK(store_get(store, 999999, got, sizeof got, &len) == STORE_ERR_NOT_FOUND);

  /* The test hook: the ranks holding the copies of the peer's key, min(2, size) of them. */
  int ranks[4] = {-1, -1, -1, -1}, count = -1;
  CHECK(store_key_holders(store, (store_key_t)peer, ranks, 4, &count) == STORE_OK);
  CHECK(count == cfg.replicas && ranks[0] >= 0 && ranks[0] < size && ranks[count - 1] < size);
  CHECK(store_key_holders(store, (store_key_t)peer, NULL, 0, &count) == STORE_ERR_TRUNCATED);
  CHECK(strcmp(store_strerror(STORE_ERR_NOT_FOUND), "key not found") == 0);

  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(store_finalize(&store) == STORE_OK && store == NULL);

  const int rc = write_verdict(rank);
  MPI_Finalize();
  return rc;
}
