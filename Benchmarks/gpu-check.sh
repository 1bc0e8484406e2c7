#!/usr/bin/env bash
# The device checks in one run, for a session that borrows the GPU machine (see README, Benchmarks).
# Here:   make dist                          (leaves updraft and updraft-bench with their libraries in .device/)
# There:  bash Benchmarks/gpu-check.sh       (device `run` with carry [".device"]; results in $OUT)
#
# 1. which OpenCL devices the NVIDIA driver shows; 2. every backend against the reference (gradcheck,
# quick lists), then the CPU backend and its engines alone (OpenCL hidden), on the full lists, at the
# host CPU's AVX-512 level and at the baseline level (UPDRAFT_CPU_LEVEL; a CPU without AVX-512 runs its
# best level with one warning, in cpu-avx512.err, and `devices` names the level); 3. the kernel tuner
# (--quick, 80 s budget) for SqueezeNet's shapes, stored in
# $OUT/cache so that the next steps run what it chose; 4. kernel timings at SqueezeNet's shapes against
# the device's measured peak, both GEMM engines side by side; 5. training epochs on the GPU, with and
# without the feature cache, side by side with PyTorch on CUDA (TF32 off); 6. the same on the host's
# CPU cores against PyTorch on them; 7. exact k-NN search with the GPU doing each batch's products,
# beside faiss and scikit-learn, and a k-NN appended through SqueezeNet beside PyTorch; 8. first use (`updraft-bench
# firstuse`: cold and warm processes, default compute units against cpuOnly); 9. $OUT/summary.json.
# Each step's output goes to $OUT; a failing step does not stop the next. Planned to fit in 8 minutes
# (GPU_CHECK_IMAGES=1024 shortens step 5 if a run comes close).
set -uo pipefail
out=${OUT:-/tmp/gpu-check}; mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export UPDRAFT_CACHE_DIR="$out/cache"      # calibration and kernel tuning, shared by every step, returned with $OUT
images=${GPU_CHECK_IMAGES:-4096}
status=0
started=$SECONDS
# step NAME LIMIT_SECONDS PRODUCT ARGS...: runs the bundled PRODUCT; the limits add up to 570 s, so the whole run fits in 10 minutes
# even when a step hangs (it is then stopped, reported as failed, and the next step runs).
step() {
  local name=$1 limit=$2; shift 2
  echo "== $name (at most $limit s): $*" >&2
  local start=$SECONDS
  if ! timeout -k 5 "$limit" bash .device/run.sh "$@" > "$out/$name.txt" 2> "$out/$name.err"; then echo "   $name failed or ran past $limit s (see $name.err)" >&2; status=1; fi
  echo "$name $((SECONDS - start))" >> "$out/step-seconds.txt"
  echo "   $name took $((SECONDS - start)) s" >&2
  tail -n 40 "$out/$name.txt" >&2
}
: > "$out/step-seconds.txt"
step devices    20 updraft devices
step gradcheck  50 updraft gradcheck --quick
# The CPU comparisons at two vector levels: an ICD folder with no vendor in it hides the OpenCL devices.
mkdir -p "$out/no-opencl"
OCL_ICD_VENDORS="$out/no-opencl" UPDRAFT_CPU_LEVEL=avx512 step cpu-avx512 20 updraft gradcheck
OCL_ICD_VENDORS="$out/no-opencl" UPDRAFT_CPU_LEVEL=baseline step cpu-baseline 20 updraft gradcheck
step tune      100 updraft tune --quick --budget 70 --json
step kernels   100 updraft-bench kernels --json
step epochs    120 updraft-bench epochs --compute-units cpuAndGPU --images "$images" --epochs 3 --compare-pytorch --json
step epochs-cpu 60 updraft-bench epochs --compute-units cpuOnly --images 256 --epochs 2 --compare-pytorch --json
step knn        60 updraft-bench knn --sizes 100000x128,100000x1000 --batches 1,256 --repeat 2 --device "${GPU_CHECK_OPENCL_DEVICE:-0}" --append 512 --compute-units all --compare --json
# A newcomer's first runs: fresh processes, empty caches then warm, default compute units against cpuOnly.
step firstuse   40 updraft-bench firstuse --data "$PWD/Tests/Data/digits/train" --json
echo "total $((SECONDS - started))" >> "$out/step-seconds.txt"
python3 "$here/gpu_check_summary.py" "$out" > "$out/summary.json" || { echo "summary failed" >&2; status=1; }
cat "$out/summary.json" >&2
exit $status
