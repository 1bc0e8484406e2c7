// CLBlast's C API (Debian's libclblast-dev): the second GEMM engine, run on Updraft's own OpenCL
// queue and buffers. OpenCL 1.2, like COpenCL.
#define CL_TARGET_OPENCL_VERSION 120
#include <clblast_c.h>
