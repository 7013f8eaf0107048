//! The fake machine's state (per thread: each test has its own machine, which threads it starts may share), the
//! controls a test has over it, and how the trace names what a call touches.

use super::machine::{Config, OnDispatch};
use crate::plugin::amdgpu::sys::*;
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a dispatch or copy waits for the others it should be in flight with ([`together`]).
pub const TOGETHER_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct Block {
    pub(super) storage: Vec<u128>,
    pub(super) len: usize,
}

impl Block {
    pub(super) fn start(&self) -> usize {
        self.storage.as_ptr() as usize
    }
}

/// A queue: the `hsa_queue_t` and its ring, which the plugin reads and writes through raw pointers (so the fake
/// touches them only through the same raw pointers, never a reference that would claim them), and the packet
/// processor's own state.
pub(super) struct FakeQueue {
    pub(super) queue: *mut Queue,
    pub(super) ring: *mut KernelDispatchPacket,
    pub(super) size: u32,
    pub(super) write: u64,
    pub(super) read: u64,
    pub(super) callback: Option<QueueCallback>,
    pub(super) data: *mut c_void,
}

// SAFETY: the queue struct and ring are the fake's own allocations, touched through raw pointers only (by the plugin
// and the packet processor, from whichever thread launches); `data` is the plugin's queue error cell, an atomic the
// plugin shares between threads itself.
unsafe impl Send for FakeQueue {}

impl Drop for FakeQueue {
    fn drop(&mut self) {
        // SAFETY: both came from `Box::into_raw` in `hsa_queue_create`, the ring with `size` packets; the plugin's
        // device (which holds the pointers) is gone before the last thread using its machine ends.
        unsafe {
            drop(Box::from_raw(self.queue));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ring,
                self.size as usize,
            )));
        }
    }
}

/// A dispatch the packet processor saw: the queue it was published on, the packet as published, and the
/// kernel-argument block's bytes.
#[derive(Clone, Debug)]
pub struct Dispatched {
    pub queue: usize,
    pub packet: KernelDispatchPacket,
    pub kernargs: Vec<u8>,
}

pub(super) struct State {
    pub(super) config: Config,
    pub(super) trace: Vec<String>,
    /// The next call of the named entry point returns this status.
    pub(super) failures: Vec<(&'static str, Status)>,
    /// Signal values (`None`: destroyed) and, for doorbells, their queue.
    pub(super) signals: Vec<(Option<SignalValue>, Option<usize>)>,
    pub(super) blocks: Vec<Block>,
    pub(super) freed: Vec<bool>,
    pub(super) queues: Vec<FakeQueue>,
    pub(super) dispatched: Vec<Dispatched>,
    pub(super) readers: usize,
    pub(super) executables: usize,
    /// The "device memory" of each variable symbol the plugin asked the address of: (symbol, block).
    pub(super) variables: Vec<(usize, usize)>,
    /// Waits left until a hanging signal drops to 0 (a slow kernel).
    pub(super) done_after_waits: Option<usize>,
    /// Dispatches and copies to be in flight together: (how many, how many have started).
    pub(super) together: Option<(usize, usize)>,
    /// Dispatches and copies that gave up waiting for the others to be in flight with them.
    pub(super) apart: usize,
}

thread_local! {
    static STATE: RefCell<Option<Arc<Mutex<State>>>> = const { RefCell::new(None) };
    /// Inside `with` on this thread: a call within it would wait on itself.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

pub(super) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let machine = STATE
        .with(|s| s.borrow().clone())
        .expect("fake::install first");
    assert!(
        !INSIDE.replace(true),
        "the fake's state is used within itself"
    );
    struct Outside;
    impl Drop for Outside {
        fn drop(&mut self) {
            INSIDE.set(false);
        }
    }
    let _outside = Outside;
    let mut state = machine.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut state)
}

/// A thread's machine, which other threads may use too: the plugin is called from every thread that uses its
/// device.
#[derive(Clone)]
pub struct Shared(Arc<Mutex<State>>);

/// This thread's machine, for threads it starts to use ([`Shared::use_here`]).
pub fn shared() -> Shared {
    Shared(
        STATE
            .with(|s| s.borrow().clone())
            .expect("fake::install first"),
    )
}

impl Shared {
    /// Makes this thread's calls go to the machine.
    pub fn use_here(&self) {
        STATE.with(|s| *s.borrow_mut() = Some(Arc::clone(&self.0)));
    }
}

/// Makes this thread's machine afresh.
pub(super) fn reset(config: Config) {
    STATE.with(|s| {
        *s.borrow_mut() = Some(Arc::new(Mutex::new(State {
            config,
            trace: Vec::new(),
            failures: Vec::new(),
            signals: Vec::new(),
            blocks: Vec::new(),
            freed: Vec::new(),
            queues: Vec::new(),
            dispatched: Vec::new(),
            readers: 0,
            executables: 0,
            variables: Vec::new(),
            done_after_waits: None,
            together: None,
            apart: 0,
        })))
    });
}

/// The next call of `call` fails with `status`.
pub fn fail_next(call: &'static str, status: Status) {
    with(|s| s.failures.push((call, status)));
}

/// The calls made since the last `take_trace`.
pub fn take_trace() -> Vec<String> {
    with(|s| std::mem::take(&mut s.trace))
}

pub fn dispatched() -> Vec<Dispatched> {
    with(|s| s.dispatched.clone())
}

