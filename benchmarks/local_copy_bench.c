/* Put and get latency where this process holds one of the copies (np 2, 2 copies): what the
 * local copy costs, which store_bench does not time (its keys have no copy on rank 0).
 *   mpirun ... -n 2 local_copy_bench   (prints one JSON line per operation and size) */
#include <mpi.h>
#include <rmastore/store.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
  int p;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &p);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  store_config_t c;
  store_config_init(&c);
  c.replicas = 2;
  store_t s;
  if (store_init(MPI_COMM_WORLD, &c, &s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 1);
  size_t sizes[] = {8, 4096, 65536, 1 << 20};
  char *buf = malloc(1 << 20);
  memset(buf, 7, 1 << 20);
  enum { R = 300 };
  static double t[R];
  for (int si = 0; si < 4; ++si) {
    size_t n = sizes[si];
    for (int op = 0; op < 2; ++op) {
      if (rank == 0) {
        if (store_put(s, 1000 + si, buf, n) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 2);
        for (int i = 0; i < R; ++i) {
          size_t len;
          double t0 = MPI_Wtime();
          const store_status_t st = op == 0 ? store_put(s, 1000 + si, buf, n) : store_get(s, 1000 + si, buf, n, &len);
          t[i] = (MPI_Wtime() - t0) * 1e6;
          if (st != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 3);
        }
        qsort(t, R, sizeof t[0], cmp);
        printf("{\"op\":\"%s\",\"size\":%zu,\"median_us\":%.2f}\n", op ? "get_local" : "put_with_local_copy", n,
               t[R / 2]);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  store_finalize(&s);
  MPI_Finalize();
  return 0;
}
