// The peer for benches/openmp.rs: the same kernels as OpenMP C programs write them, on libomptarget's x86_64 host
// plugin, the data already present (one `target data` around everything, as the Rust side's `target_data!`).
// Arguments: pi steps, Jacobi n (n x n), bodies, histogram n, histogram teams, histogram threads, STREAM n, runs,
// hotspot3D nx ny nz, SpMV rows, XSBench lookups, miniBUDE poses.
// Prints "ready", then answers each line it reads: a kernel's name with its best time in seconds over the runs;
// "check" with one line of figures from one run of every kernel from a fresh start, for the Rust side to compare with
// its host reference (so a wrong kernel cannot look fast on either side).
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BINS 256
#define SOFTENING 1e-9f
#define DT 0.01f
#define SCALAR 0.4
// hotspot3D's coefficients (Rodinia computes them from the chip's size; fixed here, cc = 1 - (2ce + 2cn + 3ct)).
#define HS_CE 0.1f
#define HS_CN 0.1f
#define HS_CT 0.05f
#define HS_CC 0.45f
#define HS_STEP_DIV_CAP 0.5f
#define HS_AMB 80.0f
// XSBench's "small" problem's 68 nuclides and 12 materials, with fewer grid points per nuclide (11303 there).
#define XS_ISOTOPES 68
#define XS_GRIDPOINTS 1000
#define XS_MATERIALS 12
#define XS_MAX_NUCS 34
#define XS_SEED 1070ULL
// miniBUDE's bm1 deck's shape (938 protein atoms, 26 ligand atoms, 34 force-field types), synthetic coordinates.
#define PPWI 4
#define NATPRO 938
#define NATLIG 26
#define NTYPES 34
#define ZERO 0.0f
#define QUARTER 0.25f
#define HALF 0.5f
#define ONE 1.0f
#define TWO 2.0f
#define FOUR 4.0f
#define CNSTNT 45.0f
#define HBTYPE_F 70
#define HBTYPE_E 69
#define HARDNESS 38.0f
#define NPNPDIST 5.5f
#define NPPDIST 1.0f

typedef struct {
    float x, y, z, w;
} float4;

typedef struct {
    double energy, total_xs, elastic_xs, absorbtion_xs, fission_xs, nu_fission_xs;
} NuclideGridPoint;

typedef struct {
    float x, y, z;
    int type;
} Atom;

typedef struct {
    int hbtype;
    float radius, hphb, elsc;
} FFParams;

static long steps, grid, bodies, hn, sn;
static int hteams, hthreads;
static double *ja, *janew, *sa, *sb, *sc;
static float4 *pos, *vel;
static unsigned *hdata, *hist;
static int hs_nx, hs_ny, hs_nz, sp_n, xs_lookups, nposes;
static float *hs_power, *hs_in, *hs_out;
static int *sp_row, *sp_col;
static double *sp_val, *sp_x, *sp_y;
static int *xs_num_nucs, *xs_mats, *xs_index;
static double *xs_concs, *xs_egrid;
static NuclideGridPoint *xs_grid;
static unsigned long *xs_verification;
static Atom *protein, *ligand;
static FFParams *forcefield;
static float *poses, *energies;

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

// One time step of hotspot3D, as HeCBench's OpenMP port shares it out: the (j, i) plane collapsed, each iteration
// walking its column through the layers, the neighbours clamped at the faces (Rodinia's 7-point stencil).
static void hotspot3d(void) {
    int nx = hs_nx, ny = hs_ny, nz = hs_nz;
    float *p = hs_power, *tin = hs_in, *tout = hs_out;
#pragma omp target teams distribute parallel for collapse(2)
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            int plane = nx * ny;
            for (int k = 0; k < nz; k++) {
                int c = k * plane + j * nx + i;
                int w = i == 0 ? c : c - 1, e = i == nx - 1 ? c : c + 1;
                int n = j == 0 ? c : c - nx, s = j == ny - 1 ? c : c + nx;
                int b = k == 0 ? c : c - plane, t = k == nz - 1 ? c : c + plane;
                tout[c] = tin[c] * HS_CC + tin[n] * HS_CN + tin[s] * HS_CN + tin[e] * HS_CE + tin[w] * HS_CE +
                          tin[t] * HS_CT + tin[b] * HS_CT + HS_STEP_DIV_CAP * p[c] + HS_CT * HS_AMB;
            }
        }
}

