//! Launching a kernel: the launch checked against the GPU's limits, the dispatch packet, publishing it on a queue of
//! the device, and waiting for its completion signal. A [`Dispatcher`] launches on one GPU through its launch lanes
//! ([`LaunchLane`]: a queue, a completion signal and a kernel-argument buffer), one per host thread launching at
//! once, so launches from several threads overlap on the GPU; a lane is held for one launch, which waits for its
//! dispatch to complete, so the lane's buffer and signal are reused from launch to launch.

use super::error::{Error, Lost, TooBig};
use super::failure::Watcher;
use super::image::{KernelInfo, KernelTable};
use super::kernargs::{kernarg_bytes, Kernargs};
use super::safe::{OwnedQueue, OwnedSignal};
use super::sys::*;
use crate::plugin::gpu::lanes::Lanes;
use crate::plugin::KernelArgs;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

/// Private segment (stack) bytes per work-item for a kernel whose stack size the compiler could not bound
/// (recursion, indirect calls): LLVM's plugin's default.
pub const DYNAMIC_STACK_BYTES: u32 = 16 * 1024;

/// Alignment of the team-shared memory a launch adds after the kernel's static LDS (the device code's dynamic LDS
/// symbol is 16-byte aligned, so it starts at the static size rounded up).
const TEAM_SHARED_ALIGN: u32 = 16;

/// (teams, threads per team) of a parallel launch whose clauses leave them open; `wide` for a construct of wide teams
/// (`Construct::wide_teams`: `teams, parallel`, `parallel_for`).
pub fn default_geometry(compute_units: u32, max_threads: u32, wide: bool) -> (u32, u32) {
    let threads = 256.min(max_threads);
    if wide {
        (compute_units, threads)
    } else {
        // A work-shared loop is a grid-stride loop: enough teams to fill every CU several times over.
        (compute_units.saturating_mul(8), threads)
    }
}

/// A GPU's launch limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_threads: u32,
    /// Work-items in the x dimension of a grid.
    pub max_grid: u32,
    /// LDS bytes per workgroup.
    pub lds_bytes: u32,
}

/// A checked launch configuration, in the units of the dispatch packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub workgroup_size: u16,
    /// Work-items: teams times threads.
    pub grid_size: u32,
    /// Static LDS, rounded up to where team-shared memory starts, plus the team-shared memory.
    pub group_segment_size: u32,
    pub private_segment_size: u32,
}

/// Checks a launch of `teams` teams of `threads` threads with `team_shared` bytes of team-shared memory against
/// the GPU's limits before anything is dispatched.
pub fn plan_dispatch(
    limits: Limits,
    kernel: KernelInfo,
    teams: u32,
    threads: u32,
    team_shared: usize,
) -> Result<Dispatch, TooBig> {
    let workgroup_size = u16::try_from(threads)
        .ok()
        .filter(|_| threads <= limits.max_threads)
        .ok_or(TooBig::Threads {
            threads,
            max: limits.max_threads,
        })?;
    let grid_size = teams
        .checked_mul(threads)
        .filter(|&g| g <= limits.max_grid)
        .ok_or(TooBig::Teams {
            teams,
            threads,
            max_grid: limits.max_grid,
        })?;
    let group_segment_size = u32::try_from(team_shared)
        .ok()
        .and_then(|t| {
            let fixed = kernel
                .group_size
                .checked_next_multiple_of(TEAM_SHARED_ALIGN)?;
            fixed.checked_add(t)
        })
        .filter(|&g| g <= limits.lds_bytes)
        .ok_or(TooBig::TeamShared {
            team_shared,
            static_lds: kernel.group_size,
            max: limits.lds_bytes,
        })?;
    let private_segment_size = if kernel.dynamic_stack {
        kernel.private_size.max(DYNAMIC_STACK_BYTES)
    } else {
        kernel.private_size
    };
    Ok(Dispatch {
        workgroup_size,
        grid_size,
        group_segment_size,
        private_segment_size,
    })
}

/// The dispatch packet header: a kernel dispatch, with the barrier bit (it starts after the packets before it
/// finish) and system-scope acquire and release fences (it sees the host's writes before it, and the host sees its
/// writes once the completion signal says it is done).
pub fn dispatch_header() -> u16 {
    (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE)
        | (1 << HSA_PACKET_HEADER_BARRIER)
        | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE)
        | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE)
}

/// The dispatch's setup field: a one-dimensional grid.
pub fn dispatch_setup() -> u16 {
    1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS
}

/// The packet's first 32 bits (header, then setup), stored last and atomically to publish it.
pub fn header_word(packet: &KernelDispatchPacket) -> u32 {
    u32::from(packet.header) | (u32::from(packet.setup) << 16)
}

