//! The four ports of public OpenMP programs, each as its C original shares the work out: hotspot3D, a CSR sparse
//! matrix-vector product, XSBench's event-based lookups and miniBUDE's `fasten`, with their sizes and constants.

use offload::{declare_target, target, Mapper};

pub const HS_NX: usize = 512;
pub const HS_NY: usize = 512;
pub const HS_NZ: usize = 8;
// hotspot3D's coefficients (Rodinia computes them from the chip's size; fixed here, cc = 1 - (2ce + 2cn + 3ct)).
#[declare_target]
pub const HS_CE: f32 = 0.1;
#[declare_target]
pub const HS_CN: f32 = 0.1;
#[declare_target]
pub const HS_CT: f32 = 0.05;
#[declare_target]
pub const HS_CC: f32 = 0.45;
#[declare_target]
pub const HS_STEP_DIV_CAP: f32 = 0.5;
#[declare_target]
pub const HS_AMB: f32 = 80.0;
pub const SPMV_ROWS: usize = 1 << 19;
// XSBench's "small" problem's 68 nuclides and 12 materials, with fewer grid points per nuclide (11303 there).
pub const XS_LOOKUPS: usize = 250_000;
pub const XS_ISOTOPES: usize = 68;
pub const XS_GRIDPOINTS: usize = 1000;
pub const XS_MATERIALS: usize = 12;
pub const XS_MAX_NUCS: usize = 34;
#[declare_target]
pub const XS_SEED: u64 = 1070;
// miniBUDE's bm1 deck's shape (938 protein atoms, 26 ligand atoms, 34 force-field types), synthetic coordinates.
pub const POSES: usize = 1024;
#[declare_target]
pub const PPWI: usize = 4;
pub const NATPRO: usize = 938;
pub const NATLIG: usize = 26;
pub const NTYPES: usize = 34;
#[declare_target]
pub const HBTYPE_F: i32 = 70;
#[declare_target]
pub const HBTYPE_E: i32 = 69;
#[declare_target]
pub const HARDNESS: f32 = 38.0;
#[declare_target]
pub const NPNPDIST: f32 = 5.5;
#[declare_target]
pub const NPPDIST: f32 = 1.0;
#[declare_target]
pub const CNSTNT: f32 = 45.0;

/// One time step of hotspot3D, as HeCBench's OpenMP port shares it out: the `(j, i)` plane collapsed, each iteration
/// walking its column through the layers, the neighbours clamped at the faces (Rodinia's 7-point stencil).
#[target(teams_distribute_parallel_for, collapse(2), if(on_device))]
pub fn hotspot3d(
    on_device: bool,
    nx: usize,
    ny: usize,
    nz: usize,
    power: &[f32],
    t_in: &[f32],
    t_out: &mut [f32],
) {
    let plane = nx * ny;
    for j in 0..ny {
        for i in 0..nx {
            for k in 0..nz {
                let c = k * plane + j * nx + i;
                let w = if i == 0 { c } else { c - 1 };
                let e = if i == nx - 1 { c } else { c + 1 };
                let n = if j == 0 { c } else { c - nx };
                let s = if j == ny - 1 { c } else { c + nx };
                let b = if k == 0 { c } else { c - plane };
                let t = if k == nz - 1 { c } else { c + plane };
                t_out[k * plane + j * nx + i] = t_in[c] * HS_CC
                    + t_in[n] * HS_CN
                    + t_in[s] * HS_CN
                    + t_in[e] * HS_CE
                    + t_in[w] * HS_CE
                    + t_in[t] * HS_CT
                    + t_in[b] * HS_CT
                    + HS_STEP_DIV_CAP * power[c]
                    + HS_CT * HS_AMB;
            }
        }
    }
}

