// The peer for benches/openmp.rs: the same kernels as OpenMP C programs write them, on libomptarget's x86_64 host
// plugin, the data already present (one `target data` around everything, as the Rust side's `target_data!`).
// Arguments: pi steps, Jacobi n (n x n), bodies, histogram n, histogram teams, histogram threads, STREAM n, runs.
// Prints "ready", then answers each line it reads: a kernel's name with its best time in seconds over the runs;
// "check" with one line of figures from one run of every kernel from a fresh start, for the Rust side to compare with
// its host reference (so a wrong kernel cannot look fast on either side).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BINS 256
#define SOFTENING 1e-9f
#define DT 0.01f
#define SCALAR 0.4

typedef struct {
    float x, y, z, w;
} float4;

static long steps, grid, bodies, hn, sn;
static int hteams, hthreads;
static double *ja, *janew, *sa, *sb, *sc;
static float4 *pos, *vel;
static unsigned *hdata, *hist;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// pi by the midpoint rule, the classic OpenMP example.
static double pi(void) {
    long n = steps;
    double step = 1.0 / (double)n, sum = 0.0;
#pragma omp target teams distribute parallel for simd reduction(+ : sum) map(tofrom : sum)
    for (long i = 0; i < n; i++) {
        double x = (i + 0.5) * step;
        sum += 4.0 / (1.0 + x * x);
    }
    return sum * step;
}

// One Jacobi sweep, the loop nest collapsed (without the residual, so that both forms do the same work as the Rust
// side's).
static void jacobi_collapse(void) {
    long n = grid, m = grid;
    double *a = ja, *anew = janew;
#pragma omp target teams distribute parallel for collapse(2)
    for (long j = 1; j < n - 1; j++)
        for (long i = 1; i < m - 1; i++)
            anew[j * m + i] = 0.25 * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
}

// The same sweep, rows shared out.
static void jacobi_rows(void) {
    long n = grid, m = grid;
    double *a = ja, *anew = janew;
#pragma omp target teams distribute parallel for
    for (long j = 1; j < n - 1; j++)
        for (long i = 1; i < m - 1; i++)
            anew[j * m + i] = 0.25 * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
}

// The all-pairs force step of mini-nbody (positions apart from velocities, which the threads write).
static void nbody(void) {
    int n = bodies;
    float4 *p = pos, *v = vel;
#pragma omp target teams distribute parallel for thread_limit(256)
    for (int i = 0; i < n; i++) {
        float fx = 0.0f, fy = 0.0f, fz = 0.0f;
        for (int j = 0; j < n; j++) {
            float dx = p[j].x - p[i].x, dy = p[j].y - p[i].y, dz = p[j].z - p[i].z;
            float d2 = dx * dx + dy * dy + dz * dz + SOFTENING;
            float inv = 1.0f / sqrtf(d2);
            float inv3 = inv * inv * inv;
            fx += dx * inv3;
            fy += dy * inv3;
            fz += dz * inv3;
        }
        v[i].x += DT * fx;
        v[i].y += DT * fy;
        v[i].z += DT * fz;
    }
}

// A histogram in team-shared memory (a variable of the teams region is shared by its parallel threads), combined
// into the global one with atomics.
static void histogram(void) {
    long n = hn;
    unsigned *data = hdata, *h = hist;
#pragma omp target teams num_teams(hteams) thread_limit(hthreads)
    {
        unsigned local[BINS];
        for (int b = 0; b < BINS; b++) local[b] = 0;
#pragma omp parallel
        {
            long threads = omp_get_num_threads(), tid = omp_get_thread_num();
            long all = omp_get_num_teams() * threads, me = omp_get_team_num() * threads + tid;
            long chunk = (n + all - 1) / all;
            long lo = me * chunk < n ? me * chunk : n, hi = lo + chunk < n ? lo + chunk : n;
            for (long i = lo; i < hi; i++) {
#pragma omp atomic update
                local[data[i] % BINS]++;
            }
#pragma omp barrier
            for (long b = tid; b < BINS; b += threads) {
#pragma omp atomic update
                h[b] += local[b];
            }
        }
    }
}

// BabelStream's OpenMP kernels, as OMPStream.cpp writes them for offloading.
static void copy(void) {
    long n = sn;
    double *a = sa, *c = sc;
#pragma omp target teams distribute parallel for simd
    for (long i = 0; i < n; i++) c[i] = a[i];
}

static void mul(void) {
    long n = sn;
    double *b = sb, *c = sc, scalar = SCALAR;
#pragma omp target teams distribute parallel for simd
    for (long i = 0; i < n; i++) b[i] = scalar * c[i];
}

static void add(void) {
    long n = sn;
    double *a = sa, *b = sb, *c = sc;
#pragma omp target teams distribute parallel for simd
    for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
}

static void triad(void) {
    long n = sn;
    double *a = sa, *b = sb, *c = sc, scalar = SCALAR;
#pragma omp target teams distribute parallel for simd
    for (long i = 0; i < n; i++) a[i] = b[i] + scalar * c[i];
}