/// The whole dispatch packet of a checked launch (the header included; it is published last).
pub fn dispatch_packet(
    dispatch: Dispatch,
    kernel_object: u64,
    kernarg_address: u64,
    completion_signal: Signal,
) -> KernelDispatchPacket {
    KernelDispatchPacket {
        header: dispatch_header(),
        setup: dispatch_setup(),
        workgroup_size_x: dispatch.workgroup_size,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        reserved0: 0,
        grid_size_x: dispatch.grid_size,
        grid_size_y: 1,
        grid_size_z: 1,
        private_segment_size: dispatch.private_segment_size,
        group_segment_size: dispatch.group_segment_size,
        kernel_object,
        kernarg_address,
        reserved2: 0,
        completion_signal,
    }
}

/// Writes `packet` into a ring slot: everything but the first 32 bits, then those (header and setup) atomically
/// with release ordering, which orders the body before them and hands the packet to the packet processor.
///
/// # Safety
/// `slot` is a packet slot of a ring (64 bytes, 8-byte aligned) that the packet processor does not read yet (its
/// header says INVALID) and nothing else writes.
pub unsafe fn publish(slot: *mut KernelDispatchPacket, packet: &KernelDispatchPacket) {
    let body = ptr::from_ref(packet).cast::<u8>();
    // SAFETY: per the contract; both are 64-byte packets.
    unsafe {
        ptr::copy_nonoverlapping(body.add(4), slot.cast::<u8>().add(4), 60);
        AtomicU32::from_ptr(slot.cast::<u32>()).store(header_word(packet), Ordering::Release);
    }
}

/// Why a launch did not run to completion.
#[derive(Debug)]
pub enum LaunchError {
    /// Refused before anything was dispatched: the device stays usable.
    Refused(Error),
    /// The kernel started and failed, or the queue had failed before.
    Lost(Lost),
}

/// What a launch needs to itself: a queue, the completion signal of its dispatches and the kernel-argument buffer,
/// held by one launch at a time. Released in field order: the signal and the buffer, then the queue they were
/// dispatched on (none is left running anyway).
pub struct LaunchLane {
    /// The completion signal of every dispatch on the lane (each waits for the one before it to finish).
    signal: OwnedSignal,
    /// The kernel-argument buffer, reused and replaced as kernels need.
    kernargs: Kernargs,
    /// This lane's AQL queue: only the lane's holder launches on it.
    queue: OwnedQueue,
}

/// What making a launch lane takes: GPU `agent`'s queues of `packets` packets, kernel arguments from
/// `kernarg_pool` (of the host: `kernarg_from_host`).
#[derive(Clone, Copy)]
pub struct LaneMaker {
    pub hsa: &'static Hsa,
    pub agent: Agent,
    pub packets: u32,
    pub kernarg_pool: MemoryPool,
    pub kernarg_from_host: bool,
}

impl LaneMaker {
    /// A new lane: its queue, then its signal (the queue is destroyed if the signal cannot be made); the
    /// kernel-argument buffer is allocated by the lane's first launch.
    pub fn make(&self) -> Result<LaunchLane, Error> {
        let queue = OwnedQueue::new(self.hsa, self.agent, self.packets)?;
        let signal = OwnedSignal::new(self.hsa, 0)?;
        Ok(LaunchLane {
            signal,
            kernargs: Kernargs::new(
                self.hsa,
                self.agent,
                self.kernarg_pool,
                self.kernarg_from_host,
            ),
            queue,
        })
    }
}

/// Launches kernels of one GPU's kernel table, each on a lane of its own and waited for.
pub struct Dispatcher {
    limits: Limits,
    kernels: Arc<KernelTable>,
    watcher: Watcher,
    maker: LaneMaker,
    /// The lanes made so far, each held by one launch at a time (at most `LANES_PER_DEVICE`).
    lanes: Lanes<LaunchLane>,
    /// Held shared by each launch for its whole dispatch and wait, so launches run side by side; held alone by
    /// [`Dispatcher::between_launches`].
    running: RwLock<()>,
}

impl Dispatcher {
    /// Launches within `limits` of the kernels in `kernels`, waited for with `watcher`, on `first` and the lanes
    /// `maker` makes when every lane is busy.
    pub fn new(
        limits: Limits,
        kernels: Arc<KernelTable>,
        watcher: Watcher,
        maker: LaneMaker,
        first: LaunchLane,
    ) -> Dispatcher {
        Dispatcher {
            limits,
            kernels,
            watcher,
            maker,
            lanes: Lanes::with_first(first),
            running: RwLock::new(()),
        }
    }

    /// What each launch holds shared until its dispatch has ended (or failed).
    pub fn running(&self) -> &RwLock<()> {
        &self.running
    }

