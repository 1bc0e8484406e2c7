#!/usr/bin/env bash
# The device checks in one run, for a session that borrows the GPU machine (see README, Benchmarks).
# Here:   ../shared/gpu/bundle.sh            (packs updraft and updraft-bench into .device/)
# There:  bash Benchmarks/gpu-check.sh       (device `run` with carry [".device"]; results in $OUT)
#
# 1. which OpenCL devices the NVIDIA driver shows; 2. every backend against the reference (gradcheck,
# quick lists); 3. kernel timings at SqueezeNet's shapes against the device's measured peak;
# 4. training epochs on the GPU, with and without the feature cache, side by side with PyTorch on
# CUDA (TF32 off); 5. the same on the host's CPU cores against PyTorch on them. Each step's output goes to $OUT; a failing step does not stop the next.
set -uo pipefail
out=${OUT:-/tmp/gpu-check}; mkdir -p "$out"
run() { bash .device/run.sh "$@"; }
images=${GPU_CHECK_IMAGES:-4096}
status=0
step() {
  local name=$1; shift
  echo "== $name: $*" >&2
  local start=$SECONDS
  if ! "$@" > "$out/$name.txt" 2> "$out/$name.err"; then echo "   $name failed (see $name.err)" >&2; status=1; fi
  echo "   $name took $((SECONDS - start)) s" >&2
  tail -n 40 "$out/$name.txt" >&2
}
step devices   run updraft devices
step gradcheck run updraft gradcheck --quick
step kernels   run updraft-bench kernels --json
step epochs    run updraft-bench epochs --compute-units cpuAndGPU --images "$images" --epochs 3 --compare-pytorch --json
step epochs-cpu run updraft-bench epochs --compute-units cpuOnly --images 256 --epochs 2 --compare-pytorch --json
exit $status