// y = A x, A in CSR, the rows shared out.
static void spmv(void) {
    int n = sp_n;
    int *row_ptr = sp_row, *col = sp_col;
    double *val = sp_val, *x = sp_x, *y = sp_y;
#pragma omp target teams distribute parallel for
    for (int row = 0; row < n; row++) {
        double sum = 0.0;
        for (int j = row_ptr[row]; j < row_ptr[row + 1]; j++) sum += val[j] * x[col[j]];
        y[row] = sum;
    }
}

// XSBench's event-based macroscopic cross-section lookup on the unionized grid (Simulation.c of its OpenMP offload
// version, the grid type fixed to unionized).
#pragma omp declare target
static uint64_t fast_forward_LCG(uint64_t seed, uint64_t n) {
    const uint64_t m = 9223372036854775808ULL;
    uint64_t a = 2806196910506780709ULL, c = 1ULL;
    n = n % m;
    uint64_t a_new = 1, c_new = 0;
    while (n > 0) {
        if (n & 1) {
            a_new *= a;
            c_new = c_new * a + c;
        }
        c *= (a + 1);
        a *= a;
        n >>= 1;
    }
    return (a_new * seed + c_new) % m;
}

static double LCG_random_double(uint64_t *seed) {
    const uint64_t m = 9223372036854775808ULL, a = 2806196910506780709ULL, c = 1ULL;
    *seed = (a * (*seed) + c) % m;
    return (double)(*seed) / (double)m;
}

static int pick_mat(uint64_t *seed) {
    double dist[12];
    dist[0] = 0.140;
    dist[1] = 0.052;
    dist[2] = 0.275;
    dist[3] = 0.134;
    dist[4] = 0.154;
    dist[5] = 0.064;
    dist[6] = 0.066;
    dist[7] = 0.055;
    dist[8] = 0.008;
    dist[9] = 0.015;
    dist[10] = 0.025;
    dist[11] = 0.013;
    double roll = LCG_random_double(seed);
    for (int i = 0; i < 12; i++) {
        double running = 0;
        for (int j = i; j > 0; j--) running += dist[j];
        if (roll < running) return i;
    }
    return 0;
}

static long grid_search(long n, double quarry, const double *A) {
    long lowerLimit = 0, upperLimit = n - 1, examinationPoint, length = upperLimit - lowerLimit;
    while (length > 1) {
        examinationPoint = lowerLimit + (length / 2);
        if (A[examinationPoint] > quarry)
            upperLimit = examinationPoint;
        else
            lowerLimit = examinationPoint;
        length = upperLimit - lowerLimit;
    }
    return lowerLimit;
}

static void calculate_micro_xs(double p_energy, int nuc, long n_isotopes, long n_gridpoints, const int *index_data,
                               const NuclideGridPoint *nuclide_grids, long idx, double *xs_vector) {
    const NuclideGridPoint *low, *high;
    if (index_data[idx * n_isotopes + nuc] == n_gridpoints - 1)
        low = &nuclide_grids[nuc * n_gridpoints + index_data[idx * n_isotopes + nuc] - 1];
    else
        low = &nuclide_grids[nuc * n_gridpoints + index_data[idx * n_isotopes + nuc]];
    high = low + 1;
    double f = (high->energy - p_energy) / (high->energy - low->energy);
    xs_vector[0] = high->total_xs - f * (high->total_xs - low->total_xs);
    xs_vector[1] = high->elastic_xs - f * (high->elastic_xs - low->elastic_xs);
    xs_vector[2] = high->absorbtion_xs - f * (high->absorbtion_xs - low->absorbtion_xs);
    xs_vector[3] = high->fission_xs - f * (high->fission_xs - low->fission_xs);
    xs_vector[4] = high->nu_fission_xs - f * (high->nu_fission_xs - low->nu_fission_xs);
}

