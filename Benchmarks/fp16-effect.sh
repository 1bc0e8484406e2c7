#!/usr/bin/env bash
# The half-precision options' effect on training: the same run (seed, flags, data) once per mode —
#   fp32                 everything fp32
#   feature_cache_fp16   --feature-cache-fp16 (cached features as halves)
#   frozen_fp16          --frozen-fp16 (the frozen prefix's activations as halves)
#   both                 both options
# then, against fp32, the largest difference of any mini-batch loss and each mode's final validation
# loss and accuracy. Defaults: the `make demo` fine-tuning flags (DEMO_FINETUNE_FLAGS) on the bundled
# digits (Tests/Data/digits, 10 classes) with a fresh 64x64 SqueezeNet 1.1 (conv10 + fullyconnected0
# trained, every other layer frozen). FP16_EFFECT_MODEL=M.mlmodel and FP16_EFFECT_DATA=DIR (holding
# train/ and validation/) run another model and data, e.g. the demo's stage-2 model and digits 6-9.
# Extra flags go to every `train`; `--compute-units all --device 0` pins OpenCL device 0 (PoCL here)
# where the scheduler would pick the CPU. FP16_EFFECT_MODES picks modes (default: all four).
# Usage: bash Benchmarks/fp16-effect.sh [UPDRAFT_BINARY] [extra train flags...]   (prints one JSON)
set -euo pipefail
bin=${1:-.build/release/updraft}; shift || true
out=${FP16_EFFECT_DIR:-$(mktemp -d)}
mkdir -p "$out"
data=${FP16_EFFECT_DATA:-Tests/Data/digits}
modes=(${FP16_EFFECT_MODES:-fp32 feature_cache_fp16 frozen_fp16 both})
flags=(--epochs 50 --batch-size 16 --learning-rate 0.01 --momentum 0.9 "$@")
model=${FP16_EFFECT_MODEL:-}
if [ -z "$model" ]; then
  model="$out/squeezenet.mlmodel"
  "$bin" create squeezenet --classes 10 --input-size 64 --seed 1 --out "$model" >/dev/null
fi
: > "$out/seconds.txt"
for mode in "${modes[@]}"; do
  case "$mode" in
    fp32) extra=() ;;
    feature_cache_fp16) extra=(--feature-cache-fp16) ;;
    frozen_fp16) extra=(--frozen-fp16) ;;
    both) extra=(--frozen-fp16 --feature-cache-fp16) ;;
    *) echo "unknown mode $mode (fp32, feature_cache_fp16, frozen_fp16, both)" >&2; exit 2 ;;
  esac
  start=$SECONDS
  "$bin" train "$model" --train "$data/train" --validation "$data/validation" \
    "${flags[@]}" ${extra[@]+"${extra[@]}"} --out "$out/$mode.mlmodel" --log "$out/$mode.jsonl" > "$out/$mode.txt"
  echo "$mode $((SECONDS - start))" >> "$out/seconds.txt"
done
python3 - "$out" "${flags[*]}" "$model" "${modes[@]}" <<'PY'
import json, sys
out, flags, model, modes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def read(mode):
    batches, epochs = [], []
    for line in open(f"{out}/{mode}.jsonl"):
        e = json.loads(line)
        if e.get("event") == "miniBatchEnd": batches.append(e["loss"])
        if e.get("event") == "epochEnd": epochs.append(e)
    return batches, epochs
seconds = dict(l.split() for l in open(f"{out}/seconds.txt"))
runs = {m: read(m) for m in modes}
result = {"flags": flags, "model": model, "output": out}
base = runs.get("fp32")
for mode, (batches, epochs) in runs.items():
    r = {"batches": len(batches), "device": epochs[-1].get("device"), "seconds": int(seconds[mode]),
         "final_validation_loss": epochs[-1].get("validationLoss"),
         "final_validation_accuracy": epochs[-1].get("validationAccuracy"),
         "final_training_loss": epochs[-1].get("meanLoss")}
    if base and mode != "fp32":
        diffs = [abs(a - b) for a, b in zip(base[0], batches)]
        per_epoch = len(diffs) // max(1, len(epochs))
        r["max_batch_loss_difference"] = max(diffs)
        r["max_relative_batch_loss_difference"] = max(d / max(abs(a), 1e-12) for d, a in zip(diffs, base[0]))
        r["first_epoch_max_difference"] = max(diffs[:per_epoch]) if per_epoch else None
        r["validation_accuracy_per_epoch_vs_fp32"] = [[a.get("validationAccuracy"), b.get("validationAccuracy")]
                                                      for a, b in zip(base[1], epochs)]
    result[mode] = r
print(json.dumps(result, indent=1))
PY