/// How the trace names the address `p` (`#n` for block `n`).
pub fn trace_name(p: usize) -> String {
    with(|s| addr(s, p))
}

/// Where the variable symbol `name` lives, once the plugin has asked its address (executables share it).
pub fn variable(name: &str) -> Option<*mut u64> {
    with(|s| {
        let i = s.config.symbols.iter().position(|(n, _)| *n == name)?;
        let &(_, block) = s.variables.iter().find(|(v, _)| *v == i)?;
        Some(s.blocks[block].storage.as_mut_ptr().cast::<u64>())
    })
}

/// The signal waited for drops to 0 during the `n`th wait from now.
pub fn done_after_waits(n: usize) {
    with(|s| s.done_after_waits = Some(n));
}

/// The next `n` dispatches and copies each wait before they complete until all `n` have started, so they are in
/// flight together; one that has waited [`TOGETHER_TIMEOUT`] gives up and completes, counted by [`apart`].
pub fn together(n: usize) {
    with(|s| s.together = Some((n, 0)));
}

/// Dispatches and copies that gave up waiting for the others to be in flight with them ([`together`]).
pub fn apart() -> usize {
    with(|s| s.apart)
}

/// A dispatch or copy started: with [`together`], waits (not holding the state) until the others have started too.
pub(super) fn meet() {
    let started = with(|s| {
        let (n, started) = s.together.as_mut()?;
        *started += 1;
        if *started >= *n {
            s.together = None;
        }
        Some(())
    });
    if started.is_none() {
        return;
    }
    let deadline = Instant::now() + TOGETHER_TIMEOUT;
    while with(|s| s.together.is_some()) {
        if Instant::now() >= deadline {
            with(|s| s.apart += 1);
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the packet processor does with the next dispatches.
pub fn set_on_dispatch(on_dispatch: OnDispatch) {
    with(|s| s.config.on_dispatch = on_dispatch);
}

/// Records a call; returns the status it fails with (`SUCCESS` unless a failure was asked for).
pub(super) fn enter(call: &'static str, args: std::fmt::Arguments) -> Status {
    with(|s| {
        let mut line = format!("{call}({args})");
        let status = match s.failures.iter().position(|(c, _)| *c == call) {
            Some(i) => s.failures.remove(i).1,
            None => HSA_STATUS_SUCCESS,
        };
        if status != HSA_STATUS_SUCCESS {
            let _ = write!(line, " -> {}", status_name(status).unwrap_or("?"));
        }
        s.trace.push(line);
        LAST_CALL.set(Some(s.trace.len() - 1));
        status
    })
}

thread_local! {
    /// Where this thread's last call is in the trace: threads sharing the state trace calls in turn, and a call's
    /// result goes on its own line, not on whichever call another thread traced last.
    static LAST_CALL: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Appends the result to this thread's last traced call.
pub(super) fn result(what: std::fmt::Arguments) {
    with(|s| {
        if let Some(last) = LAST_CALL.get().and_then(|i| s.trace.get_mut(i)) {
            let _ = write!(last, " -> {what}");
        }
    })
}

pub(super) fn agent_name(s: &State, agent: Agent) -> String {
    match agent.handle {
        h if h == s.config.gpu => "gpu".into(),
        0x100 => "cpu".into(),
        0x300 => "dsp".into(),
        h => format!("agent {h:#x}"),
    }
}

/// `#n` for the start of block `n`, `#n+off` inside it, the address otherwise.
pub(super) fn addr(s: &State, p: usize) -> String {
    match s
        .blocks
        .iter()
        .position(|b| (b.start()..b.start() + b.len.max(1)).contains(&p))
    {
        Some(i) if p == s.blocks[i].start() => format!("#{i}"),
        Some(i) => format!("#{i}+{}", p - s.blocks[i].start()),
        None => "host memory".into(),
    }
}

pub(super) fn signal_name(s: &State, signal: Signal) -> String {
    match signal.handle.checked_sub(0x5000).map(|i| i as usize) {
        Some(i) if i < s.signals.len() => match s.signals[i].1 {
            Some(q) => format!("doorbell q{q}"),
            None => format!("s{i}"),
        },
        _ => format!("signal {:#x}", signal.handle),
    }
}

pub(super) fn new_signal(s: &mut State, value: SignalValue, queue: Option<usize>) -> Signal {
    s.signals.push((Some(value), queue));
    Signal {
        handle: 0x5000 + s.signals.len() as u64 - 1,
    }
}

pub(super) fn set_signal(s: &mut State, signal: Signal, value: SignalValue) {
    if let Some(v) = signal
        .handle
        .checked_sub(0x5000)
        .and_then(|i| s.signals.get_mut(i as usize))
    {
        v.0 = Some(value);
    }
}

pub(super) fn queue_index(s: &State, queue: *const Queue) -> usize {
    s.queues
        .iter()
        .position(|q| std::ptr::eq(q.queue, queue))
        .expect("a queue of this machine")
}

/// Writes `value` where the plugin asked for an attribute.
///
/// # Safety
/// `out` is valid for a `T`.
pub(super) unsafe fn put<T>(out: *mut c_void, value: T) {
    // SAFETY: per the contract.
    unsafe { out.cast::<T>().write_unaligned(value) }
}

pub(super) fn name64(name: &str) -> [u8; 64] {
    let mut buf = [0u8; 64];
    buf[..name.len()].copy_from_slice(name.as_bytes());
    buf
}
