// The peer for benches/parallel.rs: STREAM triad and a dot product with clang's OpenMP offloading on libomptarget's
// x86_64 host plugin, the data already present. Prints "name GB/s" lines.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : (1L << 26);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *c = malloc(n * sizeof(float));
    for (long i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
    float s = 3.0f, dot = 0;
    double best_triad = 1e30, best_dot = 1e30, best_dot_simd = 1e30;
#pragma omp target data map(tofrom : a[0 : n]) map(to : b[0 : n], c[0 : n])
    {
        for (int r = 0; r < 5; r++) {
            double t = now_s();
#pragma omp target teams distribute parallel for
            for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
            t = now_s() - t;
            if (t < best_triad) best_triad = t;

            t = now_s();
            float d = 0;
#pragma omp target teams distribute parallel for reduction(+ : d) map(tofrom : d)
            for (long i = 0; i < n; i++) d += b[i] * c[i];
            t = now_s() - t;
            if (t < best_dot) best_dot = t;
            dot = d;

            t = now_s();
            d = 0;
#pragma omp target teams distribute parallel for simd reduction(+ : d) map(tofrom : d)
            for (long i = 0; i < n; i++) d += b[i] * c[i];
            t = now_s() - t;
            if (t < best_dot_simd) best_dot_simd = t;
        }
    }
    printf("triad %.2f\n", 3.0 * n * sizeof(float) / best_triad / 1e9);
    printf("dot %.2f\n", 2.0 * n * sizeof(float) / best_dot / 1e9);
    printf("dot_simd %.2f\n", 2.0 * n * sizeof(float) / best_dot_simd / 1e9);
    fprintf(stderr, "(dot = %g)\n", dot);
    return 0;
}
