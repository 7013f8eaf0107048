//! The environment: every internal control variable and setting the runtime reads from it, read once, as OpenMP's
//! runtime does, and the per-thread default-device-var. A value that cannot be parsed is named on stderr and ignored.

use std::cell::Cell;
use std::ffi::OsString;
use std::sync::OnceLock;
use std::time::Duration;

/// `OMP_TARGET_OFFLOAD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Default,
    Disabled,
    Mandatory,
}

pub struct Icv {
    pub policy: Policy,
    /// `OMP_DEFAULT_DEVICE`, the initial value of every thread's default-device-var (unless bound by rank).
    pub default_device: i32,
    /// `OFFLOAD_BIND=local-rank`: the launcher's local rank, from which the device table picks the default device
    /// (`rank % devices`); `None` when not asked, or when `OMP_DEFAULT_DEVICE` names the device itself.
    pub bind: Option<LocalRank>,
    /// The process's rank in its MPI job, if a launcher started it (`OMPI_COMM_WORLD_RANK`, `PMI_RANK`,
    /// `SLURM_PROCID`): a region's failure names it, so a job's log says which rank failed.
    pub rank: Option<LocalRank>,
    /// `OFFLOAD_PLUGINS`: `None` means every plugin.
    pub plugins: Option<Vec<String>>,
    /// `OMP_WAIT_POLICY`: how long an idle host team thread spins for the next launch before it sleeps. `ACTIVE`
    /// 200 ms (libomp's block time), `PASSIVE` not at all, by default 1 ms: launches in a loop find their threads
    /// awake (waking a sleeping thread took 50 us here), and a program that stops launching gets its cores back soon.
    pub spin: Duration,
    /// `OFFLOAD_INFO` (like `LIBOMPTARGET_INFO`): the level, `u32::MAX` for a negative one (everything).
    pub info: u32,
    /// `OFFLOAD_PROFILE`: where to write the Chrome trace, if anywhere.
    pub profile: Option<OsString>,
    /// `OFFLOAD_PROFILE_MAX_EVENTS`: how many events the trace keeps, if not its default.
    pub profile_max_events: Option<usize>,
    /// `OFFLOAD_HOST_DEVICES`: how many host-elf devices to offer (1 unless set), at most [`MAX_HOST_DEVICES`].
    pub host_devices: usize,
    /// `OFFLOAD_TASK_THREADS`: the most helper threads that run tasks (8 unless set; 0: each task runs when spawned,
    /// on the spawning thread).
    pub task_threads: usize,
    /// `OFFLOAD_HOST_MEMORY`: how many bytes of device memory each host-elf device offers (unlimited unless set, so
    /// out-of-memory paths can be exercised).
    pub host_memory: usize,
    /// `OFFLOAD_RUNTIME`: whose device layer runs regions and data constructs.
    pub runtime: Runtime,
    /// `OFFLOAD_LIBOMPTARGET`: the libomptarget `OFFLOAD_RUNTIME=llvm` loads, if not Debian's LLVM 22 one.
    pub libomptarget: Option<std::path::PathBuf>,
    /// `OFFLOAD_LLVM_GPU=1`: `OFFLOAD_RUNTIME=llvm` registers the GPU images too, for LLVM's CUDA and AMD plugins.
    pub llvm_gpu: bool,
}

/// `OFFLOAD_RUNTIME`: ours (`offload`, the default: our plugins and present tables) or LLVM's libomptarget (`llvm`:
/// its devices and present table, shared with C and C++ code compiled by clang).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Offload,
    Llvm,
}

/// The most host-elf devices `OFFLOAD_HOST_DEVICES` may ask for: enough to exercise `device(n)`, few enough that
/// each can have its table and threads.
pub const MAX_HOST_DEVICES: usize = 64;

static ICV: OnceLock<Icv> = OnceLock::new();

