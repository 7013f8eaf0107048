//! The executor: runs the operations on the runtime and reports each outcome to the model.

use super::*;

/// A buffer, owned or entered.
pub(crate) enum Slot {
    Owned(Vec<u32>),
    Entered(Mapped<Vec<u32>>),
}

impl Slot {
    pub(crate) fn data(&self) -> &[u32] {
        match self {
            Slot::Owned(v) => v,
            Slot::Entered(m) => m,
        }
    }
    pub(crate) fn data_mut(&mut self) -> &mut [u32] {
        match self {
            Slot::Owned(v) => v,
            Slot::Entered(m) => m,
        }
    }
}

/// A buffer as the operations at some depth see it: its slot, or the slice an enclosing data region re-bound.
pub(crate) enum Place<'a> {
    Slot(&'a mut Slot),
    Borrowed(&'a mut [u32]),
}

impl Place<'_> {
    pub(crate) fn data(&self) -> &[u32] {
        match self {
            Place::Slot(s) => s.data(),
            Place::Borrowed(y) => y,
        }
    }
    pub(crate) fn data_mut(&mut self) -> &mut [u32] {
        match self {
            Place::Slot(s) => s.data_mut(),
            Place::Borrowed(y) => y,
        }
    }
    pub(crate) fn reborrow(&mut self) -> Place<'_> {
        match self {
            Place::Slot(s) => Place::Slot(s),
            Place::Borrowed(y) => Place::Borrowed(y),
        }
    }
}

/// The places inside a data region on the buffer between `before` and `after`, re-bound as `y`.
pub(crate) fn rebuild<'a>(
    before: &'a mut [Place<'_>],
    y: &'a mut [u32],
    after: &'a mut [Place<'_>],
) -> Vec<Place<'a>> {
    let mut v: Vec<Place<'a>> = before.iter_mut().map(Place::reborrow).collect();
    v.push(Place::Borrowed(y));
    v.extend(after.iter_mut().map(Place::reborrow));
    v
}

pub(crate) struct Cx {
    pub(crate) model: Model,
    pub(crate) atomics: Vec<AtomicU32>,
}

pub(crate) fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".into())
}

pub(crate) fn outcome<R>(
    r: std::thread::Result<Result<R, offload::Error>>,
    f: impl FnOnce(R) -> Option<u64>,
) -> Outcome {
    match r {
        Ok(Ok(v)) => Outcome::Ok(f(v)),
        Ok(Err(e)) => {
            let m = e.to_string();
            // A task's panic (the host fallback's) comes back as an error with its message.
            if m.contains("panicked in the host fallback") {
                Outcome::Panic(m)
            } else {
                Outcome::Err(m)
            }
        }
        Err(p) => Outcome::Panic(message(&*p)),
    }
}

/// How often each kind of operation ended each way, for the summary line (a search that never refuses or never
/// runs out of memory tests less than it seems to).
pub(crate) static TALLY: std::sync::Mutex<std::collections::BTreeMap<String, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

pub(crate) fn tally(what: &str, out: &Outcome) {
    let how = match out {
        Outcome::Ok(_) => "ok",
        Outcome::Err(m) | Outcome::Panic(m) if m.contains("copy on device") => "stale",
        Outcome::Err(m) | Outcome::Panic(m) if m.contains("OFFLOAD_HOST_MEMORY") => "no memory",
        Outcome::Err(m) | Outcome::Panic(m) if m.contains("MANDATORY") => "mandatory",
        Outcome::Err(m) | Outcome::Panic(m) if m.contains("in use by") => "in use",
        Outcome::Err(m) if m.contains("failed on device") => "failed",
        Outcome::Panic(m) if m.contains("panicked in the host fallback") => "fallback panicked",
        Outcome::Err(_) => "other error",
        Outcome::Panic(_) => "other panic",
    };
    *TALLY
        .lock()
        .unwrap()
        .entry(format!("{what} {how}"))
        .or_default() += 1;
}

