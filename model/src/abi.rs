//! The kernel ABI shared by the macro's map lists, the runtime, offload-device and the outlined kernel entries: map-type
//! bits, launch kinds, the host launch environment, and how a work-shared loop's iterations are split. (The fat
//! binary's tables are [`crate::fatbin`]'s.)

use core::ffi::c_void;

/// OpenMP map-type bits, with LLVM's values (`OpenMPOffloadMappingFlags`), so a map list we build reads the way
/// libomptarget's `__tgt_target_kernel` arguments do.
pub mod map_type {
    /// Copy the host data to the device on entry.
    pub const TO: u64 = 0x01;
    /// Copy the device data back to the host on exit.
    pub const FROM: u64 = 0x02;
    /// Copy even when the data were already present (the `always` modifier).
    pub const ALWAYS: u64 = 0x04;
    /// Remove the mapping on exit whatever its reference count (`map(delete: ..)`).
    pub const DELETE: u64 = 0x08;
    /// The entry is passed to the kernel as one of its arguments.
    pub const TARGET_PARAM: u64 = 0x20;
    /// LLVM's: libomptarget returns the entry's device address in its place (`use_device_ptr`); offload's own map
    /// lists never set it.
    pub const RETURN_PARAM: u64 = 0x40;
    /// A copy of the data for this launch alone, never entered in the present table (`firstprivate` values over 8
    /// bytes, the return slot, reductions).
    pub const PRIVATE: u64 = 0x80;
    /// Passed to the kernel by value: the entry's bits are the argument, there are no host data to map.
    pub const LITERAL: u64 = 0x100;
    /// No clause wrote the map: it follows from the parameter's type.
    pub const IMPLICIT: u64 = 0x200;
    /// The `close` modifier: a hint to place the data in memory close to the device.
    pub const CLOSE: u64 = 0x400;
    /// The `present` modifier: the data must already be mapped, and the construct fails if they are not.
    pub const PRESENT: u64 = 0x1000;
    /// Ours, in bits LLVM leaves unused: the host data are atomics of this many bytes each, so the runtime copies
    /// them with atomic loads and stores (other host threads may use them meanwhile).
    pub const HOST_ATOMIC_SHIFT: u32 = 36;
    /// Where the host atomics' element size is kept (from [`HOST_ATOMIC_SHIFT`]): zero for plain data.
    pub const HOST_ATOMIC_MASK: u64 = 0xf << HOST_ATOMIC_SHIFT;
    /// Ours: a literal that is device memory (`DevicePtr`, `DeviceBuffer`); the map-list entry's `base_size` holds
    /// the device it lives on.
    pub const DEVICE_MEMORY: u64 = 1 << 41;
    /// Ours: a reduction's output, one slot per team plus the initial value; `size` is one slot.
    pub const REDUCTION: u64 = 1 << 42;
    /// Ours: the region holds the data by `&mut`, so it may write the device copy whatever the map type (a
    /// `map(to: y)` of a `&mut` writes it too); the runtime then counts the device copy as possibly newer.
    pub const DEVICE_WRITES: u64 = 1 << 43;

    /// The map type of one field of a mapper struct (`#[derive(Mapper)]`) mapped by a clause of type `clause`, as
    /// OpenMP combines a clause with its mapper's map types: the transfers both allow (`to` of a `from` field is
    /// `alloc`, `tofrom` keeps the field's own), the clause's modifiers, and its `delete`.
    pub const fn mapper_field(clause: u64, field: u64) -> u64 {
        (clause & !(TO | FROM)) | (clause & field & (TO | FROM))
    }
}

/// Where a mapped variable is written: its name and source line, carried by its map-list entries so that a mapping
/// error names the variable and the line (libomptarget's `HstPtrName` serves the same purpose).
#[derive(Debug)]
pub struct VarSite {
    /// The variable's name as written (`y`, `self`).
    pub name: &'static str,
    /// The source file (`file!()` at the variable).
    pub file: &'static str,
    /// Its line.
    pub line: u32,
}

/// The most kernel arguments (after `dyn_ptr`) a region may have: each slice counts two, the return slot one.
pub const MAX_KERNEL_ARGS: usize = 64;

/// Whether a firstprivate value of `size` bytes crosses as its bits in its kernel argument (else the argument is a
/// private copy's device address): the host's map list and the device's entry both ask this.
#[inline(always)]
pub const fn passes_by_bits(size: usize) -> bool {
    size <= 8
}

/// Team-shared memory every team of a `teams, parallel` launch gets (what a CUDA block may use statically).
pub const TEAM_SHARED_BYTES: usize = 48 * 1024;

