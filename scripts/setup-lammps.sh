#!/usr/bin/env bash
# Opt-in, idempotent: LAMMPS 20250204 (stable) as a shared library built against the MPI with
# ULFM that scripts/setup.sh provides, for drivers that embed LAMMPS. Nothing else calls this
# script, so a user who does not want LAMMPS never pays for it.
#
# Usage: bash scripts/setup-lammps.sh
#
# The source is the orig tarball of Debian 13's source package lammps (20250204+dfsg.1), built
# with LAMMPS's own CMake and only the packages MOLECULE, KSPACE (built-in KISS FFT) and RIGID,
# which bench/'s in.lj, in.chain and in.rhodo need. The install is cached in $RMASTORE_LAMMPS_PREFIX (default
# ~/.cache/rmastore/lammps-20250204), which records a build id: the configure line below, the
# MPI's path and its installed headers. A cached build with another id is rebuilt. An Open MPI
# rebuilt for a patch of its sources keeps its headers, and LAMMPS (which links libmpi
# dynamically) is not rebuilt for it.
#
# On success it writes $RMASTORE_CACHE/lammps-env.sh, which exports LAMMPS_PREFIX (lib/liblammps.so,
# include/lammps/library.h, bin/lmp, share/lammps-bench/).
set -euo pipefail

RMASTORE_CACHE=${RMASTORE_CACHE:-"$HOME/.cache/rmastore"}
export RMASTORE_CACHE # setup.sh must fill the same cache
LAMMPS_VERSION=20250204
RMASTORE_LAMMPS_PREFIX=${RMASTORE_LAMMPS_PREFIX:-"$RMASTORE_CACHE/lammps-$LAMMPS_VERSION"}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '[setup-lammps %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { log "error: $*" >&2; exit 1; }

bash "$HERE/setup.sh"
# shellcheck source=/dev/null
source "$RMASTORE_CACHE/mpi-env.sh"

# Identifies the build: the configure line below and the MPI LAMMPS compiles against (its path
# and the contents of its headers, the interface that liblammps uses). A cached build with another
# id is rebuilt.
BUILD_ID=$( { sed -n '/^run_step configure/,/^$/p' "$HERE/setup-lammps.sh"; echo "$MPI_HOME";
              find "$MPI_HOME/include" -type f -name '*.h' -print0 | LC_ALL=C sort -z | xargs -0 cat; } |
            sha256sum | cut -c1-16)
prefix=$RMASTORE_LAMMPS_PREFIX

write_env() {
  cat >"$RMASTORE_CACHE/lammps-env.sh" <<ENV
# Written by scripts/setup-lammps.sh: LAMMPS $LAMMPS_VERSION built against the MPI in $MPI_HOME.
export LAMMPS_PREFIX="$prefix"
ENV
  log "LAMMPS $LAMMPS_VERSION: $prefix (environment in $RMASTORE_CACHE/lammps-env.sh)"
  echo "export LAMMPS_PREFIX=\"$prefix\""
}

if [ -f "$prefix/lib/liblammps.so" ] &&
   [ "$(cat "$prefix/.rmastore-build-id" 2>/dev/null || true)" = "$BUILD_ID" ]; then
  log "found LAMMPS $LAMMPS_VERSION built against $MPI_HOME"
  write_env
  exit 0
fi
[ -d "$prefix" ] && log "the cached LAMMPS at $prefix was built with another configuration or MPI: rebuilding it"

# --- 1. the source, from trixie's source package ----------------------------------------------
# The apt configuration is setup.sh's private one (it writes it only when it builds Open MPI, so
# write it here too if it is missing): it reuses the mirror this machine already uses and leaves
# the system's sources alone.
src_root="$RMASTORE_CACHE/src"
aptdir="$RMASTORE_CACHE/apt-trixie"
mkdir -p "$src_root" "$aptdir/lists/partial" "$aptdir/cache/archives/partial"
aptopts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
         -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache" -o "APT::Sandbox::User=root")