static void calculate_macro_xs(double p_energy, int mat, long n_isotopes, long n_gridpoints, const int *num_nucs,
                               const double *concs, const double *egrid, const int *index_data,
                               const NuclideGridPoint *nuclide_grids, const int *mats, double *macro_xs_vector,
                               int max_num_nucs) {
    for (int k = 0; k < 5; k++) macro_xs_vector[k] = 0;
    long idx = grid_search(n_isotopes * n_gridpoints, p_energy, egrid);
    for (int j = 0; j < num_nucs[mat]; j++) {
        double xs_vector[5];
        int p_nuc = mats[mat * max_num_nucs + j];
        double conc = concs[mat * max_num_nucs + j];
        calculate_micro_xs(p_energy, p_nuc, n_isotopes, n_gridpoints, index_data, nuclide_grids, idx, xs_vector);
        for (int k = 0; k < 5; k++) macro_xs_vector[k] += xs_vector[k] * conc;
    }
}
#pragma omp end declare target

static void xsbench(void) {
    int lookups = xs_lookups, max_num_nucs = XS_MAX_NUCS;
    long n_isotopes = XS_ISOTOPES, n_gridpoints = XS_GRIDPOINTS;
    int *num_nucs = xs_num_nucs, *mats = xs_mats, *index_grid = xs_index;
    double *concs = xs_concs, *egrid = xs_egrid;
    NuclideGridPoint *nuclide_grid = xs_grid;
    unsigned long *verification = xs_verification;
#pragma omp target teams distribute parallel for
    for (int i = 0; i < lookups; i++) {
        uint64_t seed = fast_forward_LCG(XS_SEED, 2 * i);
        double p_energy = LCG_random_double(&seed);
        int mat = pick_mat(&seed);
        double macro_xs_vector[5] = {0};
        calculate_macro_xs(p_energy, mat, n_isotopes, n_gridpoints, num_nucs, concs, egrid, index_grid, nuclide_grid,
                           mats, macro_xs_vector, max_num_nucs);
        double max = -1.0;
        int max_idx = 0;
        for (int j = 0; j < 5; j++) {
            if (macro_xs_vector[j] > max) {
                max = macro_xs_vector[j];
                max_idx = j;
            }
        }
        verification[i] = max_idx + 1;
    }
}

