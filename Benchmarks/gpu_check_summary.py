#!/usr/bin/env python3
"""One JSON of every figure gpu-check.sh produced, with the ratios and the targets of issue 15:
SGEMM >= 40 TFLOP/s at 4096^3 and >= 30 at conv10's shape; epochs >= 1.5x PyTorch FP32 without the
feature cache and >= 3x with it. Usage: gpu_check_summary.py OUT_DIR (prints the JSON)."""
import json
import os
import re
import sys

TARGETS = {"sgemm_4096_tflops": 40.0, "conv10_gemm_tflops": 30.0,
           "epochs_vs_pytorch_no_cache": 1.5, "epochs_vs_pytorch_cache": 3.0}


def load(out, name):
    path = os.path.join(out, name + ".txt")
    try:
        with open(path) as f:
            text = f.read()
        start = text.find("{")
        return json.loads(text[start:]) if start >= 0 else None
    except (OSError, ValueError) as e:
        return {"error": f"{path}: {e}"}


def gradcheck_summary(out, name):
    """The last "gradcheck: N passed, M failed" line of a gradcheck step, and its first warning (a level the CPU lacks)."""
    try:
        with open(os.path.join(out, name + ".txt")) as f:
            counts = re.findall(r"gradcheck: (\d+) passed, (\d+) failed", f.read())
    except OSError as e:
        return {"error": str(e)}
    warning = None
    try:
        with open(os.path.join(out, name + ".err")) as f:
            warning = next((line.strip() for line in f if line.startswith("warning:")), None)
    except OSError:
        pass
    if not counts:
        return {"error": "no gradcheck totals", "warning": warning}
    return {"passed": int(counts[-1][0]), "failed": int(counts[-1][1]), "warning": warning}


def kernels_summary(k):
    if not k or "results" not in k:
        return k
    rows, figures = [], {}
    for r in k["results"]:
        row = {"layer": r["layer"], "op": r["op"], "shape": r["shape"], "ms": r["ms"], "gflops": r["gflops"],
               "fraction_of_peak_flops": r.get("fractionOfPeakFlops"), "engine": r.get("engine"),
               "variants": r.get("variants"),
               "engines": {e: {"wall_ms": v["wallMs"], "wall_gflops": v["wallGflops"]}
                           for e, v in r.get("engines", {}).items()}}
        rows.append(row)
        best = max([r["gflops"]] + [v["wallGflops"] for v in r.get("engines", {}).values()])
        if r["layer"] == "sgemm":
            figures["sgemm_4096_tflops"] = r["gflops"] / 1e3
            figures["sgemm_4096_best_engine_tflops"] = best / 1e3
        if r["layer"] == "conv10 GEMM":
            figures["conv10_gemm_tflops"] = r["gflops"] / 1e3
            figures["conv10_gemm_best_engine_tflops"] = best / 1e3
    return {"device": k.get("device", {}).get("name"), "peak": k.get("peak"), "figures": figures,
            "summary": k.get("summary"), "rows": rows, "checks_failed": k.get("checks", {}).get("failed")}


def epochs_summary(e):
    if not e or "runs" not in e:
        return e
    runs = [{"compute_units": r.get("compute_units"), "device": r.get("device"), "feature_cache": r.get("feature_cache"),
             "images_per_second": r.get("images_per_second"),
             "first_epoch_images_per_second": r.get("first_epoch_images_per_second")} for r in e["runs"]]
    return {"runs": runs, "ratios": e.get("ratios", []), "pytorch": e.get("pytorch", {}).get("runs")}


def main():
    out = sys.argv[1]
    steps = {}
    try:
        with open(os.path.join(out, "step-seconds.txt")) as f:
            for line in f:
                name, _, seconds = line.strip().rpartition(" ")
                steps[name] = int(seconds)
    except OSError:
        pass
    tune = load(out, "tune")
    kernels = kernels_summary(load(out, "kernels"))
    epochs = epochs_summary(load(out, "epochs"))
    epochs_cpu = epochs_summary(load(out, "epochs-cpu"))
    figures = dict((kernels or {}).get("figures", {}))
    for r in (epochs or {}).get("ratios", []) or []:
        if r.get("compute_units") != "cpuOnly":
            key = "epochs_vs_pytorch_cache" if r.get("feature_cache") else "epochs_vs_pytorch_no_cache"
            figures[key] = r.get("ratio")
    if isinstance(tune, dict) and "shapes" in tune:
        shapes = tune["shapes"]
        figures["tuned_shapes"] = len(shapes)
        figures["tuned_on_clblast"] = sum(1 for s in shapes if s.get("engine") == "CLBlast")
        figures["tuned_k_unrolled"] = sum(1 for s in shapes if "k-unroll" in str(s.get("choice", "")))
        figures["tuned_global_reads"] = sum(1 for s in shapes if "global reads" in str(s.get("choice", "")))
        speedups = [s["speedupOverTable"] for s in shapes if isinstance(s.get("speedupOverTable"), (int, float))]
        figures["tuning_mean_speedup_over_table"] = sum(speedups) / len(speedups) if speedups else None
    verdicts = {k: {"value": figures.get(k), "target": t,
                    "meets": (figures.get(k) is not None and figures[k] >= t)} for k, t in TARGETS.items()}
    knn = load(out, "knn")  # updraft-bench knn --json: search rows beside faiss/scikit-learn, the append beside PyTorch
    if isinstance(knn, dict):
        for r in knn.get("search", []):
            for lib in ("faiss", "sklearn"):
                if r.get(lib):
                    figures[f"knn_{r['samples']}x{r['dimension']}_batch{r['batch']}_vs_{lib}"] = r["queriesPerSecond"] / r[lib]
        append = knn.get("append") or {}
        if append.get("pytorch"):
            figures["knn_append_vs_pytorch"] = append["imagesPerSecond"] / append["pytorch"]
    cpu_levels = {level: gradcheck_summary(out, "cpu-" + level) for level in ("avx512", "baseline")}
    json.dump({"targets": verdicts, "figures": figures, "step_seconds": steps, "tune": tune, "kernels": kernels,
               "epochs": epochs, "epochs_cpu": epochs_cpu, "knn": knn, "cpu_levels": cpu_levels},
              sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