tarball=$(ls "$src_root"/lammps_"$LAMMPS_VERSION"*.orig.tar.* 2>/dev/null | head -n1 || true)
if [ -z "$tarball" ]; then
  if [ ! -s "$aptdir/sources.list" ]; then
    mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
               /etc/apt/sources.list.d/*.list 2>/dev/null \
             | grep -v security | grep -oE '(https?|file)://[^ ]+' | grep -i debian | head -n1 || true)
    [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt to fetch trixie's source from"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
      >"$aptdir/sources.list"
  fi
  if ! ls "$aptdir"/lists/*_trixie_main_source_Sources* >/dev/null 2>&1; then
    log "fetching trixie's list of source packages"
    apt-get "${aptopts[@]}" update -qq
  fi
  # The mirror lacks lammps's .dsc (404), so `apt-get source --download-only lammps` fetches both
  # tarballs and then fails (exit 100). Fetch only the orig tarball, by the URI apt prints, with
  # apt's own downloader. Debian's patches are not needed: they point potential files at
  # /usr/share/lammps, keep CMake from installing bench/ and potentials/, and build the docs.
  uris=$(apt-get "${aptopts[@]}" --print-uris -qq source lammps) || die "apt cannot find trixie's lammps source"
  uri=$(awk -v v="$LAMMPS_VERSION" '$2 ~ "^lammps_" v ".*\\.orig\\.tar\\." {print; exit}' <<<"$uris")
  [ -n "$uri" ] || die "trixie's source package lammps has no lammps_$LAMMPS_VERSION orig tarball"
  name=$(awk '{print $2}' <<<"$uri")
  # Its hash comes from the Sources index, which apt checked against the signed InRelease: a
  # tarball lands in $src_root only once it matches.
  want=$(/usr/lib/apt/apt-helper cat-file "$aptdir"/lists/*_trixie_main_source_Sources* |
         awk -v f="$name" '/^Package: /{pkg=$2} /^[^ ]/{c=0}
                           pkg=="lammps" && /^Checksums-Sha256:/{c=1; next} c && $3==f && !n++ {print $1}')
  [ -n "$want" ] || die "no SHA256 for $name in trixie's Sources index"
  log "fetching $name ($(awk '{printf "%d MB", $3/1e6}' <<<"$uri"))"
  partial="$aptdir/cache/archives/partial/$name"
  /usr/lib/apt/apt-helper "${aptopts[@]}" download-file "$(awk -F"'" '{print $2}' <<<"$uri")" "$partial" >/dev/null
  got=$(sha256sum "$partial" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { rm -f "$partial"; die "$name: SHA256 $got, trixie's Sources index says $want"; }
  mv "$partial" "$src_root/$name"
  tarball="$src_root/$name"
fi

# --- 2. build and install ---------------------------------------------------------------------
build_dir="$RMASTORE_CACHE/build-lammps-$LAMMPS_VERSION"
rm -rf "$build_dir"; mkdir -p "$build_dir/src"
log "unpacking $(basename "$tarball")"
tar -xf "$tarball" -C "$build_dir/src" --strip-components=1

run_step() { # $1 = name, rest = command; prints a heartbeat while it runs
  local name=$1; shift
  local logf="$build_dir/$name.log"
  log "$name: started (log: $logf)"
  ( cd "$build_dir" && "$@" ) >"$logf" 2>&1 &
  local pid=$! start=$SECONDS
  local beat=$((SECONDS + 30))
  # Polls each second so that a short step does not wait out a whole heartbeat.
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$beat" ] && kill -0 "$pid" 2>/dev/null; then
      log "$name: $((SECONDS - start)) s, last: $(tail -n1 "$logf" | cut -c1-100)"
      beat=$((SECONDS + 30))
    fi
  done
  if ! wait "$pid"; then tail -n 40 "$logf" >&2; die "$name failed"; fi
  log "$name: done in $((SECONDS - start)) s"
}

log "building LAMMPS $LAMMPS_VERSION into $prefix (about 15 minutes on 2 cores, once)"
rm -rf "$prefix"
# LAMMPS_EXCEPTIONS is gone from this version: errors always throw, and the library interface
# catches them (lammps_has_error). The optional libraries default to on when found, so they
# are turned off by name; KSPACE would take FFTW if it were installed. The RPATH lets bin/lmp
# and liblammps.so find their libraries without LD_LIBRARY_PATH.
run_step configure nice -n 19 cmake -S src/cmake -B build -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DLAMMPS_INSTALL_RPATH=ON \
  -DBUILD_SHARED_LIBS=ON -DBUILD_MPI=ON \
  -DMPI_C_COMPILER="$MPI_HOME/bin/mpicc" -DMPI_CXX_COMPILER="$MPI_HOME/bin/mpicxx" \
  -DPKG_MOLECULE=ON -DPKG_KSPACE=ON -DFFT=KISS -DPKG_RIGID=ON -DPKG_PYTHON=OFF \
  -DBUILD_OMP=OFF -DWITH_JPEG=OFF -DWITH_PNG=OFF -DWITH_FFMPEG=OFF -DDOWNLOAD_POTENTIALS=OFF

# Other jobs share the cores: the compile yields to them.
run_step make nice -n 19 cmake --build build -j"$(nproc)"
run_step install cmake --install build
# The bench inputs at a fixed place for the examples (CMake also installs the whole of bench/,
# with its POTENTIALS/ subdirectory, in share/lammps/bench).
mkdir -p "$prefix/share/lammps-bench"
find "$build_dir/src/bench" -maxdepth 1 -type f -exec cp -t "$prefix/share/lammps-bench" {} +
for f in lib/liblammps.so include/lammps/library.h bin/lmp; do
  [ -f "$prefix/$f" ] || die "the install lacks $f"
done
pkgs=$("$prefix/bin/lmp" -h 2>&1) || { printf '%s\n' "$pkgs" | tail -n 20 >&2; die "bin/lmp -h failed"; }
pkgs=$(sed -n '/^Installed packages:/,/^List of individual/p' <<<"$pkgs")
for p in KSPACE MOLECULE RIGID; do
  grep -qw "$p" <<<"$pkgs" || die "bin/lmp -h does not list the package $p"
done
rm -rf "$build_dir"
echo "$BUILD_ID" >"$prefix/.rmastore-build-id"
write_env
