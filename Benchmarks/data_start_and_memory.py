#!/usr/bin/env python3
"""Start time and peak host memory of `updraft train` on image folders of different sizes (issue 14):
for each folder, the seconds from launch to training's start and to the end of the first mini-batch
(read from the --log JSON Lines), and
the peak resident memory of the whole run (/usr/bin/time -v), one epoch, decoded-image cache off.

  python3 Benchmarks/data_start_and_memory.py --updraft .build/release/updraft --model SqueezeNet.mlmodel \
      --options "--batch-size 64 --no-feature-cache --compute-units cpuOnly" DIR1 DIR2
Prints one JSON object per folder.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--updraft", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--options", default="", help="more train options, one string")
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args()
    extra = args.options.split()
    for folder in args.folders:
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "log.jsonl")
            cmd = ["/usr/bin/time", "-v", args.updraft, "train", args.model, "--train", folder, "--epochs", "1",
                   "--image-cache-mib", "0", "--log", log, "--out", os.path.join(tmp, "out.mlmodel")] + extra
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            begin = first = None
            while proc.poll() is None:
                if first is None and os.path.exists(log):
                    with open(log) as f:
                        text = f.read()
                    if begin is None and '"trainingBegin"' in text:
                        begin = time.perf_counter() - start
                    if '"miniBatchEnd"' in text:
                        first = time.perf_counter() - start
                time.sleep(0.02)
            total = time.perf_counter() - start
            err = proc.stderr.read()
            peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
            images = sum(len(files) for _, _, files in os.walk(folder))
            print(json.dumps({"folder": folder, "images": images, "status": proc.returncode,
                              "training_begin_s": begin, "first_minibatch_s": first, "total_s": total,
                              "peak_rss_mib": int(peak.group(1)) / 1024 if peak else None,
                              "command": " ".join(cmd[2:])}), flush=True)
            if proc.returncode != 0:
                print(err[-2000:], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
