//! Internal control variables read from the environment once, as OpenMP's runtime does.

use std::sync::OnceLock;

/// `OMP_TARGET_OFFLOAD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Default,
    Disabled,
    Mandatory,
}

pub struct Icv {
    pub policy: Policy,
    /// `OMP_DEFAULT_DEVICE`, the initial value of every thread's default-device-var.
    pub default_device: i32,
    /// `OFFLOAD_PLUGINS`: `None` means every plugin.
    pub plugins: Option<Vec<String>>,
    /// `OMP_WAIT_POLICY`: how long an idle host team thread spins for the next launch before it sleeps. `ACTIVE`
    /// 200 ms (libomp's block time), `PASSIVE` not at all, by default 1 ms: launches in a loop find their threads
    /// awake (waking a sleeping thread took 50 us here), and a program that stops launching gets its cores back soon.
    pub spin: std::time::Duration,
}

static ICV: OnceLock<Icv> = OnceLock::new();

pub fn icv() -> &'static Icv {
    ICV.get_or_init(|| Icv {
        policy: match std::env::var("OMP_TARGET_OFFLOAD") {
            Err(_) => Policy::Default,
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "default" => Policy::Default,
                "disabled" => Policy::Disabled,
                "mandatory" => Policy::Mandatory,
                _ => {
                    eprintln!(
                        "offload: ignoring OMP_TARGET_OFFLOAD={v:?}; expected DEFAULT, DISABLED or MANDATORY"
                    );
                    Policy::Default
                }
            },
        },
        default_device: match std::env::var("OMP_DEFAULT_DEVICE") {
            Err(_) => 0,
            Ok(v) => v.trim().parse().unwrap_or_else(|_| {
                eprintln!("offload: ignoring OMP_DEFAULT_DEVICE={v:?}; expected a device number");
                0
            }),
        },
        plugins: std::env::var("OFFLOAD_PLUGINS").ok().map(|v| {
            v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
        }),
        spin: std::time::Duration::from_micros(match std::env::var("OMP_WAIT_POLICY") {
            Err(_) => 1_000,
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "active" => 200_000,
                "passive" => 0,
                _ => {
                    eprintln!("offload: ignoring OMP_WAIT_POLICY={v:?}; expected ACTIVE or PASSIVE");
                    1_000
                }
            },
        }),
    })
}

/// `OFFLOAD_INFO` (like `LIBOMPTARGET_INFO`): 0 quiet, 1 launches, 2 also transfers, 4 also mapping-table changes;
/// a negative value is the highest level. Read, with `OFFLOAD_PROFILE`, in one atomic by [`crate::observe`].
#[inline]
pub fn info() -> u32 {
    crate::observe::level()
}
