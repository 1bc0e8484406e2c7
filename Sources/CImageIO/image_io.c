#include "image_io.h"