/// `y = A x`, `A` in CSR (C's `int` indices), the rows shared out.
#[target(teams_distribute_parallel_for, if(on_device))]
pub fn spmv(on_device: bool, row_ptr: &[i32], col: &[i32], val: &[f64], x: &[f64], y: &mut [f64]) {
    for row in 0..y.len() {
        let (lo, hi) = (row_ptr[row] as usize, row_ptr[row + 1] as usize);
        let mut sum = 0.0;
        for (v, &c) in val[lo..hi].iter().zip(&col[lo..hi]) {
            sum += v * x[c as usize];
        }
        y[row] = sum;
    }
}

/// XSBench's inputs that the lookups read by value (`Inputs` there).
#[declare_target]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct XsInputs {
    pub lookups: usize,
    pub n_isotopes: usize,
    pub n_gridpoints: usize,
    pub max_num_nucs: usize,
}

#[declare_target]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct NuclideGridPoint {
    pub energy: f64,
    pub total_xs: f64,
    pub elastic_xs: f64,
    pub absorbtion_xs: f64,
    pub fission_xs: f64,
    pub nu_fission_xs: f64,
}

/// XSBench's random numbers: a 63-bit LCG, jumped ahead `n` steps in log time.
pub fn fast_forward_lcg(seed: u64, n: u64) -> u64 {
    const M: u64 = 1 << 63;
    let (mut a, mut c): (u64, u64) = (2806196910506780709, 1);
    let mut n = n % M;
    let (mut a_new, mut c_new): (u64, u64) = (1, 0);
    while n > 0 {
        if n & 1 == 1 {
            a_new = a_new.wrapping_mul(a);
            c_new = c_new.wrapping_mul(a).wrapping_add(c);
        }
        c = c.wrapping_mul(a.wrapping_add(1));
        a = a.wrapping_mul(a);
        n >>= 1;
    }
    a_new.wrapping_mul(seed).wrapping_add(c_new) % M
}

pub fn lcg_random_double(seed: &mut u64) -> f64 {
    const M: u64 = 1 << 63;
    *seed = 2806196910506780709u64.wrapping_mul(*seed).wrapping_add(1) % M;
    *seed as f64 / M as f64
}

/// A material by its share of the reactor's volume (XSBench's `pick_mat`).
pub fn pick_mat(seed: &mut u64) -> usize {
    let dist = [
        0.140, 0.052, 0.275, 0.134, 0.154, 0.064, 0.066, 0.055, 0.008, 0.015, 0.025, 0.013,
    ];
    let roll = lcg_random_double(seed);
    for i in 0..12 {
        let mut running = 0.0;
        for j in (1..=i).rev() {
            running += dist[j];
        }
        if roll < running {
            return i;
        }
    }
    0
}

/// The last point of the sorted `a[..n]` at or below `quarry`.
pub fn grid_search(n: usize, quarry: f64, a: &[f64]) -> usize {
    let (mut lower, mut upper) = (0, n - 1);
    let mut length = upper - lower;
    while length > 1 {
        let examination_point = lower + length / 2;
        if a[examination_point] > quarry {
            upper = examination_point;
        } else {
            lower = examination_point;
        }
        length = upper - lower;
    }
    lower
}

/// One nuclide's five cross sections at `p_energy`, interpolated between its grid points around it.
pub fn calculate_micro_xs(
    p_energy: f64,
    nuc: usize,
    inp: XsInputs,
    index_data: &[i32],
    nuclide_grids: &[NuclideGridPoint],
    idx: usize,
) -> [f64; 5] {
    let at = index_data[idx * inp.n_isotopes + nuc] as usize;
    let lo = nuc * inp.n_gridpoints
        + if at == inp.n_gridpoints - 1 {
            at - 1
        } else {
            at
        };
    let (low, high) = (nuclide_grids[lo], nuclide_grids[lo + 1]);
    let f = (high.energy - p_energy) / (high.energy - low.energy);
    [
        high.total_xs - f * (high.total_xs - low.total_xs),
        high.elastic_xs - f * (high.elastic_xs - low.elastic_xs),
        high.absorbtion_xs - f * (high.absorbtion_xs - low.absorbtion_xs),
        high.fission_xs - f * (high.fission_xs - low.fission_xs),
        high.nu_fission_xs - f * (high.nu_fission_xs - low.nu_fission_xs),
    ]
}

