#!/usr/bin/env bash
# docs/operations.md shows examples/slurm/rmastore.sbatch, the batch script the Slurm tests
# submit, for users to copy: the copy must be the file.
#   doc_sbatch.sh <source dir>
set -u
root=$1
shown=$(awk '/examples\/slurm\/rmastore.sbatch, verbatim/ { on = 1; next }
             on && /^```bash$/ { inside = 1; next }
             inside && /^```$/ { exit }
             inside { print }' "$root/docs/operations.md")
if [ -z "$shown" ]; then
  echo "doc_sbatch: docs/operations.md shows no batch script after its marker"
  exit 1
fi
if ! diff <(printf '%s\n' "$shown") "$root/examples/slurm/rmastore.sbatch"; then
  echo "doc_sbatch: docs/operations.md's batch script differs from examples/slurm/rmastore.sbatch (above)"
  exit 1
fi
echo "doc_sbatch: docs/operations.md shows examples/slurm/rmastore.sbatch as it is"
