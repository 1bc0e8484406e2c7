#!/usr/bin/env bash
# `make dist-check`: the tarball from `make dist` runs as it would on a host without Swift.
#   .ci/dist-check.sh TARBALL
# Unpacks it in a temporary folder; checks that nothing it runs resolves to the Swift toolchain or
# to a library missing from the bundle and the base system; then, with a bare environment (no Swift
# on PATH, no LD_LIBRARY_PATH), runs --version, `devices`, and a short training on the bundled digits.
set -euo pipefail
tarball=$(readlink -f "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$tarball"
tree=$(echo "$work"/updraft-*)
for p in updraft updraft-bench; do
  deps=$(LD_LIBRARY_PATH="$tree/lib" ldd "$tree/libexec/$p")
  if grep -q 'not found' <<<"$deps"; then echo "dist-check: $p: a library is missing:" >&2; grep 'not found' <<<"$deps" >&2; exit 1; fi
  if grep -qi 'swift' <<<"$deps"; then echo "dist-check: $p still needs the Swift toolchain's libraries:" >&2; grep -i swift <<<"$deps" >&2; exit 1; fi
  outside=$(awk '/=> \//{print $3}' <<<"$deps" | grep -v "^$tree/lib/" | xargs -r -n1 basename \
    | grep -Ev '^(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libresolv|libutil)\.so' || true)
  if [ -n "$outside" ]; then echo "dist-check: $p takes these from the host, not the bundle: $outside" >&2; exit 1; fi
done
bare() { env -i HOME="$work" PATH=/usr/bin:/bin TMPDIR="$work" "$@"; }
bare "$tree/bin/updraft" --version
bare "$tree/bin/updraft-bench" --version >/dev/null
bare "$tree/bin/updraft" devices
bare "$tree/bin/updraft" create squeezenet --classes 10 --input-size 64 --seed 1 --out "$work/s.mlmodel" >/dev/null
bare "$tree/bin/updraft" train "$work/s.mlmodel" --train "$root/Tests/Data/digits/validation" --epochs 1 \
  --batch-size 64 --out "$work/t.mlmodel" | tail -n 3
test -s "$work/t.mlmodel"
echo "dist-check: $(basename "$tarball") runs without Swift: version, devices and a training epoch"