    /// `f`, while no dispatch runs: holding alone what each launch holds shared until its dispatch has ended.
    pub fn between_launches<R>(&self, f: impl FnOnce() -> R) -> R {
        let _alone = self.running.write().unwrap_or_else(|p| p.into_inner());
        f()
    }

    /// Runs kernel `kernel` of the kernel table on a lane's queue with the calling convention `(dyn_ptr, args..)`,
    /// and waits.
    ///
    /// # Safety
    /// `args` match the kernel's parameters (the addresses in them are this GPU's memory).
    pub unsafe fn run(
        &self,
        kernel: usize,
        args: &KernelArgs,
        teams: u32,
        threads: u32,
        team_shared: usize,
    ) -> Result<(), LaunchError> {
        let refused = LaunchError::Refused;
        let info = self
            .kernels
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(kernel)
            .copied()
            .ok_or(refused(Error::NoKernel(kernel)))?;
        let dispatch =
            plan_dispatch(self.limits, info, teams, threads, team_shared).map_err(|why| {
                refused(Error::TooBig {
                    why,
                    teams,
                    threads,
                    team_shared,
                })
            })?;
        let block = kernarg_bytes(args, info.kernarg_size as usize);

        // A lane that cannot be made refuses the launch; the device stays usable.
        self.lanes
            .with(
                || self.maker.make(),
                |lane| {
                    let _running = self.running.read().unwrap_or_else(|p| p.into_inner());
                    if let Some(s) = lane.queue.error() {
                        return Err(LaunchError::Lost(Lost::Queue(s)));
                    }
                    let kernargs = lane.kernargs.buffer(block.len()).map_err(refused)?;
                    // SAFETY: no dispatch reads the buffer: the lane's last one completed.
                    unsafe { kernargs.write(&block) };
                    let packet = dispatch_packet(
                        dispatch,
                        info.object,
                        kernargs.as_ptr() as u64,
                        lane.signal.handle(),
                    );
                    // Nothing waits on the signal: the lane is held.
                    lane.signal.store_relaxed(1);
                    // SAFETY: the kernarg buffer and signal stay valid (and unused by anyone else) until the wait
                    // below returns; only this launch (holding the lane) uses the lane's queue.
                    unsafe { submit(&lane.queue, &packet) }.map_err(LaunchError::Lost)?;
                    self.watcher
                        .wait(&lane.signal, Some(&lane.queue))
                        .map_err(LaunchError::Lost)
                },
            )
            .map_err(refused)?
    }
}