// miniBUDE's fasten_main (its OpenMP port), PPWI poses per work item.
static void fasten(void) {
    int ng = nposes / PPWI, np = nposes, natlig = NATLIG, natpro = NATPRO;
    const Atom *protein_molecule = protein, *ligand_molecule = ligand;
    const FFParams *ff = forcefield;
    const float *transforms_0 = poses, *transforms_1 = poses + np, *transforms_2 = poses + 2 * np,
                *transforms_3 = poses + 3 * np, *transforms_4 = poses + 4 * np, *transforms_5 = poses + 5 * np;
    float *etotals = energies;
#pragma omp target teams distribute parallel for
    for (int group = 0; group < ng; group++) {
        float transform[PPWI][3][4];
        float etot[PPWI];
#pragma omp simd
        for (int l = 0; l < PPWI; l++) {
            int ix = group * PPWI + l;
            const float sx = sinf(transforms_0[ix]), cx = cosf(transforms_0[ix]);
            const float sy = sinf(transforms_1[ix]), cy = cosf(transforms_1[ix]);
            const float sz = sinf(transforms_2[ix]), cz = cosf(transforms_2[ix]);
            transform[l][0][0] = cy * cz;
            transform[l][0][1] = sx * sy * cz - cx * sz;
            transform[l][0][2] = cx * sy * cz + sx * sz;
            transform[l][0][3] = transforms_3[ix];
            transform[l][1][0] = cy * sz;
            transform[l][1][1] = sx * sy * sz + cx * cz;
            transform[l][1][2] = cx * sy * sz - sx * cz;
            transform[l][1][3] = transforms_4[ix];
            transform[l][2][0] = -sy;
            transform[l][2][1] = sx * cy;
            transform[l][2][2] = cx * cy;
            transform[l][2][3] = transforms_5[ix];
            etot[l] = ZERO;
        }
        for (int il = 0; il < natlig; il++) {
            const Atom l_atom = ligand_molecule[il];
            const FFParams l_params = ff[l_atom.type];
            const int lhphb_ltz = l_params.hphb < ZERO;
            const int lhphb_gtz = l_params.hphb > ZERO;
            float lpos_x[PPWI], lpos_y[PPWI], lpos_z[PPWI];
#pragma omp simd
            for (int l = 0; l < PPWI; l++) {
                lpos_x[l] = transform[l][0][3] + l_atom.x * transform[l][0][0] + l_atom.y * transform[l][0][1] +
                            l_atom.z * transform[l][0][2];
                lpos_y[l] = transform[l][1][3] + l_atom.x * transform[l][1][0] + l_atom.y * transform[l][1][1] +
                            l_atom.z * transform[l][1][2];
                lpos_z[l] = transform[l][2][3] + l_atom.x * transform[l][2][0] + l_atom.y * transform[l][2][1] +
                            l_atom.z * transform[l][2][2];
            }
            for (int ip = 0; ip < natpro; ip++) {
                const Atom p_atom = protein_molecule[ip];
                const FFParams p_params = ff[p_atom.type];
                const float radij = p_params.radius + l_params.radius;
                const float r_radij = ONE / radij;
                const float elcdst = (p_params.hbtype == HBTYPE_F && l_params.hbtype == HBTYPE_F) ? FOUR : TWO;
                const float elcdst1 = (p_params.hbtype == HBTYPE_F && l_params.hbtype == HBTYPE_F) ? QUARTER : HALF;
                const int type_E = ((p_params.hbtype == HBTYPE_E || l_params.hbtype == HBTYPE_E));
                const int phphb_ltz = p_params.hphb < ZERO;
                const int phphb_gtz = p_params.hphb > ZERO;
                const int phphb_nz = p_params.hphb != ZERO;
                const float p_hphb = p_params.hphb * (phphb_ltz && lhphb_gtz ? -ONE : ONE);
                const float l_hphb = l_params.hphb * (phphb_gtz && lhphb_ltz ? -ONE : ONE);
                const float distdslv = (phphb_ltz ? (lhphb_ltz ? NPNPDIST : NPPDIST) : (lhphb_ltz ? NPPDIST : -FLT_MAX));
                const float r_distdslv = ONE / distdslv;
                const float chrg_init = l_params.elsc * p_params.elsc;
                const float dslv_init = p_hphb + l_hphb;
#pragma omp simd
                for (int l = 0; l < PPWI; l++) {
                    const float x = lpos_x[l] - p_atom.x;
                    const float y = lpos_y[l] - p_atom.y;
                    const float z = lpos_z[l] - p_atom.z;
                    const float distij = sqrtf(x * x + y * y + z * z);
                    const float distbb = distij - radij;
                    const int zone1 = (distbb < ZERO);
                    etot[l] += (ONE - (distij * r_radij)) * (zone1 ? 2 * HARDNESS : ZERO);
                    float chrg_e = chrg_init * ((zone1 ? 1 : (ONE - distbb * elcdst1)) * (distbb < elcdst ? 1 : ZERO));
                    const float neg_chrg_e = -fabsf(chrg_e);
                    chrg_e = type_E ? neg_chrg_e : chrg_e;
                    etot[l] += chrg_e * CNSTNT;
                    const float coeff = (ONE - (distbb * r_distdslv));
                    float dslv_e = dslv_init * ((distbb < distdslv && phphb_nz) ? 1 : ZERO);
                    dslv_e *= (zone1 ? 1 : coeff);
                    etot[l] += dslv_e;
                }
            }
        }
#pragma omp simd
        for (int l = 0; l < PPWI; l++) etotals[group * PPWI + l] = etot[l] * HALF;
    }
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

// The sum of x[i] * (i % 13 + 1): a value moved to another element changes it.
static double weighted_f(const float *x, long n) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += (double)x[i] * (double)(i % 13 + 1);
    return s;
}

static double weighted_d(const double *x, long n) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += x[i] * (double)(i % 13 + 1);
    return s;
}

// A deterministic fraction in [0, 1), the inputs' building block (the Rust side has the same).
static double unit(long k, long p) { return (double)((k * p) % 1009) / 1009.0; }

