//! A host image's kernel run as a launch of teams on the host team executor: each thread with its own
//! `HostLaunchEnv` (geometry, its team's barrier and team-shared block, the launch's `schedule(dynamic)` counter,
//! a failure record the image's entry fills when the region panics). host-elf launches this way, and so does our
//! plan under LLVM's libomptarget, whose host plugin calls the kernel once (`device::llvm`).

use crate::host::{run_teams, TeamBarrier};
use crate::plugin::error::PluginError;
use offload_model::abi::{HostFailure, HostLaunchEnv};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicUsize};

/// Runs `call` once for every thread of `teams` teams of `threads` (each at least one, at most what the host runs),
/// each team with `team_shared` bytes of zeroed team-shared memory; `call(env)` runs the kernel for the thread whose
/// launch environment is `env`. The first thread's failure is the launch's.
///
/// # Safety
/// `call` runs a kernel of a host image with the environment it gets, as `Device::launch`'s contract says.
pub unsafe fn run(
    teams: u32,
    threads: u32,
    team_shared: usize,
    call: &(dyn Fn(*mut HostLaunchEnv) + Sync),
) -> Result<(), PluginError> {
    // Team-shared memory: one zeroed block per team, in 16-byte units so any slot type is aligned.
    let units = team_shared.div_ceil(16);
    let shared: Vec<std::sync::Mutex<Vec<u128>>> = (0..if units > 0 { teams } else { 0 })
        .map(|_| std::sync::Mutex::new(vec![0u128; units]))
        .collect();
    // Each team's claim word: the atomic type `team_shared` hands its block out as, zero until the first call.
    let claims: Vec<AtomicU32> = shared.iter().map(|_| AtomicU32::new(0)).collect();
    let shared_ptr = |t: u32| -> SharedBlock {
        match (shared.get(t as usize), claims.get(t as usize)) {
            // The block outlives the launch; its threads coordinate their accesses with the team barrier.
            (Some(m), Some(c)) => (
                m.lock().unwrap_or_else(|p| p.into_inner()).as_mut_ptr() as *mut u8,
                units * 16,
                c as *const AtomicU32,
            ),
            _ => (std::ptr::null_mut(), 0, std::ptr::null()),
        }
    };
    // `schedule(dynamic)`'s chunk counter, shared by the launch's threads.
    let chunks = AtomicUsize::new(0);
    if teams == 1 && threads == 1 {
        // SAFETY: per the contract.
        return unsafe { run_thread(call, (0, 1, 0, 1), None, shared_ptr(0), &chunks) };
    }
    run_teams(teams, threads, &|t, i, b| {
        // SAFETY: per the contract; `b`, the team's block and the counter outlive the kernel call.
        unsafe {
            run_thread(
                call,
                (t, teams, i, threads),
                Some(b),
                shared_ptr(t),
                &chunks,
            )
        }
    })
    .map(drop)
}

/// A team's shared block (address, bytes) and its claim word (`HostLaunchEnv::team_shared_claim`).
type SharedBlock = (*mut u8, usize, *const AtomicU32);

/// Runs one thread of a kernel: team `g.0` of `g.1`, thread `g.2` of `g.3`.
///
/// # Safety
/// As [`run`].
unsafe fn run_thread(
    call: &(dyn Fn(*mut HostLaunchEnv) + Sync),
    g: (u32, u32, u32, u32),
    barrier: Option<&TeamBarrier>,
    shared: SharedBlock,
    chunks: &AtomicUsize,
) -> Result<(), PluginError> {
    let mut failure = MaybeUninit::<HostFailure>::uninit();
    // SAFETY: only `failed` is read unless the kernel set it, after writing the rest.
    unsafe { std::ptr::addr_of_mut!((*failure.as_mut_ptr()).failed).write(0) };
    let mut env = HostLaunchEnv {
        team_num: g.0,
        num_teams: g.1,
        thread_num: g.2,
        num_threads: g.3,
        team_shared: shared.0,
        team_shared_len: shared.1,
        team_shared_claim: shared.2,
        failure: failure.as_mut_ptr(),
        panic_record: std::ptr::null_mut(),
        barrier: barrier.map(|_| TeamBarrier::wait_c as unsafe extern "C" fn(*const c_void) -> u32),
        barrier_ctx: barrier.map_or(std::ptr::null(), |b| {
            b as *const TeamBarrier as *const c_void
        }),
        chunks,
    };
    // The image's entry catches every panic, so nothing unwinds into us.
    call(&mut env);
    // SAFETY: `failed` was initialised above.
    let failed = unsafe { std::ptr::addr_of!((*failure.as_ptr()).failed).read() };
    if failed == 0 {
        return Ok(());
    }
    // SAFETY: the kernel wrote the lengths and those prefixes of the buffers before setting `failed`.
    let (message, file, line, column) = unsafe { read_failure(failure.as_ptr()) };
    Err(PluginError::Panic {
        message,
        location: (!file.is_empty()).then_some((file, line, column)),
        thread: None,
        lost: false,
    })
}

/// Reads a failure record whose buffers are written only up to their recorded lengths:
/// (message, file, line, column).
///
/// # Safety
/// `p` points to a record `HostFailure::record` filled.
unsafe fn read_failure(p: *const HostFailure) -> (String, String, u32, u32) {
    use offload_model::abi::{FAILURE_FILE_CAP, FAILURE_MESSAGE_CAP};
    use std::ptr::addr_of;
    // SAFETY: per the contract, each buffer's prefix of its recorded length is initialised.
    unsafe {
        let text = |buf: *const u8, len: u32, cap: usize| {
            String::from_utf8_lossy(std::slice::from_raw_parts(buf, (len as usize).min(cap)))
                .into_owned()
        };
        let message = text(
            addr_of!((*p).message).cast(),
            addr_of!((*p).message_len).read(),
            FAILURE_MESSAGE_CAP,
        );
        let file = text(
            addr_of!((*p).file).cast(),
            addr_of!((*p).file_len).read(),
            FAILURE_FILE_CAP,
        );
        (
            message,
            file,
            addr_of!((*p).line).read(),
            addr_of!((*p).column).read(),
        )
    }
}
