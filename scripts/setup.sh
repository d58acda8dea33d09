#!/usr/bin/env bash
# Idempotent set-up: build tools from Debian's archive and an MPI with ULFM.
#
# Order of preference for the MPI (first that has "FT MPI support: yes" wins):
#   1. ompi_info under $MPI_HOME or on PATH;
#   2. the distribution's Open MPI, if apt offers version 5 or newer;
#   3. Open MPI 5.0.7 built from Debian 13's source package with the patches in
#      scripts/openmpi-patches/ applied, cached in $RMASTORE_MPI_PREFIX
#      (default ~/.cache/rmastore/openmpi-5.0.7-ulfm). The cache records which patches it was
#      built with and is rebuilt when they change.
#
# On success it writes $RMASTORE_CACHE/mpi-env.sh, which the other scripts source.
set -euo pipefail

RMASTORE_CACHE=${RMASTORE_CACHE:-"$HOME/.cache/rmastore"}
OMPI_VERSION=5.0.7
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATCH_DIR="$HERE/openmpi-patches"
# RMASTORE_OMPI_VARIANT: another Open MPI beside the default one, in a prefix of its own, with an
# environment file of its own ($RMASTORE_CACHE/mpi-env-<variant>.sh); the default build and
# mpi-env.sh are left alone, and no MPI found elsewhere is used in its place.
#   ucx    with Open MPI's UCX components (btl/uct, pml/ucx, osc/ucx) over Debian's UCX, the
#          code path of InfiniBand clusters (docs/operations.md, "InfiniBand")
#   stock  without the patches of scripts/openmpi-patches: a site's own Open MPI 5.0.7
VARIANT=${RMASTORE_OMPI_VARIANT:-}
variant_args=()
case $VARIANT in
  "" | stock) ;;
  ucx) variant_args=(--with-ucx) ;;
  *) echo "setup: RMASTORE_OMPI_VARIANT is ucx or stock, not '$VARIANT'" >&2; exit 1 ;;