/// Room for the message of a panic reported by a host-image kernel ([`HostFailure`]).
pub const FAILURE_MESSAGE_CAP: usize = 1024;
/// Room for the file name of such a panic.
pub const FAILURE_FILE_CAP: usize = 512;

/// What a host-image kernel reports when it panicked. The buffers are fixed so the image (which links its own std and
/// allocator) never hands the runtime memory to free.
#[repr(C)]
pub struct HostFailure {
    /// Nonzero once [`HostFailure::record`] has written the rest; the host zeroes it before the launch.
    pub failed: u32,
    /// The panic's line.
    pub line: u32,
    /// The panic's column.
    pub column: u32,
    /// Bytes of `message` in use.
    pub message_len: u32,
    /// Bytes of `file` in use.
    pub file_len: u32,
    /// The panic message, UTF-8, truncated at a character boundary.
    pub message: [u8; FAILURE_MESSAGE_CAP],
    /// The file the panic names, UTF-8, truncated at a character boundary.
    pub file: [u8; FAILURE_FILE_CAP],
}

impl HostFailure {
    /// Records a failure, truncating at a character boundary.
    pub fn record(&mut self, message: &str, file: &str, line: u32, column: u32) {
        self.message_len = copy_truncated(&mut self.message, message) as u32;
        self.file_len = copy_truncated(&mut self.file, file) as u32;
        self.line = line;
        self.column = column;
        self.failed = 1;
    }
}

fn copy_truncated(dst: &mut [u8], src: &str) -> usize {
    let mut n = src.len().min(dst.len());
    while !src.is_char_boundary(n) {
        n -= 1;
    }
    dst[..n].copy_from_slice(&src.as_bytes()[..n]);
    n
}

/// A region's construct, as OpenMP names it: what its teams and threads do with its body. The model reads it from
/// the clauses once; the macro's launch, the kernel entry, the runtime's geometry and the plugins all take it as is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Construct {
    /// No parallel construct: the body runs once, as one team of one thread.
    #[default]
    Serial,
    /// `teams, parallel`: every thread of every team runs the whole body.
    Spmd,
    /// `teams_distribute_parallel_for[_simd]`: the body's loop is shared out over every team and thread.
    TeamsDistributeParallelFor,
    /// `teams_distribute`: the loop is shared out over the teams, one thread each unless `thread_limit` says more.
    TeamsDistribute,
    /// `parallel_for[_simd]`: the loop is shared out over one team's threads.
    ParallelFor,
}

impl Construct {
    /// Every construct, for tables and tests.
    pub const ALL: [Construct; 5] = [
        Construct::Serial,
        Construct::Spmd,
        Construct::TeamsDistributeParallelFor,
        Construct::TeamsDistribute,
        Construct::ParallelFor,
    ];

    /// The variant's name, as the macro's expansion spells it (`Construct::Spmd`).
    pub const fn name(self) -> &'static str {
        match self {
            Construct::Serial => "Serial",
            Construct::Spmd => "Spmd",
            Construct::TeamsDistributeParallelFor => "TeamsDistributeParallelFor",
            Construct::TeamsDistribute => "TeamsDistribute",
            Construct::ParallelFor => "ParallelFor",
        }
    }

    /// A work-shared loop: the body is per-thread `let`s, one loop whose iterations are shared out, and a tail.
    pub const fn is_work_shared(self) -> bool {
        matches!(
            self,
            Construct::TeamsDistributeParallelFor
                | Construct::TeamsDistribute
                | Construct::ParallelFor
        )
    }

    /// `teams, parallel`: every thread runs the whole body.
    pub const fn is_spmd(self) -> bool {
        matches!(self, Construct::Spmd)
    }

    /// `parallel_for[_simd]`: one team, whose threads share the loop.
    pub const fn is_one_team(self) -> bool {
        matches!(self, Construct::ParallelFor)
    }

    /// More than one thread may run the body: its `&mut [T]` parameters are views.
    pub const fn is_parallel(self) -> bool {
        !matches!(self, Construct::Serial)
    }

    /// Its teams take several threads by default (SPMD teams, and `parallel_for`'s one team), where a work-shared
    /// teams loop takes the device's default team shape.
    pub const fn wide_teams(self) -> bool {
        matches!(self, Construct::Spmd | Construct::ParallelFor)
    }

    /// The [`launch_kind`] of its threads.
    pub const fn launch_kind(self) -> u32 {
        match self {
            Construct::Serial => launch_kind::SERIAL,
            Construct::Spmd => launch_kind::SPMD,
            _ => launch_kind::WORK_SHARED,
        }
    }
}

