//! The operations a sequence is made of: where a construct runs, each kind of region, and the data constructs.

use super::*;

/// Where a construct is asked to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dev {
    /// `device(d)` of a device this process has.
    On(i32),
    /// `if(false)`: the host, by request.
    IfFalse,
    /// A device number no device has: the host fallback (an error under `MANDATORY`).
    Absent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Serial, writes without reading.
    Set(u32),
    /// Serial, reads and writes.
    AddOne,
    /// The same on the default device (`omp_set_default_device`), no `device(..)` clause.
    AddOneDefault,
    /// `teams_distribute_parallel_for` writing `y[i]`.
    Spread(u32),
    /// A reduction over `&[u32]`.
    Sum,
    /// `map(tofrom: y[lo..hi])`, adding `k` there.
    Section(usize, usize, u32),
    /// `map(always, to: y)`, a sum.
    SumAlways,
    /// `map(always, tofrom: y)`, doubling.
    DoubleAlways,
    /// Adds one everywhere, then panics (an index out of bounds).
    Overrun,
}

impl Kind {
    /// The elements it writes, and their new values from the old ones (`None`: unspecified); `None` if it only
    /// reads.
    pub(crate) fn writes(self, old: &[V]) -> Option<(std::ops::Range<usize>, Vec<V>)> {
        let each = |f: &dyn Fn(usize, u32) -> u32| {
            old.iter()
                .enumerate()
                .map(|(i, v)| v.map(|v| f(i, v)))
                .collect()
        };
        Some(match self {
            Kind::Set(v) => (0..LEN, vec![Some(v); LEN]),
            Kind::AddOne | Kind::AddOneDefault | Kind::Overrun => {
                (0..LEN, each(&|_, v| v.wrapping_add(1)))
            }
            Kind::Spread(k) => (
                0..LEN,
                each(&|i, v| v.wrapping_mul(3).wrapping_add(i as u32 + k)),
            ),
            Kind::DoubleAlways => (0..LEN, each(&|_, v| v.wrapping_mul(2))),
            Kind::Section(lo, hi, k) => (
                lo..hi,
                old[lo..hi]
                    .iter()
                    .map(|v| v.map(|v| v.wrapping_add(k)))
                    .collect(),
            ),
            Kind::Sum | Kind::SumAlways => return None,
        })
    }

    /// What it returns: a sum, or nothing (`Some(None)`); `None` where it reads unspecified data.
    pub(crate) fn result(self, old: &[V]) -> Option<Option<u64>> {
        match self {
            Kind::Sum | Kind::SumAlways => old
                .iter()
                .try_fold(0u64, |s, v| v.map(|v| s + v as u64))
                .map(Some),
            _ => Some(None),
        }
    }

    /// Its map copies the host's data into a present copy (`always, to`).
    pub(crate) fn always_to(self) -> bool {
        matches!(self, Kind::SumAlways | Kind::DoubleAlways)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapKind {
    To,
    From,
    ToFrom,
    Alloc,
}

impl MapKind {
    pub(crate) fn to(self) -> bool {
        matches!(self, MapKind::To | MapKind::ToFrom)
    }
    pub(crate) fn from(self) -> bool {
        matches!(self, MapKind::From | MapKind::ToFrom)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExitKind {
    /// `Mapped::exit_from`.
    From,
    /// `Mapped::exit_delete`.
    Delete,
    /// Dropping the `Mapped` (a release).
    Drop,
}

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Region {
        buf: usize,
        kind: Kind,
        dev: Dev,
    },
    /// `target_data!(map(..: y), device(..)/if(..) => { body })`.
    Data {
        buf: usize,
        map: MapKind,
        always: bool,
        dev: Dev,
        body: Vec<Op>,
    },
    /// `target_enter_data!(map(to|alloc: v))` of a buffer no data region borrows and none entered.
    Enter {
        buf: usize,
        alloc: bool,
        dev: Dev,
    },
    /// The exit of an entered buffer no data region borrows.
    Exit {
        buf: usize,
        how: ExitKind,
    },
    /// `target_update!(to|from: y or y[lo..hi])`.
    Update {
        buf: usize,
        to: bool,
        dev: Dev,
        section: Option<(usize, usize)>,
    },
    /// The host writes `y[at] = v`, then `target_update!(to: y, device(d))` on every device in turn (on `only`, if
    /// set).
    HostSet {
        buf: usize,
        at: usize,
        v: u32,
        only: Option<i32>,
    },
    /// `threads` host threads at once, each running `bump` (adding `k`) on `dev` and adding one `host_adds` times on
    /// the host; inside `target_data!(map(to|tofrom: a), device(d))` if `data` says so.
    Atomics {
        dev: Dev,
        threads: usize,
        k: u32,
        host_adds: u32,
        data: Option<(bool, i32)>,
    },
    /// Host threads at once, each summing the same buffer (shared) on its device, with `always, to` if `true`:
    /// each sees the logical value (or, after another's `always, to`, the host's), or is refused (another device
    /// holds newer data, a copy another reader uses cannot be written under it: `InUse`).
    Readers {
        buf: usize,
        readers: Vec<(bool, Dev)>,
    },
    /// One task per part (distinct buffers; a later part on a buffer already taken is left out): a single region
    /// as `nowait_f`, several as one `TaskScope::spawn`ed sequence.
    Tasks {
        parts: Vec<(usize, Vec<(Kind, Dev)>)>,
    },
}