esac
[ "$VARIANT" = stock ] && PATCH_DIR=/nonexistent
SUFFIX=${VARIANT:+-$VARIANT}
RMASTORE_MPI_PREFIX=${RMASTORE_MPI_PREFIX:-"$RMASTORE_CACHE/openmpi-$OMPI_VERSION-ulfm$SUFFIX"}
ENV_FILE="$RMASTORE_CACHE/mpi-env$SUFFIX.sh"
mkdir -p "$RMASTORE_CACHE"
# Identifies the build: the configure line below, the variant and every patch. A cached build
# with another id is rebuilt.
BUILD_ID=$( { sed -n '/^run_step configure/,/^$/p' "$HERE/setup.sh"; [ -z "$VARIANT" ] || echo "$VARIANT";
              cat "$PATCH_DIR"/*.patch 2>/dev/null || true; } | sha256sum | cut -c1-16)

log() { printf '[setup %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { log "error: $*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || die "not root and no sudo: cannot install packages"
  SUDO="sudo"
fi

# --- 1. packages from Debian's archive -------------------------------------------------------
PKGS=(build-essential cmake pkg-config libgtest-dev clang-format xz-utils dpkg-dev
      debian-archive-keyring ca-certificates file perl python3 redis-server redis-tools
      gnuplot-nox libhiredis-dev libxxhash-dev patch iproute2 util-linux
      libhwloc-dev libevent-dev gfortran slurmctld slurmd slurm-client munge)
[ "$VARIANT" = ucx ] && PKGS+=(libucx-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing from apt: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "apt packages already present"
fi

# --- 2. an MPI with ULFM --------------------------------------------------------------------
has_ulfm() { # $1 = path to ompi_info
  [ -x "$1" ] && "$1" 2>/dev/null | grep -Eq 'FT MPI support: *yes'
}

write_env() { # $1 = MPI prefix (the directory holding bin/)
  cat >"$ENV_FILE" <<ENV
# Written by scripts/setup.sh: the MPI with ULFM that rmastore builds and tests against.
export MPI_HOME="$1"
export PATH="$1/bin:\$PATH"
export LD_LIBRARY_PATH="$1/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV
  log "MPI with ULFM: $1 (environment in $ENV_FILE)"
}

smoke_test() { # $1 = MPI prefix
  local tmp; tmp=$(mktemp -d)
  "$1/bin/mpicc" -O1 -o "$tmp/smoke" "$HERE/ulfm_smoke.c"
  log "smoke test: 3 ranks, kill one, revoke/shrink/agree"
  local out
  if ! out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 60 "$1/bin/mpirun" --with-ft ulfm --oversubscribe -n 3 "$tmp/smoke" 2>&1); then
    : # mpirun's exit code says nothing after a kill; the survivors' lines decide.
  fi
  rm -rf "$tmp"
  local ok; ok=$(grep -c '^smoke: ok' <<<"$out" || true)
  if [ "$ok" != 2 ]; then
    printf '%s\n' "$out" >&2
    die "ULFM smoke test failed: expected 2 surviving ranks to report ok, got $ok"
  fi
  log "smoke test passed (2 survivors shrank to 2 ranks and agreed)"
}

find_existing() {
  local c others=()
  [ -z "$VARIANT" ] && others=(${MPI_HOME:+"$MPI_HOME/bin/ompi_info"} "$(command -v ompi_info || true)")
  for c in "${others[@]}" "$RMASTORE_MPI_PREFIX/bin/ompi_info"; do
    [ -n "$c" ] || continue
    if has_ulfm "$c"; then
      dirname "$(dirname "$(readlink -f "$c")")"
      return 0
    fi
  done
  return 1
}

if prefix=$(find_existing); then
  if [ "$prefix" = "$(readlink -f "$RMASTORE_MPI_PREFIX" 2>/dev/null || true)" ] &&
     [ "$(cat "$prefix/.rmastore-build-id" 2>/dev/null || true)" != "$BUILD_ID" ]; then
    log "the cached Open MPI at $prefix was built without the current patches: rebuilding it"
  else
    log "found an MPI with ULFM at $prefix"
    [ -f "$prefix/.rmastore-build-id" ] ||
      log "note: it lacks the patches in scripts/openmpi-patches (scripts/openmpi-patches/README.md says what they fix)"
    write_env "$prefix"
    [ -f "$prefix/.rmastore-smoke-ok" ] || { smoke_test "$prefix"; touch "$prefix/.rmastore-smoke-ok" 2>/dev/null || true; }
    exit 0
  fi
fi

# Distribution Open MPI 5 or newer (Debian 13, recent Ubuntu) has ULFM compiled in.
cand=$(apt-cache policy libopenmpi-dev 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -z "$VARIANT" ] && [ -n "$cand" ] && [ "$cand" != "(none)" ] && dpkg --compare-versions "$cand" ge 5; then
  log "installing the distribution's Open MPI $cand"
  $SUDO apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
  if has_ulfm /usr/bin/ompi_info; then
    write_env /usr
    smoke_test /usr
    exit 0
  fi
  log "the distribution's Open MPI has no ULFM; building from source instead"
fi

# Build from Debian 13's source package. The apt configuration is private to the cache: it
# reuses the mirror this machine already uses and leaves the system's sources alone.
log "building Open MPI $OMPI_VERSION with ULFM into $RMASTORE_MPI_PREFIX (about 20 minutes on 2 cores, once)"
src_root="$RMASTORE_CACHE/src"
aptdir="$RMASTORE_CACHE/apt-trixie"
mkdir -p "$src_root" "$aptdir/lists/partial" "$aptdir/cache/archives/partial"
tarball=$(ls "$src_root"/openmpi_"$OMPI_VERSION".orig.tar.* 2>/dev/null | head -n1 || true)
if [ -z "$tarball" ]; then
  mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
             /etc/apt/sources.list.d/*.list 2>/dev/null \
           | grep -v security | grep -oE '(https?|file)://[^ ]+' | grep -i debian | head -n1 || true)
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt to fetch trixie's source from"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
    >"$aptdir/sources.list"
  aptopts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
           -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache" -o "APT::Sandbox::User=root")
  log "fetching trixie's openmpi source package"
  apt-get "${aptopts[@]}" update -qq
  (cd "$src_root" && apt-get "${aptopts[@]}" source --download-only -qq openmpi)
  tarball=$(ls "$src_root"/openmpi_"$OMPI_VERSION".orig.tar.* 2>/dev/null | head -n1 || true)
  [ -n "$tarball" ] || die "trixie's source package has no openmpi_$OMPI_VERSION.orig tarball"
fi

build_dir="$RMASTORE_CACHE/build-openmpi-$OMPI_VERSION$SUFFIX"
rm -rf "$build_dir"; mkdir -p "$build_dir"
log "unpacking $(basename "$tarball")"
tar -xf "$tarball" -C "$build_dir" --strip-components=1
for p in "$PATCH_DIR"/*.patch; do
  [ -e "$p" ] || continue
  log "applying $(basename "$p")"
  patch -d "$build_dir" -p1 --forward --quiet <"$p" || die "patch $(basename "$p") does not apply"
done

run_step() { # $1 = name, rest = command; prints a heartbeat while it runs
  local name=$1; shift
  local logf="$build_dir/$name.log"
  log "$name: started (log: $logf)"
  ( cd "$build_dir" && "$@" ) >"$logf" 2>&1 &
  local pid=$! start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && log "$name: $((SECONDS - start)) s, last: $(tail -n1 "$logf" | cut -c1-100)"
  done
  if ! wait "$pid"; then tail -n 40 "$logf" >&2; die "$name failed"; fi
  log "$name: done in $((SECONDS - start)) s"
}

rm -rf "$RMASTORE_MPI_PREFIX"
# Debian's hwloc and libevent, no dependency tracking, and no monitoring or treematch components:
# the build is done once, and these take minutes of a fresh CI run that nothing here uses.
# Fortran: mpif.h and the `mpi` module, for Fortran applications and the tests of rmastore's
# Fortran module (3.8 minutes more on 2 cores); not mpi_f08, 2.7 minutes more again.
run_step configure ./configure --prefix="$RMASTORE_MPI_PREFIX" --with-ft=ulfm \
  --enable-mpi-fortran=usempi --disable-oshmem --disable-io-romio --disable-man-pages --disable-sphinx \
  --disable-dependency-tracking --with-pmix=internal --with-prrte=internal \
  --with-hwloc=external --with-libevent=external \
  --enable-mca-no-build=coll-monitoring,osc-monitoring,pml-monitoring,common-monitoring,topo-treematch \
  "${variant_args[@]}"
run_step make make -j"$(( $(nproc) + 1 ))"
run_step install make install
has_ulfm "$RMASTORE_MPI_PREFIX/bin/ompi_info" || die "the build does not report FT MPI support"
rm -rf "$build_dir"
write_env "$RMASTORE_MPI_PREFIX"
smoke_test "$RMASTORE_MPI_PREFIX"
touch "$RMASTORE_MPI_PREFIX/.rmastore-smoke-ok"
echo "$BUILD_ID" >"$RMASTORE_MPI_PREFIX/.rmastore-build-id"
