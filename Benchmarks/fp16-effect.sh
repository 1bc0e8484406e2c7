#!/usr/bin/env bash
# The fp16 feature cache's effect on training: the `make demo` run (SqueezeNet 1.1 on the bundled
# digits, conv10 + fullyconnected0 trained) twice, fp32 and --feature-cache-fp16, same seed and
# flags, then every mini-batch loss and each epoch's validation loss/accuracy side by side.
# Usage: bash Benchmarks/fp16-effect.sh [UPDRAFT_BINARY] [extra train flags...]   (prints one JSON)
set -euo pipefail
bin=${1:-.build/release/updraft}; shift || true
out=${FP16_EFFECT_DIR:-$(mktemp -d)}
flags=(--epochs 10 --batch-size 32 --learning-rate 0.05 --momentum 0.9 "$@")
"$bin" create squeezenet --classes 10 --seed 1 --out "$out/squeezenet.mlmodel" >/dev/null
for mode in fp32 fp16; do
  extra=(); [ "$mode" = fp16 ] && extra=(--feature-cache-fp16)
  start=$SECONDS
  "$bin" train "$out/squeezenet.mlmodel" --train Tests/Data/digits/train --validation Tests/Data/digits/validation \
    "${flags[@]}" "${extra[@]}" --out "$out/$mode.mlmodel" --log "$out/$mode.jsonl" > "$out/$mode.txt"
  echo "$mode $((SECONDS - start))" >> "$out/seconds.txt"
done
python3 - "$out" "${flags[*]}" <<'PY'
import json, sys
out, flags = sys.argv[1], sys.argv[2]
def read(mode):
    batches, epochs = [], []
    for line in open(f"{out}/{mode}.jsonl"):
        e = json.loads(line)
        if e.get("event") == "miniBatchEnd": batches.append(e["loss"])
        if e.get("event") == "epochEnd": epochs.append(e)
    return batches, epochs
b32, e32 = read("fp32"); b16, e16 = read("fp16")
diffs = [abs(a - b) for a, b in zip(b32, b16)]
seconds = dict(l.split() for l in open(f"{out}/seconds.txt"))
print(json.dumps({
    "flags": flags, "batches": len(diffs),
    "max_batch_loss_difference": max(diffs), "max_relative_batch_loss_difference": max(d / max(abs(a), 1e-12) for d, a in zip(diffs, b32)),
    "first_epoch_max_difference": max(diffs[: len(diffs) // max(1, len(e32))]),
    "fp32": {"final_validation_loss": e32[-1].get("validationLoss"), "final_validation_accuracy": e32[-1].get("validationAccuracy"),
             "final_training_loss": e32[-1].get("meanLoss"), "device": e32[-1].get("device"), "seconds": int(seconds["fp32"])},
    "fp16": {"final_validation_loss": e16[-1].get("validationLoss"), "final_validation_accuracy": e16[-1].get("validationAccuracy"),
             "final_training_loss": e16[-1].get("meanLoss"), "device": e16[-1].get("device"), "seconds": int(seconds["fp16"])},
    "per_epoch_validation_accuracy": [[a.get("validationAccuracy"), b.get("validationAccuracy")] for a, b in zip(e32, e16)],
    "output": out}, indent=1))
PY
