#!/usr/bin/env bash
# The core's structure (docs/design.md, "Modules"): src/ has one folder per layer, and a file
# includes only files of its own folder or of a layer below it; the include graph has no cycle;
# the two recovery variants never include each other; files of src/ are named from src/, in
# quotes; and only the façade (store/store.*), the C boundary (capi/capi.cpp) and the settings
# (common/config.hpp) name a recovery variant.
#   module_graph.sh <source dir>   checks <source dir>/src
#   module_graph.sh --self-test    shows that each rule catches what it should
set -u
# The layers from the bottom up; folders on one line share a rank and may not include each other.
LAYERS=(common durable transport holder client variants "variants/global variants/localized" recovery store capi)
rank_of() { # folder -> rank, or nothing
  local i d
  for i in "${!LAYERS[@]}"; do
    for d in ${LAYERS[$i]}; do [ "$d" = "$1" ] && { echo "$i"; return; }; done
  done
}
check() { # src dir; prints what is wrong and fails
  local src=$1 bad=0 f rel dir inc to edges="" rf rt
  while IFS= read -r f; do
    rel=${f#"$src"/}
    dir=$(dirname "$rel")
    rf=$(rank_of "$dir")
    if [ -z "$rf" ]; then
      echo "$rel: not in a layer's folder (${LAYERS[*]})"
      bad=1
      continue
    fi
    # A file of src/ is named from src/ ("transport/rma.hpp"), in quotes: a name relative to the
    # including file, or in angle brackets, would escape the rules below.
    while IFS= read -r inc; do
      if [ ! -e "$src/$inc" ] && [ -e "$(dirname "$f")/$inc" ]; then
        echo "$rel includes \"$inc\": name files of src/ from src/ (\"<layer>/<file>\")"
        bad=1
      fi
    done < <(grep -oE '^#include "[^"]+"' "$f" | sed 's/#include "\(.*\)"/\1/')
    while IFS= read -r inc; do
      if [ -e "$src/$inc" ]; then
        echo "$rel includes <$inc>: files of src/ are included in quotes"
        bad=1
      fi
    done < <(grep -oE '^#include <[^>]+>' "$f" | sed 's/#include <\(.*\)>/\1/')
    while IFS= read -r inc; do
      [ -e "$src/$inc" ] || continue
      edges+="$inc $rel"$'\n'
      to=$(dirname "$inc")
      [ "$to" = "$dir" ] && continue
      rt=$(rank_of "$to")
      if [ -z "$rt" ] || [ "$rt" -ge "$rf" ]; then
        echo "$rel includes $inc: $dir may include only its own folder and the layers below it"
        bad=1
      fi
    done < <(grep -oE '^#include "[^"]+"' "$f" | sed 's/#include "\(.*\)"/\1/')
  done < <(find "$src" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \) | sort)
  if ! out=$(printf '%s' "$edges" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "the include graph of $src has a cycle:"
    echo "$out"
    bad=1
  fi
  local named
  # The core's C++ only: the Fortran module declares the names for its users.
  named=$(grep -rlE --include='*.[ch]pp' --include='*.h' 'STORE_RECOVERY_(GLOBAL|LOCALIZED)' "$src" 2>/dev/null |
    sed "s|^$src/||" | grep -vE '^(store/store\.(hpp|cpp)|capi/capi\.cpp|common/config\.hpp)$')
  if [ -n "$named" ]; then
    echo "files besides the façade that test the recovery variant: $named"
    bad=1
  fi
  return $bad
}
if [ "${1:-}" = --self-test ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  expect_caught() { # what, the message expected; the check must fail with that message
    local out
    if out=$(check "$dir") || ! grep -q -- "$2" <<<"$out"; then
      echo "self-test: $1 was not caught (the check said: $out)"
      exit 1
    fi
    rm -rf "${dir:?}"/*
  }
  mkdir -p "$dir/common" && printf '#include "common/b.hpp"\n' >"$dir/common/a.hpp" &&
    printf '#include "common/a.hpp"\n' >"$dir/common/b.hpp"
  expect_caught "a cycle a -> b -> a" "has a cycle"
  mkdir -p "$dir/common" "$dir/client" && printf '#include "client/b.hpp"\n' >"$dir/common/a.hpp" &&
    printf '\n' >"$dir/client/b.hpp"
  expect_caught "common including client (upward)" "common/a.hpp includes client/b.hpp"
  mkdir -p "$dir/variants/global" "$dir/variants/localized" &&
    printf '#include "variants/localized/b.hpp"\n' >"$dir/variants/global/a.hpp" &&
    printf '\n' >"$dir/variants/localized/b.hpp"
  expect_caught "one variant including the other" "variants/global/a.hpp includes"
  mkdir -p "$dir/common" "$dir/client" && printf '#include "../client/b.hpp"\n' >"$dir/common/a.hpp" &&
    printf '\n' >"$dir/client/b.hpp"
  expect_caught "an upward include relative to the file" 'includes "../client/b.hpp"'
  mkdir -p "$dir/client" && printf '#include "b.hpp"\n' >"$dir/client/a.hpp" && printf '\n' >"$dir/client/b.hpp"
  expect_caught "an include relative to the file's folder" 'includes "b.hpp"'
  mkdir -p "$dir/common" "$dir/client" && printf '#include <client/b.hpp>\n' >"$dir/common/a.hpp" &&
    printf '\n' >"$dir/client/b.hpp"
  expect_caught "a file of src/ in angle brackets" "includes <client/b.hpp>"
  printf '\n' >"$dir/loose.hpp"
  expect_caught "a file outside the layers' folders" "loose.hpp: not in a layer"
  mkdir -p "$dir/client" && printf 'int f(int r) { return r == STORE_RECOVERY_LOCALIZED; }\n' >"$dir/client/b.hpp"
  expect_caught "a variant test in client/b.hpp" "test the recovery variant: client/b.hpp"
  mkdir -p "$dir/common" "$dir/client" "$dir/variants/global" &&
    printf '#include "common/b.hpp"\n' >"$dir/client/a.hpp" && printf '\n' >"$dir/common/b.hpp" &&
    printf '#include "client/a.hpp"\n#include "variants/v.hpp"\n' >"$dir/variants/global/g.hpp"
  mkdir -p "$dir/variants" && printf '\n' >"$dir/variants/v.hpp"
  if ! check "$dir"; then
    echo "self-test: a clean graph was refused"
    exit 1
  fi
  echo "self-test: cycles, upward and sideways includes, includes not named from src/, loose files" \
    "and variant tests are caught"
  exit 0
fi
check "$1/src" || exit 1
echo "module graph: $(find "$1/src" -name '*.hpp' | wc -l) headers in ${#LAYERS[@]} layers, no include" \
  "upward or sideways, no cycle, the variant named only by the façade"
