#!/usr/bin/env bash
# Builds the example package (Swift 6 mode, Updraft by path) and runs it as a user would: in a folder
# holding SqueezeNet.mlmodel and train/<label>/*.png. Checks that it trains on a fast backend the
# scheduler picks (computeUnits .all), on the CPU fast path and on OpenCL when UPDRAFT_DEVICE asks for
# them, that the loss falls, and that Trained.mlmodel is written. Usage: Examples/FineTune/check.sh PATH/TO/updraft   (run from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
updraft="${1:?usage: check.sh PATH/TO/updraft}"
swift="${SWIFT:-swift}"

echo "== building Examples/FineTune (Swift 6 language mode)"
"$swift" build --package-path "$here" 2>&1 | tee "$here/.build-log" | grep -E "warning:|error:|Compiling FineTune|Build complete" || true
if grep -q "error:" "$here/.build-log"; then echo "the example does not build"; exit 1; fi
if grep -E "Examples/FineTune/Sources/.*warning:" "$here/.build-log"; then echo "the example builds with warnings"; exit 1; fi
bin="$("$swift" build --package-path "$here" --show-bin-path)/FineTune"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$updraft" create squeezenet --classes 10 --input-size 48 --seed 3 --out "$work/SqueezeNet.mlmodel" >/dev/null
for label in 0 1 2 3 4 5 6 7 8 9; do
  mkdir -p "$work/train/$label"
  ls "$root/Tests/Data/digits/validation/$label" | sort | head -4 | while read -r f; do
    cp "$root/Tests/Data/digits/validation/$label/$f" "$work/train/$label/"
  done
done

run() {  # run NAME DEVICE-PATTERN [env...]
  local name=$1 pattern=$2; shift 2
  echo "== running the example ($name)"
  (cd "$work" && rm -f Trained.mlmodel && env "$@" "$bin") | tee "$work/$name.out"
  python3 - "$work/$name.out" "$pattern" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("epoch ")]
losses = [float(re.search(r"loss ([0-9.eE+-]+|nan|inf)", l).group(1)) for l in lines]
devices = {l.rsplit(" on ", 1)[1].strip() for l in lines}
assert len(lines) == 10, f"expected one line per epoch for 10 epochs, got {len(lines)}"
assert all(re.search(sys.argv[2], d) for d in devices), f"trained on {devices}, expected {sys.argv[2]}"
assert losses[-1] < losses[0], f"the loss did not fall: {losses}"
print(f"ok: 10 epochs on {', '.join(sorted(devices))}, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
PY
  test -s "$work/Trained.mlmodel" || { echo "Trained.mlmodel was not written"; exit 1; }
}
run default '^(cpu|opencl:.+)$'            # a fast backend the scheduler chose, never the Double reference
run cpu '^cpu$' UPDRAFT_DEVICE=cpu
run opencl '^opencl:.+$' UPDRAFT_DEVICE=0
