/* csrc/norm.c - placeholder until its kernels land.
 * C11; no malloc, no threads, no OpenMP, no global state. */
#include "krt_common.h"