/// What kind of region a kernel or host-fallback thread runs. The kernel entry tells offload-device (the host image:
/// a thread-local; GPUs: a word of static shared memory every thread of the block writes at entry), the host
/// fallback's team runner sets it for its threads, so `barrier()` and team-shared memory, which belong to
/// `teams, parallel` regions alone, fail anywhere else, including in `#[declare_target]` helpers the macro cannot
/// see into.
pub mod launch_kind {
    /// Not in a region: host code (or a serial region's host fallback, which runs as a plain call).
    pub const NONE: u32 = 0;
    /// A region without a parallel construct: one thread.
    pub const SERIAL: u32 = 1;
    /// A work-shared loop (`teams_distribute_parallel_for` and the like).
    pub const WORK_SHARED: u32 = 2;
    /// `teams, parallel`: every thread of every team runs the whole body.
    pub const SPMD: u32 = 3;

    /// Panics unless `kind` is [`SPMD`]: `what` (`offload::barrier()`, ...) was called where it has no meaning.
    #[inline(always)]
    #[track_caller]
    pub fn require_spmd(what: &str, kind: u32) {
        if kind != SPMD {
            not_spmd(what, kind)
        }
    }

    #[cold]
    #[inline(never)]
    #[track_caller]
    fn not_spmd(what: &str, kind: u32) -> ! {
        let place = match kind {
            SERIAL => "a serial region (one thread, no team to synchronise or share with)",
            WORK_SHARED => {
                "a work-shared loop region (each thread runs only its share of the iterations, so a thread with \
                 none never reaches a barrier, and the launch's team memory holds a reduction's partials)"
            }
            _ => "code outside any `teams, parallel` region",
        };
        panic!(
            "{what} was called in {place}; it is only for `teams, parallel` regions, where every thread of each \
             team runs the whole body: move the code into a `#[target(teams, parallel)]` region, or do without it"
        )
    }
}

/// What a team barrier's wait returns on the host devices (the C-ABI barrier of [`HostLaunchEnv`]).
pub mod barrier_status {
    /// The whole team arrived.
    pub const DONE: u32 = 0;
    /// Another thread of the team failed: the region is failing anyway.
    pub const FAILED: u32 = 1;
    /// `FINISHED + n`: thread `n` of the team finished the region without reaching this barrier, so it can never
    /// complete.
    pub const FINISHED: u32 = 2;

    /// Fails the calling thread for a barrier that returned `status` (not `DONE`) in team `team`.
    #[cold]
    #[inline(never)]
    #[track_caller]
    pub fn fail(status: u32, team: u32) -> ! {
        if status == FAILED {
            panic!("another thread of this team failed; leaving the barrier");
        }
        panic!(
            "thread {} of team {team} finished without reaching the barrier the others wait at: every thread of a \
             team must reach the same barriers (a barrier under a condition that differs between threads, or one \
             after an early `return`, can never complete; on a GPU it hangs)",
            status - FINISHED
        )
    }
}

/// What the host-elf plugin passes as the kernel's `dyn_ptr`: the launch geometry this thread runs in, team-shared
/// memory, and where to report a panic.
#[repr(C)]
pub struct HostLaunchEnv {
    /// This thread's team, from 0.
    pub team_num: u32,
    /// Teams in the launch.
    pub num_teams: u32,
    /// This thread's number in its team, from 0.
    pub thread_num: u32,
    /// Threads in each team.
    pub num_threads: u32,
    /// The team's team-shared memory (16-byte aligned, zeroed at launch); null or empty where the team has none.
    pub team_shared: *mut u8,
    /// Bytes of `team_shared`.
    pub team_shared_len: usize,
    /// The team's team-shared claim word, zero at launch: which atomic type `team_shared` hands the block out as
    /// ([`shared_atomics`]). Null where the team has no team-shared memory.
    pub team_shared_claim: *const core::sync::atomic::AtomicU32,
    /// Where this thread reports a panic to the plugin.
    pub failure: *mut HostFailure,
    /// gpu-sim: this launch's own panic record, so launches running side by side keep their panics apart (null on
    /// the host image, whose entries catch panics themselves).
    pub panic_record: *mut crate::gpu_panic::PanicRecord,
    /// The team's barrier: returns a [`barrier_status`] (anything but `DONE` means the barrier can never
    /// complete, and the caller must fail). `None` for a team of one thread.
    pub barrier: Option<unsafe extern "C" fn(ctx: *const c_void) -> u32>,
    /// The plugin's context `barrier` is called with (null without a barrier).
    pub barrier_ctx: *const c_void,
    /// The launch's `schedule(dynamic)` chunk counter, shared by all its threads (null where there is none).
    pub chunks: *const core::sync::atomic::AtomicUsize,
}

/// One thread of a kernel the host image hands to [`LlvmLaunch::run`]: `body` is the kernel's body, `env` the
/// thread's launch environment, `kind` the region's `launch_kind`.
pub type LlvmThread = unsafe extern "C" fn(body: *const c_void, env: *mut HostLaunchEnv, kind: u32);

