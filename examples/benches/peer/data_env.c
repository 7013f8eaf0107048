// The peer for benches/data_env.rs: the same operations with clang's OpenMP offloading on libomptarget's x86_64
// host plugin. Prints "name ns_per_op" lines.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 1024
#define ITERS 200000

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double best_of(double (*f)(float **), float **a) {
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        double v = f(a);
        if (v < best) best = v;
    }
    return best;
}

// Enter plus exit of a buffer that is already present (an outer data region holds it).
static double enter_exit(float **a) {
    float *a0 = a[0];
    double t0 = now_ns();
    for (int i = 0; i < ITERS; i++) {
#pragma omp target data map(tofrom : a0[0 : N])
        {}
    }
    return (now_ns() - t0) / ITERS;
}

static double enter_exit_unstructured(float **a) {
    float *a0 = a[0];
    double t0 = now_ns();
    for (int i = 0; i < ITERS; i++) {
#pragma omp target enter data map(to : a0[0 : N])
#pragma omp target exit data map(release : a0[0 : N])
    }
    return (now_ns() - t0) / ITERS;
}

// A region launch with 16 mapped arguments, all present.
static double launch16(float **a) {
    float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5], *a6 = a[6], *a7 = a[7];
    float *a8 = a[8], *a9 = a[9], *a10 = a[10], *a11 = a[11], *a12 = a[12], *a13 = a[13], *a14 = a[14], *a15 = a[15];
    double t0 = now_ns();
    for (int i = 0; i < ITERS / 4; i++) {
#pragma omp target map(tofrom : a0[0 : N], a1[0 : N], a2[0 : N], a3[0 : N], a4[0 : N], a5[0 : N], a6[0 : N], \
                           a7[0 : N], a8[0 : N], a9[0 : N], a10[0 : N], a11[0 : N], a12[0 : N], a13[0 : N],  \
                           a14[0 : N], a15[0 : N])
        {
            a0[0] += a1[0] + a2[0] + a3[0] + a4[0] + a5[0] + a6[0] + a7[0] + a8[0] + a9[0] + a10[0] + a11[0] +
                     a12[0] + a13[0] + a14[0] + a15[0];
        }
    }
    return (now_ns() - t0) / (ITERS / 4);
}

int main(void) {
    float *a[16];
    for (int i = 0; i < 16; i++) a[i] = calloc(N, sizeof(float));
    float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5], *a6 = a[6], *a7 = a[7];
    float *a8 = a[8], *a9 = a[9], *a10 = a[10], *a11 = a[11], *a12 = a[12], *a13 = a[13], *a14 = a[14], *a15 = a[15];
#pragma omp target data map(tofrom : a0[0 : N], a1[0 : N], a2[0 : N], a3[0 : N], a4[0 : N], a5[0 : N], a6[0 : N], \
                                a7[0 : N], a8[0 : N], a9[0 : N], a10[0 : N], a11[0 : N], a12[0 : N], a13[0 : N], \
                                a14[0 : N], a15[0 : N])
    {
        printf("enter_exit %.1f\n", best_of(enter_exit, a));
        printf("enter_exit_unstructured %.1f\n", best_of(enter_exit_unstructured, a));
        printf("launch16 %.1f\n", best_of(launch16, a));
    }
    return 0;
}