// The inputs of hotspot3D, SpMV, XSBench and miniBUDE, as the Rust side builds them.
static void new_inputs(void) {
    long cells = (long)hs_nx * hs_ny * hs_nz;
    hs_power = malloc(cells * sizeof(float));
    hs_in = malloc(cells * sizeof(float));
    hs_out = calloc(cells, sizeof(float));
    for (long c = 0; c < cells; c++) {
        hs_in[c] = (float)(300.0 + 40.0 * unit(c, 7919));
        hs_power[c] = (float)(0.5 * unit(c, 104729));
    }

    sp_row = malloc((sp_n + 1L) * sizeof(int));
    sp_row[0] = 0;
    for (long r = 0; r < sp_n; r++) sp_row[r + 1] = sp_row[r] + 10 + (int)((r * 7919) % 21);
    long nnz = sp_row[sp_n];
    sp_col = malloc(nnz * sizeof(int));
    sp_val = malloc(nnz * sizeof(double));
    for (long j = 0; j < nnz; j++) {
        sp_col[j] = (int)((((uint64_t)j * 0x9E3779B97F4A7C15ULL) >> 32) % (uint64_t)sp_n);
        sp_val[j] = unit(j, 7919) - 0.5;
    }
    sp_x = malloc(sp_n * sizeof(double));
    sp_y = calloc(sp_n, sizeof(double));
    for (long i = 0; i < sp_n; i++) sp_x[i] = unit(i, 104729);

    // Nuclide n's grid point g lies in [g * I + n, g * I + n + 1/2) / (I * G), so the unionized grid is every point in
    // the order g * I + n, and the index grid (each nuclide's last point at or below a unionized energy) is closed.
    long I = XS_ISOTOPES, G = XS_GRIDPOINTS;
    xs_grid = malloc(I * G * sizeof(NuclideGridPoint));
    xs_egrid = malloc(I * G * sizeof(double));
    xs_index = malloc(I * G * I * sizeof(int));
    for (long n = 0; n < I; n++)
        for (long g = 0; g < G; g++) {
            long k = n * G + g;
            NuclideGridPoint pt = {(g * I + n + 0.5 * unit(k, 7919)) / (double)(I * G), unit(k, 104729),
                                   unit(k, 1299709), unit(k, 15485863), unit(k, 32452843), unit(k, 49979687)};
            xs_grid[k] = pt;
            xs_egrid[g * I + n] = pt.energy;
        }
    for (long g = 0; g < G; g++)
        for (long n = 0; n < I; n++)
            for (long m = 0; m < I; m++) xs_index[(g * I + n) * I + m] = m <= n ? g : (g > 0 ? g - 1 : 0);
    static const int num_nucs[XS_MATERIALS] = {34, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9};
    xs_num_nucs = malloc(XS_MATERIALS * sizeof(int));
    xs_mats = calloc(XS_MATERIALS * XS_MAX_NUCS, sizeof(int));
    xs_concs = calloc(XS_MATERIALS * XS_MAX_NUCS, sizeof(double));
    for (long m = 0; m < XS_MATERIALS; m++) {
        xs_num_nucs[m] = num_nucs[m];
        for (long j = 0; j < num_nucs[m]; j++) {
            xs_mats[m * XS_MAX_NUCS + j] = (int)((m * 7 + j * 13) % I);
            xs_concs[m * XS_MAX_NUCS + j] = unit(m * XS_MAX_NUCS + j, 7919);
        }
    }
    xs_verification = calloc(xs_lookups, sizeof(unsigned long));

    protein = malloc(NATPRO * sizeof(Atom));
    for (long i = 0; i < NATPRO; i++) {
        Atom a = {(float)(30.0 * unit(i, 7919) - 15.0), (float)(30.0 * unit(i, 104729) - 15.0),
                  (float)(30.0 * unit(i, 1299709) - 15.0), (int)((i * 7) % NTYPES)};
        protein[i] = a;
    }
    ligand = malloc(NATLIG * sizeof(Atom));
    for (long i = 0; i < NATLIG; i++) {
        Atom a = {(float)(6.0 * unit(i, 15485863) - 3.0), (float)(6.0 * unit(i, 32452843) - 3.0),
                  (float)(6.0 * unit(i, 49979687) - 3.0), (int)((i * 11) % NTYPES)};
        ligand[i] = a;
    }
    forcefield = malloc(NTYPES * sizeof(FFParams));
    for (long t = 0; t < NTYPES; t++) {
        FFParams f = {t % 3 == 0 ? HBTYPE_F : t % 3 == 1 ? HBTYPE_E : 78, (float)(1.5 + 0.5 * unit(t, 7919)),
                      t % 5 == 0 ? 0.0f : (float)(2.0 * unit(t, 104729) - 1.0), (float)(unit(t, 1299709) - 0.5)};
        forcefield[t] = f;
    }
    poses = malloc(6L * nposes * sizeof(float));
    for (long k = 0; k < 6; k++)
        for (long ix = 0; ix < nposes; ix++)
            poses[k * nposes + ix] = k < 3 ? (float)(6.283185307179586 * unit(ix * 6 + k, 7919))
                                           : (float)(4.0 * unit(ix * 6 + k, 104729) - 2.0);
    energies = calloc(nposes, sizeof(float));
}

