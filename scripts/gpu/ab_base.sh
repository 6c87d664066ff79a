#!/usr/bin/env bash
# Makes the BASE_DIR that scripts/gpu/ab.sh and ab_decode.sh lay over the tree: each file that the
# working tree changes against BASE_REV (tracked changes and untracked files that git does not
# ignore), as it is at BASE_REV, at its path under BASE_DIR. A file the tree adds gets no base copy
# (the old build then still sees it; say so when it matters); a file the tree deletes gets its
# BASE_REV copy. BASE_DIR must be outside ignored folders to travel with a device call; an
# untracked folder such as .ab/base does (remove it before committing).
#   scripts/gpu/ab_base.sh BASE_REV BASE_DIR     e.g. scripts/gpu/ab_base.sh HEAD .ab/base
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:?usage: scripts/gpu/ab_base.sh BASE_REV BASE_DIR}
dir=${2:?usage: scripts/gpu/ab_base.sh BASE_REV BASE_DIR}
git rev-parse --verify --quiet "$rev^{commit}" > /dev/null ||
  { echo "ab_base: '$rev' is not a commit of this repository" >&2; exit 2; }
if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
  echo "ab_base: '$dir' exists and is not empty; remove it or name another" >&2
  exit 2
fi
mkdir -p "$dir"
dir_rel=$(realpath --relative-to=. "$dir")
count=0
while IFS= read -r -d '' f; do
  case "$f" in "$dir_rel"/*) continue ;; esac  # the base folder itself, when inside the tree
  if git cat-file -e "$rev:$f" 2> /dev/null; then
    mkdir -p "$dir/$(dirname "$f")"
    git show "$rev:$f" > "$dir/$f"
    count=$((count + 1))
  else
    echo "ab_base: $f is new since $rev: no base copy"
  fi
done < <({ git diff -z --name-only "$rev" --; git ls-files -z --others --exclude-standard; } | sort -zu)
echo "ab_base: $count file(s) at $rev under $dir"
