// The peer for benches/parallel.rs: STREAM triad and a dot product with clang's OpenMP offloading on libomptarget's
// x86_64 host plugin, the data already present. Prints "ready", then answers each line it reads ("triad", "dot" or
// "dot_simd") with that kernel's best GB/s over a few runs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 5

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : (1L << 26);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *c = malloc(n * sizeof(float));
    for (long i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
    float s = 3.0f, sink = 0;
#pragma omp target data map(tofrom : a[0 : n]) map(to : b[0 : n], c[0 : n])
    {
        char what[64];
        printf("ready\n");
        fflush(stdout);
        while (fgets(what, sizeof what, stdin)) {
            what[strcspn(what, "\n")] = 0;
            double best = 1e30, bytes = 2.0 * n * sizeof(float);
            for (int r = 0; r < RUNS; r++) {
                double t = now_s();
                float d = 0;
                if (!strcmp(what, "triad")) {
                    bytes = 3.0 * n * sizeof(float);
#pragma omp target teams distribute parallel for
                    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
                } else if (!strcmp(what, "dot")) {
#pragma omp target teams distribute parallel for reduction(+ : d) map(tofrom : d)
                    for (long i = 0; i < n; i++) d += b[i] * c[i];
                } else if (!strcmp(what, "dot_simd")) {
#pragma omp target teams distribute parallel for simd reduction(+ : d) map(tofrom : d)
                    for (long i = 0; i < n; i++) d += b[i] * c[i];
                } else {
                    best = -1;
                    break;
                }
                t = now_s() - t;
                if (t < best) best = t;
                sink += d;
            }
            if (best < 0)
                printf("unknown measurement: %s\n", what);
            else
                printf("%.3f\n", bytes / best / 1e9);
            fflush(stdout);
        }
    }
    fprintf(stderr, "(sink = %g)\n", sink);
    return 0;
}