/// Runs `f` (data construct code) and says whether it panicked.
pub(crate) fn construct(f: impl FnOnce()) -> Outcome {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => Outcome::Ok(None),
        Err(p) => Outcome::Panic(message(&*p)),
    }
}

/// One region call through its `try_` entry point.
pub(crate) fn call_region(env: Env, kind: Kind, dev: Dev, y: &mut [u32]) -> Outcome {
    let (d, on) = env.args(dev);
    let none = |()| None;
    match kind {
        Kind::Set(v) => outcome(
            catch_unwind(AssertUnwindSafe(|| try_set_all(d, on, y, v))),
            none,
        ),
        Kind::AddOne => outcome(
            catch_unwind(AssertUnwindSafe(|| try_add_one(d, on, y))),
            none,
        ),
        Kind::AddOneDefault => {
            let before = omp_get_default_device();
            omp_set_default_device(d);
            let r = catch_unwind(AssertUnwindSafe(|| try_add_one_default(on, y)));
            omp_set_default_device(before);
            outcome(r, none)
        }
        Kind::Spread(k) => outcome(
            catch_unwind(AssertUnwindSafe(|| try_spread(d, on, y, k))),
            none,
        ),
        Kind::Sum => outcome(catch_unwind(AssertUnwindSafe(|| try_sum(d, on, y))), Some),
        Kind::Section(lo, hi, k) => outcome(
            catch_unwind(AssertUnwindSafe(|| try_add_section(d, on, lo, hi, y, k))),
            none,
        ),
        Kind::SumAlways => outcome(
            catch_unwind(AssertUnwindSafe(|| try_sum_always(d, on, y))),
            Some,
        ),
        Kind::DoubleAlways => outcome(
            catch_unwind(AssertUnwindSafe(|| try_double_always(d, on, y))),
            none,
        ),
        Kind::Overrun => {
            let at = y.len() + 1;
            outcome(
                catch_unwind(AssertUnwindSafe(|| try_add_then_overrun(d, on, y, at))),
                none,
            )
        }
    }
}

/// The region as a task (`nowait_f`), and how to wait for it.
pub(crate) fn nowait_region<'s>(
    s: &'s TaskScope<'s, '_>,
    env: Env,
    kind: Kind,
    dev: Dev,
    y: &'s mut [u32],
) -> Box<dyn FnOnce() -> Outcome + 's> {
    let (d, on) = env.args(dev);
    let none = |()| None;
    match kind {
        Kind::Set(v) => {
            let t = nowait_set_all(s, d, on, y, v);
            Box::new(move || outcome(Ok(t.wait()), none))
        }
        Kind::AddOne => {
            let t = nowait_add_one(s, d, on, y);
            Box::new(move || outcome(Ok(t.wait()), none))
        }
        Kind::AddOneDefault => {
            // A task runs with its spawning thread's default device.
            let before = omp_get_default_device();
            omp_set_default_device(d);
            let t = nowait_add_one_default(s, on, y);
            omp_set_default_device(before);
            Box::new(move || outcome(Ok(t.wait()), none))
        }
        Kind::Spread(k) => {
            let t = nowait_spread(s, d, on, y, k);
            Box::new(move || outcome(Ok(t.wait()), none))
        }
        Kind::Sum => {
            let t = nowait_sum(s, d, on, y);
            Box::new(move || outcome(Ok(t.wait()), Some))
        }
        Kind::Section(lo, hi, k) => {
            let t = nowait_add_section(s, d, on, lo, hi, y, k);
            Box::new(move || outcome(Ok(t.wait()), none))
        }
        Kind::SumAlways => {
            let t = nowait_sum_always(s, d, on, y);
            Box::new(move || outcome(Ok(t.wait()), Some))
        }
        Kind::DoubleAlways => {
            let t = nowait_double_always(s, d, on, y);
            Box::new(move || outcome(Ok(t.wait()), none))
        }
        Kind::Overrun => {
            let at = y.len() + 1;
            let t = nowait_add_then_overrun(s, d, on, y, at);
            Box::new(move || outcome(Ok(t.wait()), none))
        }
    }
}