/// Our launch description under LLVM's libomptarget (`OFFLOAD_RUNTIME=llvm`), whose host plugin calls a kernel once,
/// on the calling thread, and passes no launch environment of ours. The runtime launches with `KernelArgsTy` version 2,
/// which has no implicit argument, and passes the plan's tagged address ([`LlvmLaunch::tagged`]) as the kernel's
/// first argument, where `dyn_ptr` is. The kernel's entry, seeing it, hands its body to `run`, which runs it on the
/// runtime's host team executor once per thread of the launch's teams, each with its own [`HostLaunchEnv`]: the same
/// teams, barriers, team-shared memory and panic reports as on host-elf.
#[repr(C)]
pub struct LlvmLaunch {
    /// [`LlvmLaunch::MAGIC`]: a mistagged pointer is refused rather than called.
    pub magic: u64,
    /// Runs `thread(body, env, kind)` once for every thread of the launch; `plan` is this plan.
    pub run: unsafe extern "C" fn(
        plan: *const LlvmLaunch,
        body: *const c_void,
        thread: LlvmThread,
        kind: u32,
    ),
}

impl LlvmLaunch {
    /// What [`LlvmLaunch::magic`] holds in a live plan (the bytes spell `offllvm1`).
    pub const MAGIC: u64 = 0x6f66_666c_6c76_6d31; // "offllvm1"
    /// The tag bit: a `HostLaunchEnv` is 8-aligned, so its address never has it.
    const TAG: usize = 1;

    /// `plan`'s address as the kernel's first argument.
    pub fn tagged(plan: *const LlvmLaunch) -> u64 {
        (plan as usize | Self::TAG) as u64
    }

    /// The plan a kernel's `dyn_ptr` carries, if it carries one: null and all ones (what libomptarget passes itself)
    /// do not.
    ///
    /// # Safety
    /// A tagged `dyn_ptr` other than all ones is [`LlvmLaunch::tagged`]'s of a live plan.
    pub unsafe fn untag<'a>(dyn_ptr: *mut c_void) -> Option<&'a LlvmLaunch> {
        let p = dyn_ptr as usize;
        if p == usize::MAX || p & Self::TAG == 0 {
            return None;
        }
        // SAFETY: per the contract.
        let plan = unsafe { &*((p & !Self::TAG) as *const LlvmLaunch) };
        (plan.magic == Self::MAGIC).then_some(plan)
    }
}

/// The iterations `[lo, hi)` of `n` that global thread `g` of `total` runs in a work-shared loop: contiguous blocks
/// (what suits caches on a host), the first `n % total` threads taking one more. Host fallback and device images
/// share it, so both split a loop the same way.
pub const fn block_share(n: usize, g: usize, total: usize) -> (usize, usize) {
    let total = if total == 0 { 1 } else { total };
    let base = n / total;
    let extra = n % total;
    let lo = g * base + if g < extra { g } else { extra };
    let len = base + if g < extra { 1 } else { 0 };
    if g >= total {
        return (n, n);
    }
    (lo, lo + len)
}

/// The deepest loop nest `collapse(n)` shares out.
pub const MAX_COLLAPSE: usize = 6;

/// A `collapse(n)` loop nest as a tuple of its loops' iterators (each independent of the others): one flattened
/// iteration space, in row-major order.
///
/// # Safety
/// Distinct positions of the flattened space give distinct items, and `count` is the number of positions: a thread's
/// iteration tokens rely on it.
pub unsafe trait Nest: Clone {
    /// One iteration: a tuple of the loops' values, outermost first.
    type Item;
    /// Iterations in the flattened space.
    fn count(&self) -> usize;
    /// Iteration `k` of the flattened space (`nth` on a range is O(1): a division per level).
    fn at(&self, k: usize) -> Option<Self::Item>;
    /// Each level's length, outermost first, the innermost last (levels before the nest's are 1 long).
    fn lens(&self) -> [usize; MAX_COLLAPSE];
    /// The iteration at these row-major digits (aligned as [`Nest::lens`]).
    fn item(&self, digits: &[usize; MAX_COLLAPSE]) -> Option<Self::Item>;
    /// Whether the innermost loop counts up by one (a range, not `step_by`).
    const CONSECUTIVE: bool;
    /// The `n` iterations from these digits on, the innermost loop's positions counting up (the caller keeps them
    /// inside its length): what [`Nest::item`] gives for each, the outer loops' values computed once.
    fn row(
        &self,
        digits: &[usize; MAX_COLLAPSE],
        n: usize,
    ) -> Option<impl Iterator<Item = Self::Item>>;
}

