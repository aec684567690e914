# Sourced by the build scripts of LUTs in other languages (lut-adapters/<stack>/build.sh): sets
# `here` (the calling script's folder) and `release`, the cargo target dir's release/ folder where
# every LUT executable lands (CARGO_TARGET_DIR respected, relative to the repository root).
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
release="$target/release"
