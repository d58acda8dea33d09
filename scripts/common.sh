# Sourced by the entry-point scripts: set up the toolchain, then configure and build.
set -euo pipefail
RMASTORE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RMASTORE_BUILD_DIR=${RMASTORE_BUILD_DIR:-"$RMASTORE_ROOT/build"}
bash "$RMASTORE_ROOT/scripts/setup.sh"
# shellcheck source=/dev/null
source "${RMASTORE_CACHE:-$HOME/.cache/rmastore}/mpi-env.sh"

rmastore_build() { # extra CMake arguments
  cmake -S "$RMASTORE_ROOT" -B "$RMASTORE_BUILD_DIR" -DRMASTORE_WARNINGS_AS_ERRORS=ON "$@" >/dev/null
  cmake --build "$RMASTORE_BUILD_DIR" -j"$(nproc)"
}