/// A loop of a `collapse(n)` nest: an integer range, whose distinct positions are distinct values.
///
/// # Safety
/// `nth(k)` of a clone gives distinct items for distinct `k` below its length.
/// `part(from, n)` gives what `nth(from)`, `nth(from + 1)`, .. `nth(from + n - 1)` of clones give.
pub unsafe trait NestLevel: Iterator<Item: Copy> + Clone {
    /// Whether consecutive positions are consecutive integers.
    const CONSECUTIVE: bool;
    /// [`NestLevel::part`]'s iterator.
    type Part: Iterator<Item = Self::Item>;
    /// The positions `from..from + n` (inside the level's length).
    fn part(&self, from: usize, n: usize) -> Self::Part;
}
macro_rules! nest_levels {
    ($($t:ty),*) => {$(
        // SAFETY: integer ranges count up, by a positive step; a part is the same values.
        unsafe impl NestLevel for core::ops::Range<$t> {
            const CONSECUTIVE: bool = true;
            type Part = core::ops::Range<$t>;
            #[inline(always)]
            fn part(&self, from: usize, n: usize) -> Self::Part {
                // Inside the length: the sums stay in range, and wrap to the same bits for signed types.
                let start = self.start.wrapping_add(from as $t);
                start..start.wrapping_add(n as $t)
            }
        }
        // SAFETY: as above.
        unsafe impl NestLevel for core::ops::RangeInclusive<$t> {
            const CONSECUTIVE: bool = true;
            type Part = core::ops::RangeInclusive<$t>;
            #[inline(always)]
            fn part(&self, from: usize, n: usize) -> Self::Part {
                let start = self.start().wrapping_add(from as $t);
                if n == 0 {
                    let mut empty = start..=start;
                    empty.next();
                    return empty;
                }
                // The last position is inside the range, so it does not pass `end` (which may be the maximum).
                start..=start.wrapping_add((n - 1) as $t)
            }
        }
        // SAFETY: as above.
        unsafe impl NestLevel for core::iter::StepBy<core::ops::Range<$t>> {
            const CONSECUTIVE: bool = false;
            type Part = core::iter::Take<core::iter::Skip<Self>>;
            #[inline(always)]
            fn part(&self, from: usize, n: usize) -> Self::Part {
                self.clone().skip(from).take(n)
            }
        }
    )*};
}
nest_levels!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

macro_rules! nest {
    ($($oit:ident $ov:ident $ok:tt),+; $last:ident $lv:ident $lk:tt) => {
        nest!(@ [$($oit $ov $ok,)+ $last $lv $lk,] $($oit $ov $ok),+; $last $lv $lk);
    };
    (@ [$($it:ident $v:ident $k:tt,)+] $($oit:ident $ov:ident $ok:tt),+; $last:ident $lv:ident $lk:tt) => {
        // SAFETY: each level is an integer range (`NestLevel`), whose distinct positions are distinct values.
        unsafe impl<$($it: NestLevel),+> Nest for ($($it,)+) {
            type Item = ($($it::Item,)+);
            #[inline]
            fn count(&self) -> usize {
                let ($($v,)+) = self;
                1usize $(.saturating_mul($v.size_hint().1.unwrap_or(0)))+
            }
            #[inline]
            fn at(&self, k: usize) -> Option<Self::Item> {
                let ($($v,)+) = self;
                let lens = [$($v.size_hint().1.unwrap_or(0)),+];
                // Row-major digits of `k`, the innermost loop's last.
                let mut digits = lens;
                let mut rest = k;
                for d in (0..lens.len()).rev() {
                    digits[d] = rest % lens[d].max(1);
                    rest /= lens[d].max(1);
                }
                let mut digits = digits.into_iter();
                Some(($($v.clone().nth(digits.next()?)?,)+))
            }
            #[inline]
            fn lens(&self) -> [usize; MAX_COLLAPSE] {
                let ($($v,)+) = self;
                let first = MAX_COLLAPSE - [$($k),+].len();
                let mut lens = [1; MAX_COLLAPSE];
                $(lens[first + $k] = $v.size_hint().1.unwrap_or(0);)+
                lens
            }
            #[inline(always)]
            fn item(&self, digits: &[usize; MAX_COLLAPSE]) -> Option<Self::Item> {
                let ($($v,)+) = self;
                let first = MAX_COLLAPSE - [$($k),+].len();
                Some(($($v.clone().nth(digits[first + $k])?,)+))
            }
            const CONSECUTIVE: bool = <$last as NestLevel>::CONSECUTIVE;
            #[inline(always)]
            fn row(
                &self,
                digits: &[usize; MAX_COLLAPSE],
                n: usize,
            ) -> Option<impl Iterator<Item = Self::Item>> {
                let ($($ov,)* $lv,) = self;
                let first = MAX_COLLAPSE - [$($ok,)* $lk].len();
                let ($($ov,)*) = ($($ov.clone().nth(digits[first + $ok])?,)*);
                Some($lv.part(digits[MAX_COLLAPSE - 1], n).map(move |last| ($($ov,)* last,)))
            }
        }
    };
}
nest!(A a 0; B b 1);
nest!(A a 0, B b 1; C c 2);
nest!(A a 0, B b 1, C c 2; D d 3);
nest!(A a 0, B b 1, C c 2, D d 3; E e 4);
nest!(A a 0, B b 1, C c 2, D d 3, E e 4; F f 5);

