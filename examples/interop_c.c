// The C half of `interop_c.rs`: a C library's OpenMP offloading, built by clang-22 for the x86_64 host device
// (`-fopenmp -fopenmp-targets=x86_64-pc-linux-gnu`), on the same libomptarget as the Rust regions under
// OFFLOAD_RUNTIME=llvm. Each function is what such a library would export.
#include <omp.h>

// `target enter data`: the array is mapped (and copied in) until `c_exit`.
void c_enter(double *a, int n) {
#pragma omp target enter data map(to: a[0:n])
}

// `target exit data` with release: the mapping stays while another holder (a Rust entry) has it.
void c_exit(double *a, int n) {
#pragma omp target exit data map(release: a[0:n])
}

// `target update from`: the device values, whoever wrote them, into the host array.
void c_update_from(double *a, int n) {
#pragma omp target update from(a[0:n])
}

// The device address libomptarget holds for the host array (null when it is not mapped).
void *c_mapped_ptr(const double *a) { return omp_get_mapped_ptr(a, omp_get_default_device()); }

int c_num_devices(void) { return omp_get_num_devices(); }

// A C target region: scales the array on the device, mapping it `tofrom` (nothing is copied where it is present).
void c_scale(double *a, int n, double k) {
#pragma omp target teams distribute parallel for map(tofrom: a[0:n])
  for (int i = 0; i < n; i++) a[i] *= k;
}
