# Sourced by lut-adapters/<stack>/build-from-source.sh (the LUTs that are not cargo crates): the
# command line (`--lut-path CHECKOUT --out DIR`), progress and errors on stderr, what the checkout
# is (canonical path, git revision, dirty or not), the build cache key, and the one JSON line on
# stdout. The calling script sets `lut` (the LUT's name) before sourcing this file.
#
# Cache: one build per DIR. DIR/.build-key holds the key of the build there: the checkout's path,
# its git revision, a listing (path, size, mtime) of its files when the tree is dirty or not a git
# repository, and a hash of the adapter's own sources and scripts. Same key and the executable
# present: no rebuild (the proof still runs).

here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"

say() { echo "build-from-source($lut): $*" >&2; }
die() {
    echo "build-from-source($lut): error: $*" >&2
    exit 1
}
usage() {
    echo "usage: $(basename "${BASH_SOURCE[2]:-$0}") --lut-path CHECKOUT --out DIR" >&2
    echo "  builds nesquic-lut-$lut against the library checkout into DIR; prints one JSON line" >&2
    exit 2
}

# Sets `source` (canonical checkout) and `out` (canonical output dir, created).
parse_args() {
    source="" out=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --lut-path) [ $# -ge 2 ] || usage; source="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || usage; out="$2"; shift 2 ;;
        -h | --help) usage ;;
        *) echo "build-from-source($lut): unknown argument $1" >&2; usage ;;
        esac
    done
    [ -n "$source" ] && [ -n "$out" ] || usage
    [ -d "$source" ] || die "--lut-path $source: no such directory"
    source="$(realpath "$source")"
    out="$(realpath -m "$out")"
    case "$out/" in "$source"/*) die "--out $out is inside the checkout $source: builds never write there" ;; esac
    mkdir -p "$out" || die "cannot create --out $out"
    # Two builds into one DIR at once (two runs of one checkout) would overwrite each other: the
    # second waits for the first, then finds it up to date.
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$out/.lock"
        flock 9 2>/dev/null || die "cannot lock $out/.lock"
    fi
}

# git in the checkout, whoever owns it (a root run on a user's clone must not refuse it).
checkout_git() { git -c safe.directory='*' -C "$source" "$@"; }

# Sets `revision`, `dirty` (true|false) and `fingerprint` (changes whenever the files do).
checkout_state() {
    revision="not a git repository" dirty=false
    local listing
    # A directory inside some repository but ignored there (a copy under target/, say) is not
    # that repository's code: no revision.
    if command -v git >/dev/null 2>&1 && checkout_git rev-parse --is-inside-work-tree >/dev/null 2>&1 \
        && ! checkout_git check-ignore -q . 2>/dev/null; then
        revision="$(checkout_git rev-parse HEAD 2>/dev/null || echo "no commit yet")"
        local status
        status="$(checkout_git status --porcelain -- . 2>/dev/null)"
        if [ -n "$status" ]; then
            dirty=true
            listing="$status"$'\n'"$(checkout_git ls-files -z -co --exclude-standard -- . \
                | (cd "$source" && xargs -0 -r stat -c '%n %s %Y' 2>/dev/null) | sort)"
        fi
    else
        listing="$(cd "$source" && find . -name .git -prune -o -type f -printf '%P %s %T@\n' | sort)"
    fi
    fingerprint="$(printf '%s\n' "$revision" "${listing:-}" | sha256sum | cut -d' ' -f1)"
}

# The cache key: the checkout (path and fingerprint) and the adapter's own files (`$@`).
build_key() {
    {
        printf '%s\n%s\n' "$source" "$fingerprint"
        cat "${BASH_SOURCE[0]}" "$@" | sha256sum
    } | sha256sum | cut -d' ' -f1
}

# True when DIR already holds the build for `key` and `binary` exists.
cached() { [ -x "$binary" ] && [ "$(cat "$out/.build-key" 2>/dev/null)" = "$key" ]; }
mark_built() { echo "$key" >"$out/.build-key"; }

json_string() {
    local s="$1"
    s="${s//\\/\\\\}"
    s="${s//\"/\\\"}"
    s="${s//$'\n'/\\n}"
    s="${s//$'\t'/\\t}"
    printf '"%s"' "$s"
}

# The one stdout line: what was built, from what, and what the proof verified.
emit() {
    local version="$1" proof="$2"
    printf '{"binary": %s, "version": %s, "source": %s, "revision": %s, "dirty": %s, "proof": %s}\n' \
        "$(json_string "$binary")" "$(json_string "$version")" "$(json_string "$source")" \
        "$(json_string "$revision")" "$dirty" "$(json_string "$proof")"
}

# Runs a build step with its output in `log`; on failure prints that output and exits non-zero.
step() {
    local what="$1" log="$2"
    shift 2
    say "$what ..."
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        die "$what failed (output above, also in $log)"
    fi
}
