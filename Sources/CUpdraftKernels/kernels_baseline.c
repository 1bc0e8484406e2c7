// The kernels for every x86-64 CPU (SSE2) and for other architectures: no target attribute.
#define UPD_SUFFIX baseline
// The direct convolution's block: 2 channels x 16 columns = 8 xmm accumulators (1.35-1.61 against
// 1.74-1.91 ms an image with 8 channels, SqueezeNet's conv1 at the baseline level).
#define UPD_CONV_CHANNELS 2
#include "kernels_body.h"
