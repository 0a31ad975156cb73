#!/usr/bin/env bash
# The repository reads as a product: no tracked file outside .ci/ names the history it was made in
# (numbered issues or sessions, helper worktrees, numbered source patches) instead of what a thing
# is, and README.md stays a product page of at most 300 lines (references live in docs/).
# Usage: product_words_test.sh SOURCE_DIR. Prints every offending line; exits 1 if there is any.
set -uo pipefail
root=${1:?usage: product_words_test.sh SOURCE_DIR}
cd "$root" || exit 2
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
  echo "product_words: $root is not a git work tree"
  exit 2
}

status=0
pattern='[Ii]ssue [0-9]+|[Ss]ession [0-9]+|helper-[0-9]+|[Ss]eed ?00[0-4]'
if hits=$(git grep -nE "$pattern" -- ':!.ci'); then
  printf '%s\n' "$hits"
  echo "product_words: $(printf '%s\n' "$hits" | wc -l) line(s) name history; name what the thing is"
  status=1
fi

lines=$(wc -l <README.md)
if ((lines > 300)); then
  echo "product_words: README.md has $lines lines (at most 300; move references to docs/)"
  status=1
fi
((status == 0)) && echo "product_words: ok (README.md $lines lines)"
exit $status