/// XSBench's data (`SimulationData` there): a struct of slices, mapped field by field as its mapper does.
#[derive(Mapper, Clone, Copy)]
pub struct SimulationData<'a> {
    pub num_nucs: &'a [i32],
    pub concs: &'a [f64],
    pub mats: &'a [i32],
    pub unionized_energy_array: &'a [f64],
    pub index_grid: &'a [i32],
    pub nuclide_grid: &'a [NuclideGridPoint],
}

/// A material's five macroscopic cross sections at `p_energy`: its nuclides' microscopic ones weighted by their
/// concentrations.
pub fn calculate_macro_xs(
    p_energy: f64,
    mat: usize,
    inp: XsInputs,
    sd: &SimulationData,
) -> [f64; 5] {
    let mut macro_xs = [0.0f64; 5];
    let idx = grid_search(
        inp.n_isotopes * inp.n_gridpoints,
        p_energy,
        sd.unionized_energy_array,
    );
    for j in 0..sd.num_nucs[mat] as usize {
        let p_nuc = sd.mats[mat * inp.max_num_nucs + j] as usize;
        let conc = sd.concs[mat * inp.max_num_nucs + j];
        let xs = calculate_micro_xs(p_energy, p_nuc, inp, sd.index_grid, sd.nuclide_grid, idx);
        for k in 0..5 {
            macro_xs[k] += xs[k] * conc;
        }
    }
    macro_xs
}

/// XSBench's event-based lookups (its OpenMP offload version, the unionized grid): per lookup a random energy and
/// material, the material's macroscopic cross sections there, and a verification value (the index of the largest,
/// plus one).
#[target(teams_distribute_parallel_for, if(on_device))]
pub fn xsbench(on_device: bool, inp: XsInputs, sd: SimulationData<'_>, verification: &mut [u64]) {
    for i in 0..inp.lookups {
        let mut seed = fast_forward_lcg(XS_SEED, 2 * i as u64);
        let p_energy = lcg_random_double(&mut seed);
        let mat = pick_mat(&mut seed);
        let macro_xs = calculate_macro_xs(p_energy, mat, inp, &sd);
        let (mut max, mut max_idx) = (-1.0, 0);
        for (j, &x) in macro_xs.iter().enumerate() {
            if x > max {
                max = x;
                max_idx = j;
            }
        }
        verification[i] = max_idx as u64 + 1;
    }
}

#[declare_target]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Atom {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub ty: i32,
}

#[declare_target]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct FFParams {
    pub hbtype: i32,
    pub radius: f32,
    pub hphb: f32,
    pub elsc: f32,
}