/// Hands `packet` to `queue`: reserves a slot, publishes the packet, and rings the doorbell. Called by the holder of
/// the queue's lane.
///
/// # Safety
/// The packet's kernarg block and signal stay valid until the dispatch completes; only the caller launches on
/// `queue`.
unsafe fn submit(queue: &OwnedQueue, packet: &KernelDispatchPacket) -> Result<(), Lost> {
    let Some(ring) = queue.ring() else {
        return Err(Lost::Queue(HSA_STATUS_ERROR_INVALID_QUEUE));
    };
    let index = queue.reserve();
    // The slot is free once the packet processor has read past the packet `size` slots back. Each launch on a lane
    // waits for its dispatch before the lane takes another, so this holds at once unless the queue died.
    while index.wrapping_sub(queue.read_index()) >= ring.size {
        if let Some(s) = queue.error() {
            return Err(Lost::Queue(s));
        }
        std::thread::yield_now();
    }
    // The size is a power of two.
    let slot = ring.base.wrapping_add((index & (ring.size - 1)) as usize);
    // SAFETY: the slot is one of the ring's, reserved above and no longer read by the packet processor, and only
    // this launch (the one launching on the queue, per the contract) writes it; the packet's references stay valid
    // per the contract.
    unsafe {
        publish(slot, packet);
        queue.ring_doorbell(ring, index);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_a_kernel_dispatch_with_barrier_and_system_fences() {
        let h = dispatch_header();
        assert_eq!(h & 0xff, 2, "HSA_PACKET_TYPE_KERNEL_DISPATCH");
        assert_eq!((h >> 8) & 1, 1, "barrier bit");
        assert_eq!((h >> 9) & 3, 2, "acquire fence: system scope");
        assert_eq!((h >> 11) & 3, 2, "release fence: system scope");
        assert_eq!(h, 0x1502);
        assert_eq!(dispatch_setup(), 1, "one dimension");
    }

    const LIMITS: Limits = Limits {
        max_threads: 1024,
        max_grid: u32::MAX,
        lds_bytes: 64 * 1024,
    };

    fn kernel(group: u32, private: u32, dynamic: bool) -> KernelInfo {
        KernelInfo {
            object: 0xabc0,
            kernarg_size: 24,
            group_size: group,
            private_size: private,
            dynamic_stack: dynamic,
        }
    }

    #[test]
    fn the_packet_counts_work_items_and_adds_team_shared_memory_after_static_lds() {
        let d = plan_dispatch(LIMITS, kernel(100, 32, false), 4, 256, 4096).unwrap();
        // Static LDS rounded up to 16 bytes, where team-shared memory starts.
        assert_eq!(
            d,
            Dispatch {
                workgroup_size: 256,
                grid_size: 1024,
                group_segment_size: 112 + 4096,
                private_segment_size: 32,
            }
        );
        let signal = Signal { handle: 77 };
        let p = dispatch_packet(d, 0xabc0, 0x7000, signal);
        assert_eq!(header_word(&p), 0x0001_1502);
        assert_eq!(
            (p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z),
            (256, 1, 1)
        );
        assert_eq!((p.grid_size_x, p.grid_size_y, p.grid_size_z), (1024, 1, 1));
        assert_eq!(p.group_segment_size, 4208);
        assert_eq!(p.private_segment_size, 32);
        assert_eq!(p.kernel_object, 0xabc0);
        assert_eq!(p.kernarg_address, 0x7000);
        assert_eq!(p.completion_signal, signal);
        assert_eq!((p.reserved0, p.reserved2), (0, 0));
    }

    #[test]
    fn a_dynamic_stack_gets_a_default_size() {
        let d = plan_dispatch(LIMITS, kernel(0, 64, true), 1, 1, 0).unwrap();
        assert_eq!(d.private_segment_size, DYNAMIC_STACK_BYTES);
        let d = plan_dispatch(LIMITS, kernel(0, 64 * 1024, true), 1, 1, 0).unwrap();
        assert_eq!(d.private_segment_size, 64 * 1024);
        let d = plan_dispatch(LIMITS, kernel(0, 0, false), 1, 1, 0).unwrap();
        assert_eq!((d.group_segment_size, d.private_segment_size), (0, 0));
    }

    #[test]
    fn launches_the_gpu_cannot_take_are_refused_with_the_reason() {
        let plan = |limits, kernel, teams, threads, shared| {
            plan_dispatch(limits, kernel, teams, threads, shared).map_err(|e| e.to_string())
        };
        let e = plan(LIMITS, kernel(0, 0, false), 1, 2048, 0).unwrap_err();
        assert!(e.contains("too many threads per team: 2048"), "{e}");
        let e = plan(LIMITS, kernel(0, 0, false), 1, 70_000, 0).unwrap_err();
        assert!(e.contains("too many threads per team"), "{e}");
        let e = plan(LIMITS, kernel(0, 0, false), u32::MAX, 2, 0).unwrap_err();
        assert!(e.contains("too many teams"), "{e}");
        let small = Limits {
            max_grid: 1000,
            ..LIMITS
        };
        assert!(plan(small, kernel(0, 0, false), 4, 250, 0).is_ok());
        assert!(plan(small, kernel(0, 0, false), 5, 250, 0).is_err());
        // Static LDS counts against the limit too.
        assert!(plan(LIMITS, kernel(0, 0, false), 1, 64, 64 * 1024).is_ok());
        let e = plan(LIMITS, kernel(16, 0, false), 1, 64, 64 * 1024).unwrap_err();
        assert!(
            e.contains(
                "65536 bytes of team-shared memory and the kernel has 16 bytes of static LDS"
            ),
            "{e}"
        );
        assert!(plan(LIMITS, kernel(0, 0, false), 1, 64, usize::MAX).is_err());
        assert!(plan(LIMITS, kernel(u32::MAX, 0, false), 1, 64, 0).is_err());
    }

    #[test]
    fn default_geometry_fills_every_compute_unit() {
        assert_eq!(default_geometry(104, 1024, true), (104, 256));
        assert_eq!(default_geometry(104, 1024, false), (832, 256));
        assert_eq!(default_geometry(104, 64, false), (832, 64));
        assert_eq!(default_geometry(u32::MAX, 1024, false), (u32::MAX, 256));
    }

    /// Under Miri: the body goes in first, then the header word, in place.
    #[test]
    fn a_published_packet_is_the_packet() {
        let packet = dispatch_packet(
            plan_dispatch(LIMITS, kernel(100, 32, true), 2, 64, 0).unwrap(),
            0xabc0,
            0x7000,
            Signal { handle: 9 },
        );
        let mut ring = [KernelDispatchPacket {
            header: HSA_PACKET_TYPE_INVALID,
            ..Default::default()
        }; 2];
        // SAFETY: a slot of a local ring nothing else uses.
        unsafe { publish(ring.as_mut_ptr().wrapping_add(1), &packet) };
        assert_eq!(ring[1], packet);
        assert_eq!(ring[0].header, HSA_PACKET_TYPE_INVALID);
    }
}