static double dot(void) {
    long n = sn;
    double *a = sa, *b = sb, sum = 0.0;
#pragma omp target teams distribute parallel for simd reduction(+ : sum) map(tofrom : sum)
    for (long i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static void stream_init(void) {
    for (long i = 0; i < sn; i++) {
        sa[i] = 0.1;
        sb[i] = 0.2;
        sc[i] = 0.0;
    }
}

static void minmax(const double *x, long n, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (long i = 0; i < n; i++) {
        *lo = x[i] < *lo ? x[i] : *lo;
        *hi = x[i] > *hi ? x[i] : *hi;
    }
}

// One run of every kernel from the initial state: pi; the sum of each Jacobi form's interior (after zeroing it); the
// sum of the velocities' magnitudes per component after one step from rest; the histogram weighted by bin number
// and its total; STREAM's copy, mul, add, triad in order, then each array's smallest and largest element and the dot.
static void check(void) {
    long m = grid;
    printf("%.17g", pi());
    void (*forms[2])(void) = {jacobi_collapse, jacobi_rows};
    for (int f = 0; f < 2; f++) {
        memset(janew, 0, grid * grid * sizeof(double));
#pragma omp target update to(janew[0 : grid * grid])
        forms[f]();
        double sum = 0.0;
#pragma omp target update from(janew[0 : grid * grid])
        for (long j = 1; j < grid - 1; j++)
            for (long i = 1; i < m - 1; i++) sum += janew[j * m + i];
        printf(" %.17g", sum);
    }
    memset(vel, 0, bodies * sizeof(float4));
#pragma omp target update to(vel[0 : bodies])
    nbody();
#pragma omp target update from(vel[0 : bodies])
    double vs = 0.0;
    for (long i = 0; i < bodies; i++) vs += fabs(vel[i].x) + fabs(vel[i].y) + fabs(vel[i].z);
    printf(" %.9g", vs);
    memset(hist, 0, BINS * sizeof(unsigned));
#pragma omp target update to(hist[0 : BINS])
    histogram();
#pragma omp target update from(hist[0 : BINS])
    double weighted = 0.0, total = 0.0;
    for (int b = 0; b < BINS; b++) {
        weighted += (double)hist[b] * (b + 1);
        total += hist[b];
    }
    printf(" %.17g %.17g", weighted, total);
    stream_init();
#pragma omp target update to(sa[0 : sn], sb[0 : sn], sc[0 : sn])
    copy();
    mul();
    add();
    triad();
    double d = dot(), lo, hi;
#pragma omp target update from(sa[0 : sn], sb[0 : sn], sc[0 : sn])
    double *arrays[3] = {sa, sb, sc};
    for (int k = 0; k < 3; k++) {
        minmax(arrays[k], sn, &lo, &hi);
        printf(" %.17g %.17g", lo, hi);
    }
    printf(" %.17g\n", d);
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: %s steps jacobi_n bodies hist_n hist_teams hist_threads stream_n runs\n", argv[0]);
        return 2;
    }
    steps = atol(argv[1]);
    grid = atol(argv[2]);
    bodies = atol(argv[3]);
    hn = atol(argv[4]);
    hteams = atoi(argv[5]);
    hthreads = atoi(argv[6]);
    sn = atol(argv[7]);
    int runs = atoi(argv[8]);

    // The same inputs as the Rust side builds.
    ja = malloc(grid * grid * sizeof(double));
    janew = calloc(grid * grid, sizeof(double));
    for (long k = 0; k < grid * grid; k++) ja[k] = (double)((k * 7919) % 1009) / 1009.0;
    pos = malloc(bodies * sizeof(float4));
    vel = calloc(bodies, sizeof(float4));
    for (long i = 0; i < bodies; i++) {
        pos[i].x = (float)((i * 7919) % 1000) / 100.0f;
        pos[i].y = (float)((i * 104729) % 1000) / 100.0f;
        pos[i].z = (float)((i * 1299709) % 1000) / 100.0f;
        pos[i].w = 1.0f;
    }
    hdata = malloc(hn * sizeof(unsigned));
    hist = calloc(BINS, sizeof(unsigned));
    for (long i = 0; i < hn; i++) hdata[i] = (unsigned)i * 2654435761u >> 7;
    sa = malloc(sn * sizeof(double));
    sb = malloc(sn * sizeof(double));
    sc = malloc(sn * sizeof(double));
    stream_init();

    double sink = 0.0;
#pragma omp target data map(to : ja[0 : grid * grid], pos[0 : bodies], hdata[0 : hn])                                    \
    map(tofrom : janew[0 : grid * grid], vel[0 : bodies], hist[0 : BINS], sa[0 : sn], sb[0 : sn], sc[0 : sn])
    {
        char what[64];
        printf("ready\n");
        fflush(stdout);
        while (fgets(what, sizeof what, stdin)) {
            what[strcspn(what, "\n")] = 0;
            if (!strcmp(what, "check")) {
                check();
                fflush(stdout);
                continue;
            }
            double best = 1e30;
            for (int r = 0; r < runs; r++) {
                double t = now_s();
                if (!strcmp(what, "pi"))
                    sink += pi();
                else if (!strcmp(what, "jacobi_collapse"))
                    jacobi_collapse();
                else if (!strcmp(what, "jacobi_rows"))
                    jacobi_rows();
                else if (!strcmp(what, "nbody"))
                    nbody();
                else if (!strcmp(what, "histogram"))
                    histogram();
                else if (!strcmp(what, "copy"))
                    copy();
                else if (!strcmp(what, "mul"))
                    mul();
                else if (!strcmp(what, "add"))
                    add();
                else if (!strcmp(what, "triad"))
                    triad();
                else if (!strcmp(what, "dot"))
                    sink += dot();
                else {
                    best = -1;
                    break;
                }
                t = now_s() - t;
                if (t < best) best = t;
            }
            if (best < 0)
                printf("unknown measurement: %s\n", what);
            else
                printf("%.9f\n", best);
            fflush(stdout);
        }
    }
    fprintf(stderr, "(sink = %g)\n", sink);
    return 0;
}
