#!/usr/bin/env bash
# Installs rmastore into a scratch prefix, then builds tests/test_c_api.c as an outside consumer
# twice, with find_package(rmastore) and with pkg-config, and runs both on 2 ranks; given a
# Fortran compiler, the same for tests/fortran/test_fortran.f90 with the Fortran module.
#   test_install.sh <build dir> <tests source dir> <mpirun> <C compiler> [<Fortran compiler>]
set -euo pipefail
build=$1 tests=$2 mpirun=$3 cc=$4 fc=${5:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/rmastore-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null

# The installed library exports its calls under the rmastore_ prefix only (include/rmastore/store.h,
# "Link names"): a bare store_* symbol would collide with an application's own.
lib=$(find "$prefix" -name 'librmastore.so.*' -type f | head -n1)
exported=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }')
bare=$(grep -v '^rmastore_store_' <<<"$exported" || true)
if [ -n "$bare" ] || ! grep -qx rmastore_store_put <<<"$exported"; then
  echo "test_install: $lib exports symbols outside rmastore_store_*, or not rmastore_store_put:"
  echo "$exported"
  exit 1
fi
echo "exported: $(wc -l <<<"$exported") symbols, all rmastore_store_*"

mpi_home=$(dirname "$(dirname "$mpirun")")
cmake -S "$tests/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DMPI_HOME="$mpi_home" \
      -DCMAKE_C_COMPILER="$cc" -DCONSUMER_SOURCE="$tests/test_c_api.c" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
echo "consumer built with find_package(rmastore)"

mpi_pc=$mpi_home/lib/pkgconfig
pc_dir=$(dirname "$(find "$prefix" -name rmastore.pc | head -n1)")
export PKG_CONFIG_PATH="$pc_dir:$mpi_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
libdir=$(pkg-config --variable=libdir rmastore)
# shellcheck disable=SC2046
"$cc" -std=c11 -o "$work/pc-consumer" "$tests/test_c_api.c" $(pkg-config --cflags --libs rmastore) \
      -Wl,-rpath,"$libdir"
echo "consumer built with pkg-config"

exes=("$work/cmake-build/consumer" "$work/pc-consumer")

if [ -n "$fc" ]; then
  [ -e "$pc_dir/rmastore-fortran.pc" ] || { echo "test_install: no rmastore-fortran.pc installed"; exit 1; }
  cmake -S "$tests/consumer" -B "$work/cmake-fortran" -DCMAKE_PREFIX_PATH="$prefix" -DMPI_HOME="$mpi_home" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_Fortran_COMPILER="$fc" \
        -DCONSUMER_SOURCE="$tests/fortran/test_fortran.f90" >/dev/null
  cmake --build "$work/cmake-fortran" >/dev/null
  echo "Fortran consumer built with find_package(rmastore), target rmastore::fortran"
  # shellcheck disable=SC2046
  "$mpi_home/bin/mpifort" -o "$work/pc-fortran" "$tests/fortran/test_fortran.f90" \
    $(pkg-config --cflags --libs rmastore-fortran) -Wl,-rpath,"$libdir"
  echo "Fortran consumer built with mpifort and pkg-config rmastore-fortran"
  exes+=("$work/cmake-fortran/consumer" "$work/pc-fortran")
fi

for exe in "${exes[@]}"; do
  "$tests/mpirun_test.sh" "$mpirun" 2 2 60 "$exe"
done
