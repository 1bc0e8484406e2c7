// The kernels for every x86-64 CPU (SSE2) and for other architectures: no target attribute.
#define UPD_SUFFIX baseline
#include "kernels_body.h"
