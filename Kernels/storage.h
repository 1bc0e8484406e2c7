// How a forward kernel stores its activations: X_HALF = 1 reads the input, Y_HALF = 1 writes the
// output as IEEE halves (the frozen prefix's fp16 option, `TrainingGraph.halfPrecisionPrefix`).
// Only vload_half / vstore_half are used (core OpenCL C 1.2, no cl_khr_fp16: PoCL has none), so the
// arithmetic and the accumulation stay fp32; a store rounds to nearest even, like Swift's Float16
// (the CPU twin, `Executor.forwardHalfStored`'s conversions). Indices count values (halves or floats).
#ifndef UPDRAFT_STORAGE_H
#define UPDRAFT_STORAGE_H

#ifndef X_HALF
#define X_HALF 0
#endif
#ifndef Y_HALF
#define Y_HALF 0
#endif

#if X_HALF
#define X_T half
#define LOAD_X(p, i) vload_half((size_t)(i), (p))
#else
#define X_T float
#define LOAD_X(p, i) ((p)[i])
#endif

#if Y_HALF
#define Y_T half
#define STORE_Y(p, i, v) vstore_half((v), (size_t)(i), (p))
#else
#define Y_T float
#define STORE_Y(p, i, v) ((p)[i] = (v))
#endif

#endif
