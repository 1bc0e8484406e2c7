// OpenCL 1.2 API: kernels are written to OpenCL C 1.2 so NVIDIA's driver and PoCL both build them.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
