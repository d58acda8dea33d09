#!/usr/bin/env bash
# The fault points src/common/fault.cpp accepts (kPoints) must be exactly those the sources
# contain:
# a spec naming any other point is refused, and a point missing from the list could not be used.
#   fault_points.sh <source dir>
set -u
src=$1/src
used=$(grep -rhoE --include='*.cpp' 'RMASTORE_FAULT_(POINT|ARMED|TIMER)\("[^"]*"\)' "$src" | sed 's/.*("\(.*\)")/\1/' | sort -u)
known=$(sed -n '/kPoints\[\] = {/,/};/p' "$src/common/fault.cpp" | grep -o '"[^"]*"' | tr -d '"' | sort -u)
if [ -z "$used" ] || [ "$used" != "$known" ]; then
  echo "fault points in the sources and in src/common/fault.cpp's kPoints differ:"
  diff <(echo "$used") <(echo "$known")
  exit 1
fi
echo "fault points: $(echo "$used" | wc -l) in the sources, all in kPoints"
