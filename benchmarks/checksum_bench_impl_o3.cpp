// checksum_bench_impl.cpp compiled with -O3 (benchmarks/CMakeLists.txt).
#define CHECKSUM_BENCH_NS o3
#include "checksum_bench_impl.cpp"