/// A contiguous block of a nest's flattened space, walked like nested loops: the digits count up with carries from
/// the innermost (the last), so an iteration costs an add, not a division per level.
#[derive(Clone)]
pub struct FlatBlock<N> {
    nest: N,
    lens: [usize; MAX_COLLAPSE],
    digits: [usize; MAX_COLLAPSE],
    left: usize,
}

impl<N: Nest> Iterator for FlatBlock<N> {
    type Item = N::Item;
    #[inline(always)]
    fn next(&mut self) -> Option<N::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let item = self.nest.item(&self.digits);
        for d in (0..MAX_COLLAPSE).rev() {
            self.digits[d] += 1;
            if self.digits[d] < self.lens[d] {
                break;
            }
            self.digits[d] = 0;
        }
        item
    }
}

impl<N: Nest> FlatBlock<N> {
    /// Positions `lo..hi` of the flattened space (`lo <= hi <= count`).
    pub fn span(nest: N, lo: usize, hi: usize) -> Self {
        let lens = nest.lens();
        // Row-major digits of `lo`.
        let mut digits = [0; MAX_COLLAPSE];
        let mut rest = lo;
        for d in (0..MAX_COLLAPSE).rev() {
            digits[d] = rest % lens[d].max(1);
            rest /= lens[d].max(1);
        }
        FlatBlock {
            nest,
            lens,
            digits,
            left: hi.saturating_sub(lo),
        }
    }

    /// The block as runs of the innermost loop: `f(nest, digits, n)` for the `n` iterations from `digits` on, the
    /// outer digits fixed, in order. A run is a plain counted loop for the optimiser, where stepping the digits one
    /// iteration at a time is not.
    #[inline(always)]
    pub fn rows(mut self, mut f: impl FnMut(&N, &[usize; MAX_COLLAPSE], usize)) {
        const INNER: usize = MAX_COLLAPSE - 1;
        while self.left > 0 {
            // `digits[INNER] < lens[INNER]` while iterations are left.
            let n = (self.lens[INNER] - self.digits[INNER]).min(self.left);
            f(&self.nest, &self.digits, n);
            self.left -= n;
            self.digits[INNER] = 0;
            for d in (0..INNER).rev() {
                self.digits[d] += 1;
                if self.digits[d] < self.lens[d] {
                    break;
                }
                self.digits[d] = 0;
            }
        }
    }
}

/// The iterations of a `collapse(n)` nest that global thread `g` of `total` runs: a contiguous block of the flattened
/// space, as tuples.
pub fn flat_share<N: Nest>(nest: N, g: usize, total: usize) -> FlatBlock<N> {
    let (lo, hi) = block_share(nest.count(), g, total);
    FlatBlock::span(nest, lo, hi)
}

/// The iterations of a `collapse(n)` nest that global thread `g` of `total` runs on a GPU: every `total`-th of the
/// flattened space, from `g`.
pub fn flat_share_strided<N: Nest>(nest: N, g: usize, total: usize) -> StridedNest<N> {
    StridedNest {
        positions: (g.min(nest.count())..nest.count()).step_by(total.max(1)),
        nest,
    }
}

/// A GPU thread's grid-stride share of a `collapse(n)` nest ([`flat_share_strided`]).
#[derive(Clone)]
pub struct StridedNest<N> {
    nest: N,
    positions: core::iter::StepBy<core::ops::Range<usize>>,
}

impl<N: Nest> Iterator for StridedNest<N> {
    type Item = N::Item;
    #[inline(always)]
    fn next(&mut self) -> Option<N::Item> {
        self.nest.at(self.positions.next()?)
    }
}

