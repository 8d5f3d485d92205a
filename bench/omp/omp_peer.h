/* The OpenMP peer's C entry points (see omp_unity.c). */
#ifndef KBOMP_PEER_H
#define KBOMP_PEER_H
#include <stdint.h>

void kbomp_set_threads(int n);
int kbomp_max_threads(void);
/* Runs an empty parallel region of n threads, creating the calling thread's team. */
void kbomp_warm(int n);
/* Pins thread i of an n-thread team (the caller being thread 0) to cpus[i]; returns the
 * number of threads whose sched_setaffinity failed. */
int kbomp_pin(const int *cpus, int n);
/* y = W x over rows [0, rows): q5 selects Q5_0 weights (else Q8_0); variant 0 = ref, 1 = avx2,
 * 2 = avx512; x holds cols/32 Q8_0 blocks; rows are run in chunks of `chunk` rows by an
 * `omp parallel for schedule(static)`. */
void kbomp_gemv(int q5, int variant, float *y, const void *w, const void *x, int64_t rows, int64_t cols,
                int64_t chunk);
#endif