/// The settings, read from the environment on first use.
pub fn icv() -> &'static Icv {
    ICV.get_or_init(|| Icv {
        policy: word(
            "OMP_TARGET_OFFLOAD",
            &[
                ("", Policy::Default),
                ("default", Policy::Default),
                ("disabled", Policy::Disabled),
                ("mandatory", Policy::Mandatory),
            ],
            "DEFAULT, DISABLED or MANDATORY",
            Policy::Default,
        ),
        default_device: number("OMP_DEFAULT_DEVICE", "a device number", 0),
        bind: match std::env::var("OMP_DEFAULT_DEVICE") {
            Ok(_) => None,
            Err(_) => bind(std::env::var("OFFLOAD_BIND").ok().as_deref(), |k| {
                std::env::var(k).ok()
            }),
        },
        rank: launcher_rank(&RANK_VARS, |k| std::env::var(k).ok()),
        plugins: std::env::var("OFFLOAD_PLUGINS").ok().map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        }),
        spin: Duration::from_micros(word(
            "OMP_WAIT_POLICY",
            &[("active", 200_000), ("passive", 0)],
            "ACTIVE or PASSIVE",
            1_000,
        )),
        info: info_level(std::env::var("OFFLOAD_INFO").ok().as_deref()),
        profile: std::env::var_os("OFFLOAD_PROFILE").filter(|p| !p.is_empty()),
        profile_max_events: std::env::var("OFFLOAD_PROFILE_MAX_EVENTS")
            .ok()
            .and_then(|v| {
                v.trim()
                    .parse()
                    .map(Some)
                    .unwrap_or_else(|_| ignoring("OFFLOAD_PROFILE_MAX_EVENTS", &v, "a count", None))
            }),
        host_devices: match std::env::var("OFFLOAD_HOST_DEVICES") {
            Err(_) => 1,
            Ok(v) => host_devices(&v),
        },
        task_threads: number("OFFLOAD_TASK_THREADS", "a number of threads", 8),
        host_memory: number("OFFLOAD_HOST_MEMORY", "a number of bytes", usize::MAX),
        runtime: word(
            "OFFLOAD_RUNTIME",
            &[
                ("", Runtime::Offload),
                ("offload", Runtime::Offload),
                ("llvm", Runtime::Llvm),
            ],
            "offload or llvm",
            Runtime::Offload,
        ),
        libomptarget: std::env::var_os("OFFLOAD_LIBOMPTARGET")
            .filter(|p| !p.is_empty())
            .map(Into::into),
        llvm_gpu: word(
            "OFFLOAD_LLVM_GPU",
            &[("", false), ("0", false), ("1", true)],
            "0 or 1",
            false,
        ),
    })
}

/// A variable that takes one of `words` (trimmed, in any case): the value of the word given; `unset` where it is not
/// set, and, with a warning naming what is `expected`, where it is another word.
fn word<T: Copy>(name: &str, words: &[(&str, T)], expected: &str, unset: T) -> T {
    let Ok(v) = std::env::var(name) else {
        return unset;
    };
    let given = v.trim().to_ascii_lowercase();
    match words.iter().find(|(w, _)| *w == given) {
        Some(&(_, t)) => t,
        None => ignoring(name, &v, expected, unset),
    }
}

/// A variable that takes a number: `unset` where it is not set, and, with a warning naming what is `expected`,
/// where it is not a number.
fn number<T: std::str::FromStr>(name: &str, expected: &str, unset: T) -> T {
    match std::env::var(name) {
        Err(_) => unset,
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| ignoring(name, &v, expected, unset)),
    }
}

/// A process's rank among those its launcher started on this node, and the variable that said it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalRank {
    pub rank: u32,
    pub var: &'static str,
}

/// The variables launchers set to a process's local rank, in the order they are read: Open MPI's `mpirun`, MPICH's
/// (Hydra) `mpiexec`, Slurm's `srun`.
pub const LOCAL_RANK_VARS: [&str; 3] = [
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
];

/// The variables launchers set to a process's rank in the whole job, in the order they are read.
pub const RANK_VARS: [&str; 3] = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"];

/// The first of `vars` that holds a rank (`get` reads the environment).
fn launcher_rank(vars: &[&'static str], get: impl Fn(&str) -> Option<String>) -> Option<LocalRank> {
    vars.iter().find_map(|&var| {
        let v = get(var)?;
        match v.trim().parse() {
            Ok(rank) => Some(LocalRank { rank, var }),
            Err(_) => ignoring(var, &v, "a rank", None),
        }
    })
}

/// `OFFLOAD_BIND` (`local-rank` or `none`), with `get` reading the launcher's variables.
fn bind(v: Option<&str>, get: impl Fn(&str) -> Option<String>) -> Option<LocalRank> {
    match v.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "none") => None,
        Some("local-rank") => {
            let found = launcher_rank(&LOCAL_RANK_VARS, get);
            if found.is_none() {
                eprintln_whole!(
                    "offload: OFFLOAD_BIND=local-rank, but no launcher set a local rank ({}); the default device is \
                     not bound",
                    LOCAL_RANK_VARS.join(", ")
                );
            }
            found
        }
        Some(_) => ignoring(
            "OFFLOAD_BIND",
            v.unwrap_or_default(),
            "local-rank or none",
            None,
        ),
    }
}

/// The default device the device table bound this process to by its local rank (set once, when it is built).
static BOUND: OnceLock<i32> = OnceLock::new();

/// Makes `device` every thread's initial default-device-var ([`Icv::bind`]). Called by the device table, which knows
/// how many devices there are, before any thread reads its default device through it.
pub fn bind_default_device(device: i32) {
    let _ = BOUND.set(device);
}

