// CBLAS from the distribution's OpenBLAS (pkg-config openblas adds the include path).
#include <cblas.h>
