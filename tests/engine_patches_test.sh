#!/usr/bin/env bash
# The engine patch queue: patches apply in name order onto the verified pinned source, a patch
# that does not apply stops the build naming it, and the cache key follows the queue's content.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
engine=$root/scripts/engine.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/empty" "$work/q"
key_empty=$(ONEBIT_PATCH_DIR=$work/empty "$engine" --key)

# Two patches made against the real source, where the second only applies on top of the first.
ONEBIT_PATCH_DIR=$work/empty "$engine" --prepare "$work/pristine" 2>/dev/null || fail "prepare with an empty queue"
make_patch() {  # make_patch NAME FIRST_LINE: a patch that puts FIRST_LINE on top of README.md
  local repo=$work/pristine
  { echo "$2"; cat "$repo/README.md"; } >"$work/readme" && cp "$work/readme" "$repo/README.md"
  git -C "$repo" diff >"$work/q/$1"
  git -C "$repo" -c user.email=t@t -c user.name=t commit -qam "$1"
}
make_patch 0001-add-line.patch "1bit patch queue: first"
sed -i '1d' "$work/pristine/README.md"
make_patch 0002-edit-line.patch "1bit patch queue: second"
ONEBIT_PATCH_DIR=$work/q "$engine" --prepare "$work/src" 2>"$work/log" || { cat "$work/log"; fail "prepare with a good queue"; }
[ "$(head -n1 "$work/src/README.md")" = "1bit patch queue: second" ] || fail "patches not applied in order"
[ "$(git -C "$work/src" rev-parse HEAD)" = 80fb11ac73e66d89eae2c6a91d8a77428fa733ed ] || fail "wrong commit"
grep -q "applied 0001-add-line.patch" "$work/log" && grep -q "applied 0002-edit-line.patch" "$work/log" || fail "no apply log"

key_q=$(ONEBIT_PATCH_DIR=$work/q "$engine" --key)
[ "$key_q" != "$key_empty" ] || fail "the key ignores the patch queue"
[ "$(ONEBIT_PATCH_DIR=$work/q "$engine" --key)" = "$key_q" ] || fail "the key is not stable"
echo >>"$work/q/0002-edit-line.patch"
[ "$(ONEBIT_PATCH_DIR=$work/q "$engine" --key)" != "$key_q" ] || fail "a changed patch keeps the key"
[ "$("$engine" --cuda --key)" != "$("$engine" --key)" ] || fail "the key ignores the build options"

# A patch that does not apply names itself and stops.
mkdir -p "$work/bad"
sed 's/first/FIRST/' "$work/q/0002-edit-line.patch" >"$work/bad/0001-bad.patch"
if ONEBIT_PATCH_DIR=$work/bad "$engine" --prepare "$work/src2" 2>"$work/err"; then fail "a bad patch applied"; fi
grep -q "^engine: patch 0001-bad.patch does not apply to llama.cpp 80fb11ac73e66d89eae2c6a91d8a77428fa733ed: " "$work/err" \
  || { cat "$work/err"; fail "no clear message for a bad patch"; }

# A source without the pinned commit is refused.
git init -q "$work/other" && git -C "$work/other" -c user.email=t@t -c user.name=t commit -q --allow-empty -m x
if ONEBIT_LLAMA_SOURCE=$work/other "$engine" --prepare "$work/src3" 2>"$work/err"; then fail "wrong source accepted"; fi
grep -q "does not hold the pinned commit 80fb11ac73e66d89eae2c6a91d8a77428fa733ed" "$work/err" || { cat "$work/err"; fail "no clear message for a wrong source"; }
if ONEBIT_LLAMA_SOURCE=$work/nothing "$engine" --key >/dev/null && ONEBIT_LLAMA_SOURCE=$work/nothing "$engine" --prepare "$work/src4" 2>"$work/err"; then
  fail "missing source accepted"
fi
grep -q "ONEBIT_LLAMA_SOURCE: $work/nothing does not exist" "$work/err" || { cat "$work/err"; fail "no clear message for a missing source"; }
echo "engine patch queue: ok"
