//! GPU threads' stacks: mapped with a guard page below each, kept by each pool thread between launches (a few), and
//! a fault handler that reports a GPU thread overflowing its stack by block and thread before the process ends
//! (Rust's own report knows only the OS threads' stacks, so the fault would otherwise be a bare segfault).

use corosensei::stack::{DefaultStack, Stack};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::OnceLock;

/// A GPU thread's stack: generous, since images are built at the program's opt-level (unoptimised code has large
/// frames) and the panic path formats its message on it; a GPU's is far smaller. Only touched pages are committed.
pub const STACK_BYTES: usize = 512 * 1024;

/// The most stacks a launch maps at once over all its pool threads (each stack is two memory mappings, and the
/// kernel allows about 65530 per process): a launch of big blocks runs on fewer pool threads.
pub const MAX_IN_FLIGHT: usize = 8192;

/// Stacks a pool thread keeps after a launch, for the next one (a block of 256 threads needs no new mapping).
const KEEP: usize = 256;

std::thread_local! {
    static POOL: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
    /// The GPU thread running on this OS thread: its guard page `[lo, hi)`, block and thread (all 0 when none).
    static RUNNING: Cell<Running> = const { Cell::new(Running { lo: 0, hi: 0, block: 0, thread: 0 }) };
}

#[derive(Clone, Copy)]
struct Running {
    lo: usize,
    hi: usize,
    block: u32,
    thread: u32,
}

/// Makes sure this pool thread has `n` stacks; on failure it keeps none of those it mapped for this.
pub fn reserve(n: usize) -> std::io::Result<()> {
    install_overflow_report();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let before = p.len();
        while p.len() < n {
            match DefaultStack::new(STACK_BYTES) {
                Ok(s) => p.push(s),
                Err(e) => {
                    p.truncate(before);
                    return Err(e);
                }
            }
        }
        Ok(())
    })
}

/// A stack [`reserve`] left for a thread.
pub fn take() -> DefaultStack {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| unreachable!("reserve leaves a stack for every thread of a block"))
}

/// A finished thread's stack, for the next.
pub fn give(s: DefaultStack) {
    POOL.with(|p| p.borrow_mut().push(s));
}

/// Unmaps what this pool thread keeps beyond a few stacks: a launch of big blocks does not hold its mappings for good.
pub fn trim() {
    POOL.with(|p| p.borrow_mut().truncate(KEEP));
}

/// The guard page at the bottom of a stack: `[lo, hi)` (corosensei's `limit` is the mapping's start, the guard
/// page's own).
pub fn guard(s: &DefaultStack) -> (usize, usize) {
    let limit = s.limit().get();
    (limit, limit + page_size())
}

/// Runs `f` as GPU thread `thread` of block `block`, whose stack has the guard page `guard`: a fault there is
/// reported as that thread's stack overflow.
pub fn running<R>(guard: (usize, usize), block: u32, thread: u32, f: impl FnOnce() -> R) -> R {
    RUNNING.with(|r| {
        r.set(Running {
            lo: guard.0,
            hi: guard.1,
            block,
            thread,
        })
    });
    let out = f();
    RUNNING.with(|r| {
        r.set(Running {
            lo: 0,
            hi: 0,
            block: 0,
            thread: 0,
        })
    });
    out
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// The handlers in place before ours, for SIGSEGV and SIGBUS: faults that are not a GPU thread's overflow go there.
static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

/// Installs the fault handler once, chained in front of whatever handled faults before (std's overflow report).
fn install_overflow_report() {
    PREVIOUS.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid value to fill in; installing a handler that is async-signal-safe
        // (it reads a thread-local `Cell`, writes to stderr and aborts, or hands the fault on) and keeping the
        // previous ones, which it calls as the kernel would have.
        unsafe {
            let mut ours: libc::sigaction = std::mem::zeroed();
            ours.sa_sigaction = on_fault as *const () as usize;
            ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut ours.sa_mask);
            let mut previous: [libc::sigaction; 2] = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, &ours, &mut previous[0]);
            libc::sigaction(libc::SIGBUS, &ours, &mut previous[1]);
            previous
        }
    });
}

/// A fault on the running GPU thread's guard page is its stack overflowing: says so and aborts, as Rust does for an
/// OS thread. Any other fault goes to the previous handler, or, if there was none, ends the process as it would have.
///
/// # Safety
/// Called by the kernel as a `SA_SIGINFO` handler.
unsafe extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV and SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    let r = RUNNING.try_with(|r| r.get()).unwrap_or(Running {
        lo: 0,
        hi: 0,
        block: 0,
        thread: 0,
    });
    if r.lo <= addr && addr < r.hi {
        let mut msg = Message::default();
        msg.push(b"offload: gpu-sim: thread ");
        msg.number(r.thread as usize);
        msg.push(b" of block ");
        msg.number(r.block as usize);
        msg.push(b" overflowed its stack of ");
        msg.number(STACK_BYTES / 1024);
        msg.push(b" KiB (deep recursion or large locals in region code; a GPU thread's stack is far smaller)\n");
        // SAFETY: write(2) and abort(3) are async-signal-safe.
        unsafe {
            libc::write(2, msg.buf.as_ptr().cast(), msg.len);
            libc::abort();
        }
    }
    let previous = PREVIOUS.get().map(|p| p[usize::from(sig == libc::SIGBUS)]);
    match previous {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: the previous handler, called with the arguments its flags ask for.
            unsafe {
                if p.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: unsafe extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                        std::mem::transmute(p.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: unsafe extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                    f(sig);
                }
            }
        }
        _ => {
            // No handler before ours: the default action, on the fault's repeat when this returns.
            // SAFETY: resetting a signal's disposition is async-signal-safe.
            unsafe {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
    }
}

/// A message built without allocating (in a signal handler).
struct Message {
    buf: [u8; 256],
    len: usize,
}

impl Default for Message {
    fn default() -> Self {
        Message {
            buf: [0; 256],
            len: 0,
        }
    }
}

impl Message {
    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn number(&mut self, mut v: usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}
