#!/usr/bin/env bash
# Runs the GitHub Actions example of docs/ci.md (its step between the `ci-recipe-check: begin`
# and `end` markers, as written there) in a local git repository standing in for a QUIC library's:
# the registry's quinn (the version Nesquic's lock pins) committed as the base, and a head commit
# raising quinn's GSO batch cap (MAX_TRANSMIT_SEGMENTS 10 -> 44). Checks what the workflow posts
# and keeps: a Markdown verdict, exit status 0 or 1 (2 is a failed build or run), and base/head
# run records naming the two commits. Root (probes); nesquic built (target/release/nesquic).
# usage: ci-recipe-check.sh [WORKDIR]   (default: a new temporary directory)
#   NESQUIC_BIN: the nesquic executable (default: the target dir's release/nesquic).
#   NESQUIC_CI_ROUNDS: rounds instead of the workflow's 10 (default 2: this checks the recipe,
#   not the stack).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
rounds="${NESQUIC_CI_ROUNDS:-2}"
say() { echo "ci-recipe-check: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

# The nesquic to run: NESQUIC_BIN (the tests pass theirs), else the target directory's.
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
nesquic="${NESQUIC_BIN:-$target/release/nesquic}"
[ -x "$nesquic" ] || fail "build nesquic first: cargo build --release -p nesquic-cli --bins (looked for $nesquic)"
version="$(sed -n '/^name = "quinn"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$root/Cargo.lock" | head -n1)"
src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"quinn-$version" 2>/dev/null | head -n1)"
[ -n "$src" ] || fail "quinn-$version is not unpacked in the cargo registry (cargo fetch in $root)"

# The library's repository: base as published, head with the change under review.
repo="$work/stack"
rm -rf "$repo"
mkdir -p "$repo"
cp -r "$src" "$repo/quinn"
git() { command git -C "$repo" -c user.name=ci -c user.email=ci@localhost "$@"; }
git init -q
git add -A
git commit -qm "base: quinn $version as published"
sed -i 's/const MAX_TRANSMIT_SEGMENTS: usize = 10;/const MAX_TRANSMIT_SEGMENTS: usize = 44;/' \
    "$repo/quinn/src/connection.rs"
git commit -qam "head: GSO batches of up to 44 datagrams"
base="$(git rev-parse HEAD~1)"
head="$(git rev-parse HEAD)"
# Nesquic where the workflow checks it out and builds it (.nesquic/target/release/nesquic),
# ignored as a runner's checkout would be; the binary is this one, wherever its target dir is.
mkdir -p "$repo/.nesquic/target/release"
ln -s "$nesquic" "$repo/.nesquic/target/release/nesquic"
echo .nesquic >>"$repo/.git/info/exclude"

# The workflow's step, as docs/ci.md writes it, with what GitHub substitutes and provides.
step="$(python3 - "$root/docs/ci.md" <<'PY'
import sys
text = open(sys.argv[1]).read()
block = text.split("# ci-recipe-check: begin", 1)[1].split("# ci-recipe-check: end", 1)[0]
lines = block.splitlines()
start = next(n for n, line in enumerate(lines) if line.strip() == "run: |") + 1
body = lines[start:]
indent = min(len(line) - len(line.lstrip()) for line in body if line.strip())
print("\n".join(line[indent:] for line in body))
PY
)"
[ -n "$step" ] || fail "docs/ci.md has no step between the ci-recipe-check markers"
step="${step//'${{ github.event.pull_request.base.sha }}'/$base}"
step="${step//--rounds 10/--rounds $rounds}"
export GITHUB_ENV="$work/github-env"
: >"$GITHUB_ENV"
{
    # The runner's sudo; here root already (or the real sudo).
    echo 'sudo() { if [ "$(id -u)" = 0 ]; then "$@"; else command sudo "$@"; fi; }'
    echo "$step"
} >"$work/step.sh"
say "running the workflow step in $repo (base $base, head $head):"
sed 's/^/    /' "$work/step.sh" >&2
rm -rf "$repo/nesquic-runs"
(cd "$repo" && bash -e "$work/step.sh")

status="$(sed -n 's/^status=//p' "$GITHUB_ENV")"
[ "$status" = 0 ] || [ "$status" = 1 ] || fail "nesquic ab exited with status '$status' (2: a failed build or run)"
comment="$repo/comment.md"
[ -s "$comment" ] || fail "no Markdown verdict in $comment"
grep -q 'nesquic' "$comment" || fail "$comment holds no nesquic verdict"
for side in base head; do
    want="$base"
    [ "$side" = head ] && want="$head"
    got="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lut"]["source"]["revision"])' \
        "$repo/nesquic-runs/$side/summary.json")"
    [ "$got" = "$want" ] || fail "$side ran revision $got, not $want"
done
say "PASS: status $status; base $base and head $head built and run; the verdict:"
head -n 3 "$comment" >&2