/// Names a value that cannot be parsed, and what it takes instead.
#[cold]
fn ignoring<T>(name: &str, value: &str, expected: &str, instead: T) -> T {
    eprintln_whole!("offload: ignoring {name}={value:?}; expected {expected}");
    instead
}

/// `OFFLOAD_INFO`: a level (1 launches, 2 also transfers, 4 also mapping-table changes); a negative one is every
/// level.
fn info_level(v: Option<&str>) -> u32 {
    let Some(v) = v else { return 0 };
    match v.trim() {
        "" => 0,
        t => match t.parse::<i64>() {
            Ok(n) if n < 0 => u32::MAX,
            Ok(n) => n.min(u32::MAX.into()) as u32,
            Err(_) => ignoring(
                "OFFLOAD_INFO",
                v,
                "a level (1 launches, 2 also transfers, 4 also mapping-table changes, -1 everything)",
                0,
            ),
        },
    }
}

/// `OFFLOAD_HOST_DEVICES` as a device count: a number clamped to [`MAX_HOST_DEVICES`], anything else one; either
/// way with a line on stderr saying what it became.
fn host_devices(v: &str) -> usize {
    match v.trim().parse::<u64>() {
        Ok(n) if n <= MAX_HOST_DEVICES as u64 => n as usize,
        Ok(n) => {
            eprintln_whole!(
                "offload: OFFLOAD_HOST_DEVICES={n} is more than the {MAX_HOST_DEVICES} host-elf devices offered; using \
                 {MAX_HOST_DEVICES}"
            );
            MAX_HOST_DEVICES
        }
        Err(_) => ignoring("OFFLOAD_HOST_DEVICES", v, "a count", 1),
    }
}

thread_local! {
    /// default-device-var: per thread (OpenMP keeps it per data environment), starting at `OMP_DEFAULT_DEVICE`, or at
    /// the initial device under `OMP_TARGET_OFFLOAD=DISABLED`: that policy leaves no offload devices, so the host,
    /// numbered after them, is device 0.
    static DEFAULT_DEVICE: Cell<i32> = Cell::new(match icv().policy {
        Policy::Disabled => 0,
        _ => BOUND.get().copied().unwrap_or(icv().default_device),
    });
}

/// This thread's default-device-var.
#[inline]
pub fn default_device() -> i32 {
    DEFAULT_DEVICE.with(Cell::get)
}

/// Sets this thread's default-device-var.
pub fn set_default_device(device: i32) {
    DEFAULT_DEVICE.with(|d| d.set(device));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_levels_are_numbers_and_a_negative_one_is_everything() {
        assert_eq!(info_level(None), 0);
        assert_eq!(info_level(Some(" ")), 0);
        assert_eq!(info_level(Some("2")), 2);
        assert_eq!(info_level(Some("-1")), u32::MAX);
        assert_eq!(info_level(Some("99999999999")), u32::MAX);
        assert_eq!(info_level(Some("lots")), 0);
    }

    #[test]
    fn binding_reads_the_first_launcher_variable_that_has_a_rank() {
        let vars = |set: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                set.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let ompi = vars(&[("OMPI_COMM_WORLD_LOCAL_RANK", "3"), ("SLURM_LOCALID", "1")]);
        assert_eq!(
            bind(Some("local-rank"), ompi),
            Some(LocalRank {
                rank: 3,
                var: "OMPI_COMM_WORLD_LOCAL_RANK"
            })
        );
        let mpich = vars(&[("MPI_LOCALRANKID", " 2 ")]);
        assert_eq!(bind(Some("LOCAL-RANK"), mpich).map(|b| b.rank), Some(2));
        let slurm = vars(&[("OMPI_COMM_WORLD_LOCAL_RANK", "x"), ("SLURM_LOCALID", "5")]);
        assert_eq!(
            bind(Some("local-rank"), slurm).map(|b| b.var),
            Some("SLURM_LOCALID")
        );
        assert_eq!(bind(Some("local-rank"), vars(&[])), None, "no launcher");
        assert_eq!(
            bind(None, vars(&[("SLURM_LOCALID", "1")])),
            None,
            "not asked"
        );
        assert_eq!(bind(Some("none"), vars(&[("SLURM_LOCALID", "1")])), None);
        assert_eq!(bind(Some("socket"), vars(&[("SLURM_LOCALID", "1")])), None);
    }

    #[test]
    fn the_host_device_count_is_bounded() {
        assert_eq!(host_devices("3"), 3);
        assert_eq!(host_devices(" 0 "), 0);
        assert_eq!(host_devices("10000000000"), MAX_HOST_DEVICES);
        assert_eq!(host_devices("-2"), 1);
    }
}