/// Atomics a team may share through team-shared memory (every bit pattern valid, zero a valid start).
///
/// # Safety
/// Implemented only for the integer atomics, each with its own nonzero [`SharedAtomic::TAG`].
pub unsafe trait SharedAtomic: Sized + Sync {
    /// The type's mark in a launch's claim word ([`shared_atomics`]): nonzero, one per type.
    #[doc(hidden)]
    const TAG: u32;
    /// The type's name, for the error when a launch's memory is asked for under another type.
    #[doc(hidden)]
    const NAME: &'static str;
}
macro_rules! shared_atomics {
    ($($tag:literal $t:ident),*) => {
        $(
            // SAFETY: an integer atomic, with a tag of its own.
            unsafe impl SharedAtomic for core::sync::atomic::$t {
                const TAG: u32 = $tag;
                const NAME: &'static str = stringify!($t);
            }
        )*
        /// The name of the type whose [`SharedAtomic::TAG`] is `tag`.
        fn shared_atomic_name(tag: u32) -> &'static str {
            match tag {
                $($tag => stringify!($t),)*
                _ => "an unknown type",
            }
        }
    };
}
shared_atomics!(
    1 AtomicU8,
    2 AtomicU16,
    3 AtomicU32,
    4 AtomicU64,
    5 AtomicUsize,
    6 AtomicI8,
    7 AtomicI16,
    8 AtomicI32,
    9 AtomicI64,
    10 AtomicIsize
);

/// Makes `T` the element type of the team's shared memory for the rest of the launch, or fails the calling thread
/// if an earlier call of the launch made it another type. `claim` is the team's claim word: zero at launch, set once
/// by the first call, so every thread's compare-exchange sees the same winner and at most one type ever views the
/// bytes (a relaxed one suffices: the word never changes after its first write, and the memory's own accesses are
/// the caller's to order).
#[inline(always)]
#[track_caller]
pub fn claim_team_shared<T: SharedAtomic>(claim: &core::sync::atomic::AtomicU32) {
    use core::sync::atomic::Ordering::Relaxed;
    let found = claim.load(Relaxed);
    if found == T::TAG {
        return;
    }
    if found == 0 {
        match claim.compare_exchange(0, T::TAG, Relaxed, Relaxed) {
            Ok(_) => return,
            Err(t) if t == T::TAG => return,
            Err(t) => two_types(t, T::NAME),
        }
    }
    two_types(found, T::NAME)
}

#[cold]
#[inline(never)]
#[track_caller]
fn two_types(first: u32, asked: &str) -> ! {
    panic!(
        "offload::team_shared: this launch's team-shared memory is already handed out as `{}`, and this call asks \
         for it as `{asked}`: the same bytes as atomics of two types or widths are a mixed-size race, which is \
         undefined behaviour. Use one element type for every team_shared call of a region (the widest it needs, \
         splitting values with shifts), or team_shared_raw() for plain data kept apart with barrier()",
        shared_atomic_name(first)
    )
}

/// The first `len` atomics of a team-shared block `(ptr, bytes)`, whose claim word is `claim`; panics if the block
/// is absent or too small, or if the launch handed it out as another type ([`claim_team_shared`]).
///
/// # Safety
/// The block is the running team's, 16-byte aligned and zero-initialised, and outlives the region's run; `claim` is
/// null or the team's claim word for the same launch, alive as long, which only this function writes; the block's
/// bytes are viewed only through this function (or by a caller of `team_shared_raw` who keeps them apart).
#[track_caller]
pub unsafe fn shared_atomics<'a, T: SharedAtomic>(
    block: (*mut u8, usize),
    claim: *const core::sync::atomic::AtomicU32,
    len: usize,
) -> &'a [T] {
    let bytes = len.saturating_mul(core::mem::size_of::<T>());
    assert!(
        !block.0.is_null() && !claim.is_null() && bytes <= block.1,
        "offload::team_shared: {bytes} bytes asked, the team has {} (only `teams, parallel` regions have team-shared memory)",
        if block.0.is_null() { 0 } else { block.1 }
    );
    // SAFETY: per the contract, a live atomic word of the team's.
    claim_team_shared::<T>(unsafe { &*claim });
    // SAFETY: per the contract; atomics accept the zeroed bytes and are shared by design, and the claim makes `T`
    // the only type any thread of this launch views them as.
    unsafe { core::slice::from_raw_parts(block.0 as *const T, len) }
}

/// A work-shared loop's iterator and the part of it one thread runs ([`block_share`]). A range's part is again a
/// range, clamped to the range's end: the clamp changes nothing, but it lets the compiler prove `i < end`, and so
/// drop `x[i]`'s bounds check when the loop is `for i in 0..x.len()`.
///
/// # Safety
/// For the same iterator, the parts of `g` in `0..total` are disjoint (the thread tokens rely on it).
pub unsafe trait Share: Iterator + Sized {
    /// A [`crate::lanes::Lanes`] for every loop the lowering shares (the drivers take it so).
    type Part: Iterator<Item = Self::Item>;
    /// Thread `g`'s contiguous block (the host's split).
    fn share(self, g: usize, total: usize) -> Self::Part;
    /// As `Part`, a [`crate::lanes::Lanes`].
    type Strided: Iterator<Item = Self::Item>;
    /// Every `total`-th item from item `g` (a GPU's grid-stride split).
    fn share_strided(self, g: usize, total: usize) -> Self::Strided;
}