// One run of every kernel from the initial state: pi; the sum of each Jacobi form's interior (after zeroing it); the
// sum of the velocities' magnitudes per component after one step from rest; the histogram weighted by bin number
// and its total; STREAM's copy, mul, add, triad in order, then each array's smallest and largest element and the dot;
// hotspot3D's new temperatures, weighted (`weighted_f`); SpMV's y, weighted; the sum of XSBench's verification values;
// miniBUDE's energies, weighted.
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
    printf(" %.17g", d);
    long cells = (long)hs_nx * hs_ny * hs_nz;
    memset(hs_out, 0, cells * sizeof(float));
#pragma omp target update to(hs_out[0 : cells])
    hotspot3d();
#pragma omp target update from(hs_out[0 : cells])
    printf(" %.17g", weighted_f(hs_out, cells));
    memset(sp_y, 0, sp_n * sizeof(double));
#pragma omp target update to(sp_y[0 : sp_n])
    spmv();
#pragma omp target update from(sp_y[0 : sp_n])
    printf(" %.17g", weighted_d(sp_y, sp_n));
    memset(xs_verification, 0, xs_lookups * sizeof(unsigned long));
#pragma omp target update to(xs_verification[0 : xs_lookups])
    xsbench();
#pragma omp target update from(xs_verification[0 : xs_lookups])
    double vsum = 0.0;
    for (long i = 0; i < xs_lookups; i++) vsum += xs_verification[i];
    printf(" %.17g", vsum);
    memset(energies, 0, nposes * sizeof(float));
#pragma omp target update to(energies[0 : nposes])
    fasten();
#pragma omp target update from(energies[0 : nposes])
    printf(" %.17g\n", weighted_f(energies, nposes));
}

int main(int argc, char **argv) {
    if (argc != 15) {
        fprintf(stderr,
                "usage: %s steps jacobi_n bodies hist_n hist_teams hist_threads stream_n runs hotspot_nx hotspot_ny "
                "hotspot_nz spmv_rows xsbench_lookups poses\n",
                argv[0]);
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
    hs_nx = atoi(argv[9]);
    hs_ny = atoi(argv[10]);
    hs_nz = atoi(argv[11]);
    sp_n = atoi(argv[12]);
    xs_lookups = atoi(argv[13]);
    nposes = atoi(argv[14]);

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
    new_inputs();
    long cells = (long)hs_nx * hs_ny * hs_nz, nnz = sp_row[sp_n], xs_points = (long)XS_ISOTOPES * XS_GRIDPOINTS;

    double sink = 0.0;
#pragma omp target data map(to : ja[0 : grid * grid], pos[0 : bodies], hdata[0 : hn])                                    \
    map(tofrom : janew[0 : grid * grid], vel[0 : bodies], hist[0 : BINS], sa[0 : sn], sb[0 : sn], sc[0 : sn])       \
    map(to : hs_power[0 : cells], hs_in[0 : cells], sp_row[0 : sp_n + 1], sp_col[0 : nnz], sp_val[0 : nnz],             \
        sp_x[0 : sp_n], xs_num_nucs[0 : XS_MATERIALS], xs_concs[0 : XS_MATERIALS * XS_MAX_NUCS],                          \
        xs_mats[0 : XS_MATERIALS * XS_MAX_NUCS], xs_egrid[0 : xs_points], xs_index[0 : xs_points * XS_ISOTOPES],          \
        xs_grid[0 : xs_points], protein[0 : NATPRO], ligand[0 : NATLIG], forcefield[0 : NTYPES], poses[0 : 6 * nposes]) \
    map(tofrom : hs_out[0 : cells], sp_y[0 : sp_n], xs_verification[0 : xs_lookups], energies[0 : nposes])
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
                else if (!strcmp(what, "hotspot3d"))
                    hotspot3d();
                else if (!strcmp(what, "spmv"))
                    spmv();
                else if (!strcmp(what, "xsbench"))
                    xsbench();
                else if (!strcmp(what, "fasten"))
                    fasten();
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
