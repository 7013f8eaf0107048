//! Every kernel's data: the inputs, built as the peer builds them, and the kernels' view of them.

use super::*;

/// The data of every kernel, as it is on the host (and, mapped, on the device).
pub struct Data<'a> {
    pub a: &'a [f64],
    pub anew: &'a mut [f64],
    pub pos: &'a [[f32; 4]],
    pub vel: &'a mut [[f32; 4]],
    pub hdata: &'a [u32],
    pub hist: &'a mut [AtomicU32],
    pub sa: &'a mut [f64],
    pub sb: &'a mut [f64],
    pub sc: &'a mut [f64],
    pub hs_power: &'a [f32],
    pub hs_in: &'a [f32],
    pub hs_out: &'a mut [f32],
    pub sp_row: &'a [i32],
    pub sp_col: &'a [i32],
    pub sp_val: &'a [f64],
    pub sp_x: &'a [f64],
    pub sp_y: &'a mut [f64],
    pub xs: SimulationData<'a>,
    pub xs_verification: &'a mut [u64],
    pub protein: &'a [Atom],
    pub ligand: &'a [Atom],
    pub forcefield: &'a [FFParams],
    pub poses: &'a [f32],
    pub energies: &'a mut [f32],
}

/// Every kernel's inputs, the same as the peer builds.
pub struct Inputs {
    pub a: Vec<f64>,
    pub anew: Vec<f64>,
    pub pos: Vec<[f32; 4]>,
    pub vel: Vec<[f32; 4]>,
    pub hdata: Vec<u32>,
    pub hist: Vec<AtomicU32>,
    pub sa: Vec<f64>,
    pub sb: Vec<f64>,
    pub sc: Vec<f64>,
    pub hs_power: Vec<f32>,
    pub hs_in: Vec<f32>,
    pub hs_out: Vec<f32>,
    pub sp_row: Vec<i32>,
    pub sp_col: Vec<i32>,
    pub sp_val: Vec<f64>,
    pub sp_x: Vec<f64>,
    pub sp_y: Vec<f64>,
    pub xs_num_nucs: Vec<i32>,
    pub xs_concs: Vec<f64>,
    pub xs_mats: Vec<i32>,
    pub xs_egrid: Vec<f64>,
    pub xs_index: Vec<i32>,
    pub xs_grid: Vec<NuclideGridPoint>,
    pub xs_verification: Vec<u64>,
    pub protein: Vec<Atom>,
    pub ligand: Vec<Atom>,
    pub forcefield: Vec<FFParams>,
    pub poses: Vec<f32>,
    pub energies: Vec<f32>,
}