macro_rules! share_ranges {
    ($($t:ty),*) => {$(
        // SAFETY: `block_share` and the strided starts partition the items.
        unsafe impl Share for core::ops::Range<$t> {
            type Part = core::ops::Range<$t>;
            #[inline(always)]
            fn share(self, g: usize, total: usize) -> Self::Part {
                let n = self.size_hint().1.unwrap_or(0);
                let (lo, hi) = block_share(n, g, total);
                // `lo <= hi <= n = end - start`: the sums stay in range.
                let start = self.start.wrapping_add(lo as $t);
                let end = self.start.wrapping_add(hi as $t);
                start.min(self.end)..end.min(self.end)
            }
            type Strided = core::iter::StepBy<core::ops::Range<$t>>;
            #[inline(always)]
            fn share_strided(self, g: usize, total: usize) -> Self::Strided {
                let n = self.size_hint().1.unwrap_or(0);
                // `g < n` keeps the sum in range.
                let first = if g < n { self.start.wrapping_add(g as $t) } else { self.end };
                (first..self.end).step_by(total.max(1))
            }
        }
        // SAFETY: `block_share` and the strided starts partition the items.
        unsafe impl Share for core::iter::StepBy<core::ops::Range<$t>> {
            type Part = core::iter::Take<core::iter::Skip<Self>>;
            #[inline(always)]
            fn share(self, g: usize, total: usize) -> Self::Part {
                let n = self.size_hint().1.unwrap_or(0);
                let (lo, hi) = block_share(n, g, total);
                self.skip(lo).take(hi - lo)
            }
            type Strided = core::iter::StepBy<core::iter::Skip<Self>>;
            #[inline(always)]
            fn share_strided(self, g: usize, total: usize) -> Self::Strided {
                self.skip(g).step_by(total.max(1))
            }
        }
    )*};
}
share_ranges!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

// `a..=b`, which may end at the type's maximum (no `Range` can say that): parts are inclusive ranges too.
macro_rules! share_inclusive {
    ($($t:ty),*) => {$(
        // SAFETY: `block_share` and the strided starts partition the items.
        unsafe impl Share for core::ops::RangeInclusive<$t> {
            type Part = core::ops::RangeInclusive<$t>;
            #[inline(always)]
            fn share(self, g: usize, total: usize) -> Self::Part {
                // A range of more than `usize::MAX` items never finishes anyway.
                let n = self.size_hint().1.unwrap_or(usize::MAX);
                let (lo, hi) = block_share(n, g, total);
                if lo == hi {
                    #[allow(clippy::reversed_empty_ranges)]
                    return 1..=0;
                }
                // `lo < hi <= n`: both ends lie in the range.
                let start = *self.start();
                start.wrapping_add(lo as $t)..=start.wrapping_add((hi - 1) as $t)
            }
            type Strided = core::iter::StepBy<core::ops::RangeInclusive<$t>>;
            #[inline(always)]
            fn share_strided(self, g: usize, total: usize) -> Self::Strided {
                let n = self.size_hint().1.unwrap_or(usize::MAX);
                let (start, end) = (*self.start(), *self.end());
                #[allow(clippy::reversed_empty_ranges)]
                let r = if g < n { start.wrapping_add(g as $t)..=end } else { 1..=0 };
                r.step_by(total.max(1))
            }
        }
    )*};
}
share_inclusive!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

#[cfg(test)]
mod construct_tests {
    extern crate std;
    use super::{launch_kind, Construct};
    use std::format;

    /// Each construct is exactly one of serial, SPMD and work-shared, and its launch kind says which.
    #[test]
    fn every_construct_is_one_kind() {
        for c in Construct::ALL {
            let kinds = [c == Construct::Serial, c.is_spmd(), c.is_work_shared()];
            assert_eq!(kinds.iter().filter(|k| **k).count(), 1, "{c:?}");
            let kind = match kinds {
                [true, ..] => launch_kind::SERIAL,
                [_, true, _] => launch_kind::SPMD,
                _ => launch_kind::WORK_SHARED,
            };
            assert_eq!(c.launch_kind(), kind, "{c:?}");
            assert_eq!(c.is_parallel(), c != Construct::Serial, "{c:?}");
            assert!(!c.is_one_team() || c.is_work_shared(), "{c:?}");
            assert_eq!(format!("{c:?}"), c.name());
        }
    }
}
