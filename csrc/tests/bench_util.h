/*
 * bench_util.h - what the C benchmarks (csrc/tests/bench_*.c) share: the clock (monotonic, or
 * the thread's CPU time after -cpuclock), medians, an xorshift generator, pinning, a spinning
 * pool, and huge-page buffers as the Go arena makes them. Benchmarks only: the kernels never
 * include it (they allocate, spawn and time nothing).
 */
#ifndef KRT_BENCH_UTIL_H
#define KRT_BENCH_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_setaffinity_np, CPU_SET */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static clockid_t bench_clock = CLOCK_MONOTONIC;

static inline double now(void) {
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n), which it sorts. */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t bench_rs = 88172645463325252ull;
static inline uint64_t rnd(void) {
    bench_rs ^= bench_rs << 13;
    bench_rs ^= bench_rs >> 7;
    bench_rs ^= bench_rs << 17;
    return bench_rs;
}

static inline void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* A spinning pool of nthreads pinned threads: bench_run(job) runs job(ith, nthreads) on each,
 * the caller being thread 0 (pinned to CPU 0 by bench_pool_start), and returns when all have
 * finished. Spinning, not sleeping: a benchmark times the kernels, not the wake-ups. */
#define BENCH_MAXT 16
typedef void (*bench_job)(int ith, int nth);
static int nthreads = 1;
static bench_job bench_cur;
static _Atomic int bench_epoch, bench_done;
static pthread_t bench_tids[BENCH_MAXT];

static void *bench_worker(void *arg) {
    const int ith = (int)(intptr_t)arg;
    pin(ith);
    int seen = 0;
    for (;;) {
        int e;
        while ((e = atomic_load_explicit(&bench_epoch, memory_order_acquire)) == seen) __builtin_ia32_pause();
        seen = e;
        if (e < 0) return NULL;
        bench_cur(ith, nthreads);
        atomic_fetch_add_explicit(&bench_done, 1, memory_order_acq_rel);
    }
}

static inline void bench_pool_start(int n) {
    nthreads = n < 1 ? 1 : n > BENCH_MAXT ? BENCH_MAXT : n;
    pin(0);
    for (int i = 1; i < nthreads; i++) pthread_create(&bench_tids[i], NULL, bench_worker, (void *)(intptr_t)i);
}

static inline void bench_run(bench_job job) {
    bench_cur = job;
    atomic_store_explicit(&bench_done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&bench_epoch, 1, memory_order_release);
    job(0, nthreads);
    while (atomic_load_explicit(&bench_done, memory_order_acquire) != nthreads - 1) __builtin_ia32_pause();
}

static inline void bench_pool_stop(void) {
    atomic_store(&bench_epoch, -1);
    for (int i = 1; i < nthreads; i++) pthread_join(bench_tids[i], NULL);
}

/* Large buffers as the Go arena makes them: anonymous mmap, transparent huge pages. */
static inline size_t big_round(size_t bytes) { return (bytes + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1); }

static inline void *big_alloc(size_t bytes) {
    bytes = big_round(bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static inline void big_free(void *p, size_t bytes) { munmap(p, big_round(bytes)); }

#endif
