#!/usr/bin/env python3
"""The k-NN search baselines `updraft-bench knn --compare` runs beside Updraft, on the same data.

    python3 Benchmarks/knn_baseline.py --samples S.npy --queries Q.npy --k K --threads T [--repeat R]

S.npy: N x D float32 samples; Q.npy: M x D float32 queries. For each query batch size in --batches
(default 1,256), times exact search with faiss-cpu IndexFlatL2 and scikit-learn's
NearestNeighbors(algorithm="brute") on T threads, and prints one JSON object:
{"faiss": {...}, "sklearn": {...}, "versions": {...}, "neighbors": {"faiss": [[...]], "sklearn": [[...]]}}
with queries/s per batch size and the first --check queries' neighbour indices (so the caller can
check the baselines find what Updraft finds). A library that is missing is reported, not fatal.
"""
import argparse
import json
import os
import sys
import time


def timed(fn, repeat):
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batches", default="1,256")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", type=int, default=4)
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import numpy as np
    x = np.load(a.samples).astype(np.float32)
    q = np.load(a.queries).astype(np.float32)
    batches = [int(b) for b in a.batches.split(",")]
    out = {"versions": {"numpy": np.__version__}, "threads": a.threads, "neighbors": {}}

    try:
        import faiss
        faiss.omp_set_num_threads(a.threads)
        index = faiss.IndexFlatL2(x.shape[1])
        index.add(x)
        out["versions"]["faiss"] = faiss.__version__
        rates = {}
        for b in batches:
            qb = q[:b]
            rates[str(b)] = b / timed(lambda: index.search(qb, a.k), a.repeat)
        out["faiss"] = {"queries_per_second": rates}
        out["neighbors"]["faiss"] = index.search(q[:a.check], a.k)[1].tolist()
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        out["faiss"] = {"error": f"{type(e).__name__}: {e}"}

    try:
        import sklearn
        from sklearn.neighbors import NearestNeighbors
        from threadpoolctl import threadpool_limits
        nn = NearestNeighbors(n_neighbors=a.k, algorithm="brute", n_jobs=a.threads).fit(x)
        out["versions"]["sklearn"] = sklearn.__version__
        rates = {}
        with threadpool_limits(limits=a.threads):
            for b in batches:
                qb = q[:b]
                rates[str(b)] = b / timed(lambda: nn.kneighbors(qb), a.repeat)
            out["neighbors"]["sklearn"] = nn.kneighbors(q[:a.check])[1].tolist()
        out["sklearn"] = {"queries_per_second": rates}
    except Exception as e:  # noqa: BLE001
        out["sklearn"] = {"error": f"{type(e).__name__}: {e}"}
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