impl Inputs {
    pub fn new() -> Inputs {
        let a: Vec<f64> = (0..GRID * GRID)
            .map(|k| ((k * 7919) % 1009) as f64 / 1009.0)
            .collect();
        let pos: Vec<[f32; 4]> = (0..BODIES)
            .map(|i| {
                let c = |p: usize| ((i * p) % 1000) as f32 / 100.0;
                [c(7919), c(104729), c(1299709), 1.0]
            })
            .collect();
        let hdata: Vec<u32> = (0..HIST_N)
            .map(|i| (i as u32).wrapping_mul(2654435761) >> 7)
            .collect();
        let (mut sa, mut sb, mut sc) = (
            vec![0.0f64; STREAM_N],
            vec![0.0f64; STREAM_N],
            vec![0.0f64; STREAM_N],
        );
        stream_init(&mut sa, &mut sb, &mut sc);

        let cells = HS_NX * HS_NY * HS_NZ;
        let hs_in = (0..cells)
            .map(|c| (300.0 + 40.0 * unit(c, 7919)) as f32)
            .collect();
        let hs_power = (0..cells).map(|c| (0.5 * unit(c, 104729)) as f32).collect();

        let mut sp_row = vec![0i32];
        for r in 0..SPMV_ROWS {
            sp_row.push(sp_row[r] + 10 + ((r * 7919) % 21) as i32);
        }
        let nnz = sp_row[SPMV_ROWS] as usize;
        let sp_col = (0..nnz)
            .map(|j| {
                (((j as u64).wrapping_mul(0x9E3779B97F4A7C15) >> 32) % SPMV_ROWS as u64) as i32
            })
            .collect();
        let sp_val = (0..nnz).map(|j| unit(j, 7919) - 0.5).collect();
        let sp_x = (0..SPMV_ROWS).map(|i| unit(i, 104729)).collect();

        // Nuclide n's grid point g lies in [g * I + n, g * I + n + 1/2) / (I * G), so the unionized grid is every
        // point in the order g * I + n, and the index grid (each nuclide's last point at or below a unionized
        // energy) is closed.
        let (iso, gp) = (XS_ISOTOPES, XS_GRIDPOINTS);
        let xs_grid: Vec<NuclideGridPoint> = (0..iso * gp)
            .map(|k| {
                let (n, g) = (k / gp, k % gp);
                NuclideGridPoint {
                    energy: ((g * iso + n) as f64 + 0.5 * unit(k, 7919)) / (iso * gp) as f64,
                    total_xs: unit(k, 104729),
                    elastic_xs: unit(k, 1299709),
                    absorbtion_xs: unit(k, 15485863),
                    fission_xs: unit(k, 32452843),
                    nu_fission_xs: unit(k, 49979687),
                }
            })
            .collect();
        let xs_egrid = (0..iso * gp)
            .map(|u| xs_grid[(u % iso) * gp + u / iso].energy)
            .collect();
        let xs_index = (0..iso * gp * iso)
            .map(|e| {
                let (u, m) = (e / iso, e % iso);
                let (g, n) = (u / iso, u % iso);
                (if m <= n { g } else { g.saturating_sub(1) }) as i32
            })
            .collect();
        const NUM_NUCS: [i32; XS_MATERIALS] = [34, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9];
        let (mut xs_mats, mut xs_concs) = (
            vec![0i32; XS_MATERIALS * XS_MAX_NUCS],
            vec![0.0f64; XS_MATERIALS * XS_MAX_NUCS],
        );
        for (m, &n) in NUM_NUCS.iter().enumerate() {
            for j in 0..n as usize {
                xs_mats[m * XS_MAX_NUCS + j] = ((m * 7 + j * 13) % iso) as i32;
                xs_concs[m * XS_MAX_NUCS + j] = unit(m * XS_MAX_NUCS + j, 7919);
            }
        }

        let atom = |i: usize, span: f64, p: [usize; 3], ty: usize| Atom {
            x: (span * unit(i, p[0]) - span / 2.0) as f32,
            y: (span * unit(i, p[1]) - span / 2.0) as f32,
            z: (span * unit(i, p[2]) - span / 2.0) as f32,
            ty: (ty % NTYPES) as i32,
        };
        let protein = (0..NATPRO)
            .map(|i| atom(i, 30.0, [7919, 104729, 1299709], i * 7))
            .collect();
        let ligand = (0..NATLIG)
            .map(|i| atom(i, 6.0, [15485863, 32452843, 49979687], i * 11))
            .collect();
        let forcefield = (0..NTYPES)
            .map(|t| FFParams {
                hbtype: [HBTYPE_F, HBTYPE_E, 78][t % 3],
                radius: (1.5 + 0.5 * unit(t, 7919)) as f32,
                hphb: if t % 5 == 0 {
                    0.0
                } else {
                    (2.0 * unit(t, 104729) - 1.0) as f32
                },
                elsc: (unit(t, 1299709) - 0.5) as f32,
            })
            .collect();
        let poses = (0..6 * POSES)
            .map(|e| {
                let (k, ix) = (e / POSES, e % POSES);
                if k < 3 {
                    (std::f64::consts::TAU * unit(ix * 6 + k, 7919)) as f32
                } else {
                    (4.0 * unit(ix * 6 + k, 104729) - 2.0) as f32
                }
            })
            .collect();
        Inputs {
            a,
            anew: vec![0.0f64; GRID * GRID],
            pos,
            vel: vec![[0.0f32; 4]; BODIES],
            hdata,
            hist: (0..BINS).map(|_| AtomicU32::new(0)).collect(),
            sa,
            sb,
            sc,
            hs_power,
            hs_in,
            hs_out: vec![0.0; cells],
            sp_row,
            sp_col,
            sp_val,
            sp_x,
            sp_y: vec![0.0; SPMV_ROWS],
            xs_num_nucs: NUM_NUCS.to_vec(),
            xs_concs,
            xs_mats,
            xs_egrid,
            xs_index,
            xs_grid,
            xs_verification: vec![0; XS_LOOKUPS],
            protein,
            ligand,
            forcefield,
            poses,
            energies: vec![0.0; POSES],
        }
    }
}

impl Inputs {
    /// The kernels' data, borrowed from these inputs.
    pub fn data(&mut self) -> Data<'_> {
        Data {
            a: &self.a,
            anew: &mut self.anew,
            pos: &self.pos,
            vel: &mut self.vel,
            hdata: &self.hdata,
            hist: &mut self.hist,
            sa: &mut self.sa,
            sb: &mut self.sb,
            sc: &mut self.sc,
            hs_power: &self.hs_power,
            hs_in: &self.hs_in,
            hs_out: &mut self.hs_out,
            sp_row: &self.sp_row,
            sp_col: &self.sp_col,
            sp_val: &self.sp_val,
            sp_x: &self.sp_x,
            sp_y: &mut self.sp_y,
            xs: SimulationData {
                num_nucs: &self.xs_num_nucs,
                concs: &self.xs_concs,
                mats: &self.xs_mats,
                unionized_energy_array: &self.xs_egrid,
                index_grid: &self.xs_index,
                nuclide_grid: &self.xs_grid,
            },
            xs_verification: &mut self.xs_verification,
            protein: &self.protein,
            ligand: &self.ligand,
            forcefield: &self.forcefield,
            poses: &self.poses,
            energies: &mut self.energies,
        }
    }
}