/// miniBUDE's `fasten_main` (its OpenMP port): each iteration a group of [`PPWI`] poses, their energies summed over
/// every ligand-protein atom pair. `poses` holds the six transforms one after another, `nposes` each.
#[target(teams_distribute_parallel_for, if(on_device))]
pub fn fasten(
    on_device: bool,
    protein: &[Atom],
    ligand: &[Atom],
    forcefield: &[FFParams],
    poses: &[f32],
    energies: &mut [f32],
) {
    let nposes = energies.len();
    for group in 0..nposes / PPWI {
        let mut transform = [[[0.0f32; 4]; 3]; PPWI];
        let mut etot = [0.0f32; PPWI];
        for (l, m) in transform.iter_mut().enumerate() {
            let ix = group * PPWI + l;
            let (sx, cx) = (poses[ix].sin(), poses[ix].cos());
            let (sy, cy) = (poses[nposes + ix].sin(), poses[nposes + ix].cos());
            let (sz, cz) = (poses[2 * nposes + ix].sin(), poses[2 * nposes + ix].cos());
            *m = [
                [
                    cy * cz,
                    sx * sy * cz - cx * sz,
                    cx * sy * cz + sx * sz,
                    poses[3 * nposes + ix],
                ],
                [
                    cy * sz,
                    sx * sy * sz + cx * cz,
                    cx * sy * sz - sx * cz,
                    poses[4 * nposes + ix],
                ],
                [-sy, sx * cy, cx * cy, poses[5 * nposes + ix]],
            ];
        }
        for l_atom in ligand {
            let l_params = forcefield[l_atom.ty as usize];
            let lhphb_ltz = l_params.hphb < 0.0;
            let lhphb_gtz = l_params.hphb > 0.0;
            let mut lpos = [[0.0f32; PPWI]; 3];
            for l in 0..PPWI {
                for d in 0..3 {
                    let m = transform[l][d];
                    lpos[d][l] = m[3] + l_atom.x * m[0] + l_atom.y * m[1] + l_atom.z * m[2];
                }
            }
            for p_atom in protein {
                let p_params = forcefield[p_atom.ty as usize];
                let radij = p_params.radius + l_params.radius;
                let r_radij = 1.0 / radij;
                let both_f = p_params.hbtype == HBTYPE_F && l_params.hbtype == HBTYPE_F;
                let elcdst = if both_f { 4.0 } else { 2.0 };
                let elcdst1 = if both_f { 0.25 } else { 0.5 };
                let type_e = p_params.hbtype == HBTYPE_E || l_params.hbtype == HBTYPE_E;
                let phphb_ltz = p_params.hphb < 0.0;
                let phphb_gtz = p_params.hphb > 0.0;
                let phphb_nz = p_params.hphb != 0.0;
                let p_hphb = p_params.hphb * if phphb_ltz && lhphb_gtz { -1.0 } else { 1.0 };
                let l_hphb = l_params.hphb * if phphb_gtz && lhphb_ltz { -1.0 } else { 1.0 };
                let distdslv = match (phphb_ltz, lhphb_ltz) {
                    (true, true) => NPNPDIST,
                    (true, false) | (false, true) => NPPDIST,
                    (false, false) => -f32::MAX,
                };
                let r_distdslv = 1.0 / distdslv;
                let chrg_init = l_params.elsc * p_params.elsc;
                let dslv_init = p_hphb + l_hphb;
                for l in 0..PPWI {
                    let x = lpos[0][l] - p_atom.x;
                    let y = lpos[1][l] - p_atom.y;
                    let z = lpos[2][l] - p_atom.z;
                    let distij = (x * x + y * y + z * z).sqrt();
                    let distbb = distij - radij;
                    let zone1 = distbb < 0.0;
                    etot[l] += (1.0 - distij * r_radij) * if zone1 { 2.0 * HARDNESS } else { 0.0 };
                    let mut chrg_e = chrg_init
                        * ((if zone1 { 1.0 } else { 1.0 - distbb * elcdst1 })
                            * if distbb < elcdst { 1.0 } else { 0.0 });
                    let neg_chrg_e = -chrg_e.abs();
                    chrg_e = if type_e { neg_chrg_e } else { chrg_e };
                    etot[l] += chrg_e * CNSTNT;
                    let coeff = 1.0 - distbb * r_distdslv;
                    let mut dslv_e = dslv_init
                        * if distbb < distdslv && phphb_nz {
                            1.0
                        } else {
                            0.0
                        };
                    dslv_e *= if zone1 { 1.0 } else { coeff };
                    etot[l] += dslv_e;
                }
            }
        }
        for l in 0..PPWI {
            energies[group * PPWI + l] = etot[l] * 0.5;
        }
    }
}

pub const XS_INPUTS: XsInputs = XsInputs {
    lookups: XS_LOOKUPS,
    n_isotopes: XS_ISOTOPES,
    n_gridpoints: XS_GRIDPOINTS,
    max_num_nucs: XS_MAX_NUCS,
};
