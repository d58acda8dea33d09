#!/usr/bin/env bash
# The core's structure (docs/design.md, "Modules"): the include graph of src/ has no cycle, and
# only the façade (store.*) and the C boundary name a recovery variant; every other file works
# through the Variant interface.
#   module_graph.sh <source dir>   checks <source dir>/src
#   module_graph.sh --self-test    shows that a cycle and a variant test are caught
set -u
check() { # src dir; prints what is wrong and fails
  local src=$1 edges bad=0 f inc
  edges=$(for f in "$src"/*.hpp "$src"/*.cpp "$src"/*.h; do
    [ -e "$f" ] || continue
    local from=${f##*/}
    from=${from%.*}
    grep -oE '^#include "[^"]+"' "$f" | sed 's/#include "\(.*\)"/\1/' | while read -r inc; do
      [ -e "$src/${inc##*/}" ] || continue
      local to=${inc##*/}
      to=${to%.*}
      [ "$from" != "$to" ] && echo "$to $from"
    done
  done)
  if ! out=$(echo "$edges" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "the include graph of $src has a cycle:"
    echo "$out"
    bad=1
  fi
  local named
  named=$(grep -lE 'STORE_RECOVERY_(GLOBAL|LOCALIZED)' "$src"/* 2>/dev/null | sed 's|.*/||' |
    grep -vE '^(store\.(hpp|cpp)|capi\.cpp|config\.hpp)$')
  if [ -n "$named" ]; then
    echo "files besides the façade that test the recovery variant: $named"
    bad=1
  fi
  return $bad
}
if [ "${1:-}" = --self-test ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  printf '#include "b.hpp"\n' >"$dir/a.hpp"
  printf '#include "a.hpp"\n' >"$dir/b.hpp"
  if check "$dir" >/dev/null; then
    echo "self-test: a cycle a -> b -> a was not caught"
    exit 1
  fi
  printf '#include "b.hpp"\n' >"$dir/a.hpp"
  printf 'int f(int r) { return r == STORE_RECOVERY_LOCALIZED; }\n' >"$dir/b.hpp"
  if check "$dir" >/dev/null; then
    echo "self-test: a variant test in b.hpp was not caught"
    exit 1
  fi
  printf '\n' >"$dir/b.hpp"
  if ! check "$dir"; then
    echo "self-test: a clean graph was refused"
    exit 1
  fi
  echo "self-test: a cycle and a variant test are caught, a clean graph passes"
  exit 0
fi
check "$1/src" || exit 1
echo "module graph: $(ls "$1"/src/*.hpp | wc -l) headers, no include cycle, the variant named only by the façade"
