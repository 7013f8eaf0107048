//! Running a grid as a GPU does. Blocks are dealt to the host's pool threads (as many as it has hardware threads),
//! one block at a time each. A block's threads are stackful coroutines on its pool thread, all alive at once: each
//! runs until it reaches a barrier or finishes, and the barrier completes when every thread of the block has
//! reached it, so the threads of a block interleave exactly at barriers, as warps of a block may. A thread that
//! finishes while others wait at a barrier breaks the barrier (they fail, as on host-elf; on a GPU they would hang);
//! a trap (a panic caught by the image's entry) stops the grid: no further block starts, and threads waiting at a
//! barrier fail.

use super::stacks;
use crate::host::pool;
use crate::plugin::error::PluginError;
use crate::plugin::host_code::call;
use crate::plugin::interface::{Arg, Kernel};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use offload_model::abi::{barrier_status, HostFailure, HostLaunchEnv};
use offload_model::gpu_panic::PanicRecord;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A launch's shape: `blocks` of `threads`, each block with `shared` bytes of dynamic shared memory.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub blocks: u32,
    pub threads: u32,
    pub shared: usize,
    /// The address of the launch's own panic record, which its threads write (see `HostLaunchEnv::panic_record`).
    pub record: usize,
}

/// A GPU thread, resumed with a `barrier_status` and yielding when it reaches a barrier.
type Thread = Coroutine<u32, (), (), DefaultStack>;

/// What a thread's barrier needs: the yielder of its coroutine, set when the coroutine starts.
struct Fiber {
    yielder: Cell<*const Yielder<u32, ()>>,
}

/// The block barrier the image calls (`HostLaunchEnv::barrier`): suspends the calling thread until the block's
/// scheduler resumes it with the barrier's outcome.
///
/// # Safety
/// `ctx` is the calling thread's [`Fiber`], and the caller runs on that thread's coroutine.
unsafe extern "C" fn barrier_wait(ctx: *const c_void) -> u32 {
    // SAFETY: per the contract; the yielder was set when the coroutine started and lives as long as it.
    unsafe {
        let fiber = &*(ctx as *const Fiber);
        (*fiber.yielder.get()).suspend(())
    }
}

/// Runs the grid; whether a thread trapped. `Err` if a pool thread could not be started (nothing ran then) or a pool
/// thread could not map its stacks (the blocks other pool threads took ran, and the launch failed).
///
/// # Safety
/// `kernel` is a gpu-sim kernel taking `dyn_ptr` and exactly `args.len()` arguments (at most `call::MAX_ARGS`).
pub unsafe fn run(kernel: Kernel, args: &[Arg], shape: Shape) -> Result<bool, PluginError> {
    let next = AtomicU32::new(0);
    let trapped = AtomicBool::new(false);
    let no_stacks = std::sync::Mutex::new(None);
    let workers = (crate::host::geometry::hardware_threads() as usize)
        .min(shape.blocks as usize)
        .min((stacks::MAX_IN_FLIGHT / shape.threads as usize).max(1));
    pool::run(workers, &|_| {
        // Every stack a block can need, before any of its threads starts (a block cannot stop half-way).
        if let Err(e) = stacks::reserve(shape.threads as usize) {
            trapped.store(true, Ordering::Relaxed);
            *no_stacks.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            return;
        }
        let mut block = Block::new(shape);
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= shape.blocks || trapped.load(Ordering::Relaxed) {
                break;
            }
            // SAFETY: per this function's contract.
            if unsafe { block.run(kernel, args, b, &trapped) } {
                trapped.store(true, Ordering::Relaxed);
            }
        }
        stacks::trim();
    })?;
    if let Some(e) = no_stacks.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(PluginError::Launch {
            reason: format!(
                "gpu-sim could not map the stacks of a block of {} threads: {e}",
                shape.threads
            ),
        });
    }
    Ok(trapped.into_inner())
}

/// A pool thread's room for running blocks of one launch, reused from block to block.
struct Block {
    shape: Shape,
    /// The block's dynamic shared memory, in 16-byte units so any slot type is aligned.
    shared: Vec<u128>,
    /// The block's claim word for it: the atomic type `team_shared` hands it out as, zero until the first call.
    claim: AtomicU32,
    envs: Vec<HostLaunchEnv>,
    failures: Vec<HostFailure>,
    fibers: Vec<Fiber>,
    /// Each thread's stack's guard page, for the overflow report.
    guards: Vec<(usize, usize)>,
}

impl Block {
    fn new(shape: Shape) -> Self {
        let n = shape.threads as usize;
        Block {
            shape,
            shared: vec![0; shape.shared.div_ceil(16)],
            claim: AtomicU32::new(0),
            // SAFETY: `HostLaunchEnv` and `HostFailure` are integers, byte arrays, nullable raw pointers and an
            // `Option` of a function pointer: all-zero is a valid value of each (null, `None`).
            envs: (0..n).map(|_| unsafe { std::mem::zeroed() }).collect(),
            failures: (0..n).map(|_| unsafe { std::mem::zeroed() }).collect(),
            fibers: (0..n)
                .map(|_| Fiber {
                    yielder: Cell::new(std::ptr::null()),
                })
                .collect(),
            guards: vec![(0, 0); n],
        }
    }