/// Checks every buffer's host data, and which devices hold a copy, against the model.
pub(crate) fn observe(places: &[Place<'_>], cx: &mut Cx) -> Res {
    for (b, p) in places.iter().enumerate() {
        let data = p.data();
        cx.model.observe(b, data)?;
        if cx.model.env.llvm {
            continue;
        }
        for d in 0..cx.model.env.devices {
            let present = omp_target_is_present(data.as_ptr().cast(), d);
            let want = cx.model.bufs[b].copies[d as usize].is_some();
            if present != want {
                return Err(format!(
                    "buffer {b}: present on device {d}: {present}, the model says {want}"
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn run_ops(ops: &[Op], places: &mut [Place<'_>], cx: &mut Cx) -> Res {
    for op in ops {
        run_op(op, places, cx).map_err(|e| format!("{e}\n  at {op:?}"))?;
        observe(places, cx).map_err(|e| format!("{e}\n  after {op:?}"))?;
    }
    Ok(())
}

pub(crate) fn run_op(op: &Op, places: &mut [Place<'_>], cx: &mut Cx) -> Res {
    let env = cx.model.env;
    match *op {
        Op::Region { buf, kind, dev } => {
            if cx.model.unchecked_fallback(buf, dev) {
                return Ok(());
            }
            let out = call_region(env, kind, dev, places[buf].data_mut());
            tally("region", &out);
            cx.model.region(buf, kind, dev, &out)
        }
        Op::Data {
            buf,
            map,
            always,
            dev,
            ref body,
        } => data_region(buf, map, always, dev, body, places, cx),
        Op::Enter { buf, alloc, dev } => {
            let Place::Slot(slot) = &mut places[buf] else {
                return Ok(()); // borrowed by a data region: it cannot move
            };
            if !matches!(**slot, Slot::Owned(_)) {
                return Ok(()); // entered already
            }
            let Slot::Owned(v) = std::mem::replace(&mut **slot, Slot::Owned(Vec::new())) else {
                unreachable!("owned")
            };
            // A refused entry drops the buffer it took: keep its values to carry on with.
            let backup = v.clone();
            let (d, on) = env.args(dev);
            let r = catch_unwind(AssertUnwindSafe(|| {
                if alloc {
                    target_enter_data!(map(alloc: v), device(d), if(on))
                } else {
                    target_enter_data!(map(to: v), device(d), if(on))
                }
            }));
            let out = match r {
                Ok(m) => {
                    **slot = Slot::Entered(m);
                    Outcome::Ok(None)
                }
                Err(p) => {
                    **slot = Slot::Owned(backup);
                    Outcome::Panic(message(&*p))
                }
            };
            tally("enter", &out);
            cx.model.enter(buf, alloc, dev, &out)
        }
        Op::Exit { buf, how } => {
            let Place::Slot(slot) = &mut places[buf] else {
                return Ok(()); // borrowed by a data region
            };
            if !matches!(**slot, Slot::Entered(_)) {
                return Ok(());
            }
            let Slot::Entered(m) = std::mem::replace(&mut **slot, Slot::Owned(Vec::new())) else {
                unreachable!("entered")
            };
            let r = catch_unwind(AssertUnwindSafe(|| match how {
                ExitKind::From => m.exit_from(),
                ExitKind::Delete => m.exit_delete(),
                ExitKind::Drop => {
                    // The release copies nothing back; the host's values are what the buffer held.
                    let v = m.to_vec();
                    drop(m);
                    v
                }
            }));
            let out = match r {
                Ok(v) => {
                    **slot = Slot::Owned(v);
                    Outcome::Ok(None)
                }
                Err(p) => return Err(format!("the exit panicked: {}", message(&*p))),
            };
            cx.model.exit(buf, how, &out)
        }
        Op::Update {
            buf,
            to,
            dev,
            section,
        } => {
            let (d, on) = env.args(dev);
            let y = places[buf].data_mut();
            let out = construct(|| match (to, section) {
                (true, None) => target_update!(to: y, device(d), if(on)),
                (true, Some((lo, hi))) => target_update!(to: y[lo..hi], device(d), if(on)),
                (false, None) => target_update!(from: y, device(d), if(on)),
                (false, Some((lo, hi))) => target_update!(from: y[lo..hi], device(d), if(on)),
            });
            tally("update", &out);
            cx.model.update(buf, to, dev, section, &out)
        }
        Op::HostSet { buf, at, v, only } => {
            let y = places[buf].data_mut();
            y[at] = v;
            let devices: Vec<i32> = match only {
                Some(d) => vec![d],
                None => (0..env.devices).collect(),
            };
            let mut outs = Vec::new();
            for &d in &devices {
                let out = construct(|| target_update!(to: y, device(d)));
                let stop = matches!(out, Outcome::Panic(_));
                outs.push(out);
                if stop {
                    break;
                }
            }
            outs.iter().for_each(|o| tally("host write's update", o));
            cx.model.host_set(buf, at, v, &devices, &outs)
        }
        Op::Atomics {
            dev,
            threads,
            k,
            host_adds,
            data,
        } => {
            let (d, on) = env.args(dev);
            let run = |a: &[AtomicU32]| -> Vec<Outcome> {
                std::thread::scope(|s| {
                    let hs: Vec<_> = (0..threads)
                        .map(|_| {
                            s.spawn(move || {
                                let out = outcome(
                                    catch_unwind(AssertUnwindSafe(|| try_bump(d, on, a, k))),
                                    |()| None,
                                );
                                for _ in 0..host_adds {
                                    for e in a {
                                        e.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                                out
                            })
                        })
                        .collect();
                    hs.into_iter()
                        .map(|h| h.join().expect("a host thread"))
                        .collect()
                })
            };
            let a: &mut [AtomicU32] = &mut cx.atomics;
            let outs = match data {
                None => run(a),
                Some((false, m)) => target_data!(map(to: a), device(m) => { run(a) }),
                Some((true, m)) => target_data!(map(tofrom: a), device(m) => { run(a) }),
            };
            outs.iter().for_each(|o| tally("atomics region", o));
            cx.model.atomics(dev, k, host_adds, &outs)?;
            let want = cx.model.atomics;
            let now: Vec<u32> = cx
                .atomics
                .iter()
                .map(|e| e.load(Ordering::Relaxed))
                .collect();
            if now.iter().any(|&v| v != want) {
                return Err(format!("atomics hold {now:?}, every one should be {want}"));
            }
            Ok(())
        }
        Op::Readers { buf, ref readers } => {
            let readers: Vec<(bool, Dev)> = readers
                .iter()
                .copied()
                .filter(|&(_, dev)| !cx.model.unchecked_fallback(buf, dev))
                .collect();
            let y: &[u32] = places[buf].data();
            let outs: Vec<Outcome> = std::thread::scope(|s| {
                let threads: Vec<_> = readers
                    .iter()
                    .map(|&(always, dev)| {
                        s.spawn(move || {
                            let (d, on) = env.args(dev);
                            if always {
                                outcome(catch_unwind(|| try_sum_always(d, on, y)), Some)
                            } else {
                                outcome(catch_unwind(|| try_sum(d, on, y)), Some)
                            }
                        })
                    })
                    .collect();
                threads
                    .into_iter()
                    .map(|r| r.join().expect("a reader"))
                    .collect()
            });
            outs.iter().for_each(|o| tally("reader", o));
            let both: Vec<_> = readers.into_iter().zip(outs).collect();
            cx.model.readers(buf, &both)
        }
        Op::Tasks { ref parts } => {
            let mut taken = [false; BUFS];
            let parts: Vec<&(usize, Vec<(Kind, Dev)>)> = parts
                .iter()
                .filter(|(b, _)| !std::mem::replace(&mut taken[*b], true))
                .filter(|(b, ops)| {
                    !ops.iter()
                        .any(|&(_, dev)| cx.model.unchecked_fallback(*b, dev))
                })
                .collect();
            let mut slices: Vec<Option<&mut [u32]>> =
                places.iter_mut().map(|p| Some(p.data_mut())).collect();
            let outs: Vec<Vec<Outcome>> = task_scope(|s| {
                let waits: Vec<Box<dyn FnOnce() -> Vec<Outcome> + '_>> = parts
                    .iter()
                    .map(|(b, ops)| -> Box<dyn FnOnce() -> Vec<Outcome> + '_> {
                        let y = slices[*b].take().expect("distinct buffers");
                        if let [(kind, dev)] = ops[..] {
                            let w = nowait_region(s, env, kind, dev, y);
                            Box::new(move || vec![w()])
                        } else {
                            let t = s.spawn(move || {
                                ops.iter()
                                    .map(|&(kind, dev)| call_region(env, kind, dev, y))
                                    .collect::<Vec<_>>()
                            });
                            Box::new(move || {
                                t.wait()
                                    .unwrap_or_else(|e| vec![Outcome::Panic(e.to_string())])
                            })
                        }
                    })
                    .collect();
                waits.into_iter().map(|w| w()).collect()
            });
            for ((b, ops), outs) in parts.iter().zip(&outs) {
                if outs.len() != ops.len() {
                    return Err(format!("task on buffer {b}: {outs:?}"));
                }
                for (&(kind, dev), out) in ops.iter().zip(outs) {
                    tally("task region", out);
                    cx.model.region(*b, kind, dev, out).map_err(|e| {
                        format!("{e}\n  in the task on buffer {b}: {kind:?} on {dev:?}")
                    })?;
                }
            }
            Ok(())
        }
    }
}

pub(crate) fn data_region(
    b: usize,
    map: MapKind,
    always: bool,
    dev: Dev,
    body: &[Op],
    places: &mut [Place<'_>],
    cx: &mut Cx,
) -> Res {
    let (d, on) = cx.model.env.args(dev);
    let (before, rest) = places.split_at_mut(b);
    let (mid, after) = rest.split_first_mut().expect("a buffer");
    let y: &mut [u32] = mid.data_mut();
    let mut entered = false;
    let mut inner: Res = Ok(());
    let r = catch_unwind(AssertUnwindSafe(|| {
        macro_rules! block {
            ($y:ident) => {{
                entered = true;
                inner = cx
                    .model
                    .data_entered(b, map, always, dev, &Outcome::Ok(None))
                    .and_then(|()| run_ops(body, &mut rebuild(before, $y, after), cx));
            }};
        }
        match (map, always) {
            (MapKind::To, false) => target_data!(map(to: y), device(d), if(on) => { block!(y) }),
            (MapKind::To, true) => {
                target_data!(map(always, to: y), device(d), if(on) => { block!(y) })
            }
            (MapKind::From, false) => {
                target_data!(map(from: y), device(d), if(on) => { block!(y) })
            }
            (MapKind::From, true) => {
                target_data!(map(always, from: y), device(d), if(on) => { block!(y) })
            }
            (MapKind::ToFrom, false) => {
                target_data!(map(tofrom: y), device(d), if(on) => { block!(y) })
            }
            (MapKind::ToFrom, true) => {
                target_data!(map(always, tofrom: y), device(d), if(on) => { block!(y) })
            }
            (MapKind::Alloc, _) => target_data!(map(alloc: y), device(d), if(on) => { block!(y) }),
        }
    }));
    tally(
        "data region",
        &match &r {
            Ok(()) => Outcome::Ok(None),
            Err(p) => Outcome::Panic(message(&**p)),
        },
    );
    match r {
        Ok(()) => {
            inner?;
            cx.model.data_exit(b, map, always, dev);
            Ok(())
        }
        Err(p) if entered => Err(format!("the data region's exit panicked: {}", message(&*p))),
        Err(p) => cx
            .model
            .data_entered(b, map, always, dev, &Outcome::Panic(message(&*p))),
    }
}