    /// Runs block `b` to completion; whether one of its threads trapped.
    ///
    /// # Safety
    /// As [`run`].
    unsafe fn run(
        &mut self,
        kernel: Kernel,
        args: &[Arg],
        b: u32,
        grid_trapped: &AtomicBool,
    ) -> bool {
        let Shape {
            blocks, threads, ..
        } = self.shape;
        self.shared.fill(0);
        // A fresh block, as on a GPU, whose entry clears the word: no thread of this one has started yet.
        *self.claim.get_mut() = 0;
        let shared = (
            self.shared.as_mut_ptr().cast::<u8>(),
            self.shared.len() * 16,
        );
        // Raw pointers taken once: the threads keep theirs while later ones are set up.
        let (envs, failures) = (self.envs.as_mut_ptr(), self.failures.as_mut_ptr());
        for t in 0..threads as usize {
            // SAFETY: `t` is below the vectors' length (`threads`); no thread of this block has started yet.
            unsafe {
                (*failures.add(t)).failed = 0;
                envs.add(t).write(HostLaunchEnv {
                    team_num: b,
                    num_teams: blocks,
                    thread_num: t as u32,
                    num_threads: threads,
                    team_shared: if shared.1 > 0 {
                        shared.0
                    } else {
                        std::ptr::null_mut()
                    },
                    team_shared_len: shared.1,
                    team_shared_claim: if shared.1 > 0 {
                        &raw const self.claim
                    } else {
                        std::ptr::null()
                    },
                    failure: failures.add(t),
                    panic_record: self.shape.record as *mut PanicRecord,
                    barrier: Some(barrier_wait),
                    barrier_ctx: &self.fibers[t] as *const Fiber as *const c_void,
                    chunks: std::ptr::null(),
                });
            }
        }
        let mut trapped = false;
        let mut first_finished: Option<u32> = None;
        let mut waiting: Vec<(u32, Thread)> = Vec::new();
        // Each thread runs until its first barrier or its end, in order; a finished thread's stack serves the next.
        for t in 0..threads {
            let start = Start {
                kernel,
                args: args.as_ptr(),
                nargs: args.len(),
                // SAFETY: `t` is below the vector's length.
                env: unsafe { envs.add(t as usize) },
                fiber: &self.fibers[t as usize],
            };
            let stack = stacks::take();
            self.guards[t as usize] = stacks::guard(&stack);
            let co = Thread::with_stack(stack, move |y: &Yielder<u32, ()>, _| {
                // SAFETY: the block outlives its threads (it runs each to completion before it returns), and the
                // kernel's contract is `run`'s.
                unsafe { start.run(y) }
            });
            self.step(
                b,
                t,
                co,
                barrier_status::DONE,
                &mut waiting,
                &mut first_finished,
                &mut trapped,
            );
        }
        // Every live thread waits at a barrier: release them all with its outcome, until none is left.
        while !waiting.is_empty() {
            let status = if trapped || grid_trapped.load(Ordering::Relaxed) {
                barrier_status::FAILED
            } else if let Some(f) = first_finished {
                barrier_status::FINISHED + f
            } else {
                barrier_status::DONE
            };
            for (t, co) in std::mem::take(&mut waiting) {
                self.step(
                    b,
                    t,
                    co,
                    status,
                    &mut waiting,
                    &mut first_finished,
                    &mut trapped,
                );
            }
        }
        trapped
    }

    /// Resumes thread `t` of block `b` with `status` until it waits at a barrier (kept in `waiting`) or ends.
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        b: u32,
        t: u32,
        mut co: Thread,
        status: u32,
        waiting: &mut Vec<(u32, Thread)>,
        first_finished: &mut Option<u32>,
        trapped: &mut bool,
    ) {
        match stacks::running(self.guards[t as usize], b, t, || co.resume(status)) {
            CoroutineResult::Yield(()) => waiting.push((t, co)),
            CoroutineResult::Return(()) => {
                first_finished.get_or_insert(t);
                *trapped |= self.failures[t as usize].failed != 0;
                stacks::give(co.into_stack());
            }
        }
    }
}

/// What a thread's coroutine starts with: raw pointers into the block and the launch, which outlive it.
#[derive(Clone, Copy)]
struct Start {
    kernel: Kernel,
    args: *const Arg,
    nargs: usize,
    env: *mut HostLaunchEnv,
    fiber: *const Fiber,
}

impl Start {
    /// # Safety
    /// The pointers are live for the coroutine's run; the kernel's contract is [`run`]'s.
    unsafe fn run(self, y: &Yielder<u32, ()>) {
        // SAFETY: per the contract. The image's entry catches every panic, so nothing unwinds out of the kernel.
        unsafe {
            (*self.fiber).yielder.set(y);
            call::call(
                self.kernel.0 as *const c_void,
                self.env.cast(),
                std::slice::from_raw_parts(self.args, self.nargs),
            );
        }
    }
}
