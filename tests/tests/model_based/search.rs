//! Sequences: their generation, one run, shrinking a failing one, and the runner on every configuration.

use super::*;

pub(crate) fn dev(devices: i32) -> BoxedStrategy<Dev> {
    if devices > 0 {
        prop_oneof![
            8 => (0..devices).prop_map(Dev::On),
            1 => Just(Dev::IfFalse),
            1 => Just(Dev::Absent),
        ]
        .boxed()
    } else {
        prop_oneof![Just(Dev::IfFalse), Just(Dev::Absent)].boxed()
    }
}

pub(crate) fn section() -> impl Strategy<Value = (usize, usize)> {
    (0..LEN).prop_flat_map(|lo| (Just(lo), lo + 1..=LEN))
}

/// A region's kind; under `OFFLOAD_RUNTIME=llvm`, whose map sections are not implemented yet, no section.
pub(crate) fn kind(env: Env) -> impl Strategy<Value = Kind> {
    prop_oneof![
        1 => (0u32..100).prop_map(Kind::Set),
        1 => Just(Kind::AddOne),
        1 => Just(Kind::AddOneDefault),
        1 => (0u32..10).prop_map(Kind::Spread),
        2 => Just(Kind::Sum),
        1 => (section(), 1u32..5).prop_map(|((lo, hi), k)| Kind::Section(lo, hi, k)),
        1 => Just(Kind::SumAlways),
        1 => Just(Kind::DoubleAlways),
        1 => Just(Kind::Overrun),
    ]
    .prop_map(move |k| match k {
        Kind::Section(..) if env.llvm => Kind::AddOne,
        k => k,
    })
}

pub(crate) fn map_kind() -> impl Strategy<Value = (MapKind, bool)> {
    prop_oneof![
        1 => Just((MapKind::To, false)),
        1 => Just((MapKind::To, true)),
        1 => Just((MapKind::From, false)),
        1 => Just((MapKind::From, true)),
        2 => Just((MapKind::ToFrom, false)),
        1 => Just((MapKind::ToFrom, true)),
        1 => Just((MapKind::Alloc, false)),
    ]
}

pub(crate) fn leaf(env: Env) -> BoxedStrategy<Op> {
    let n = env.devices;
    let buf = 0..BUFS;
    let exit = prop_oneof![
        Just(ExitKind::From),
        Just(ExitKind::Delete),
        Just(ExitKind::Drop)
    ];
    // libomptarget refuses integer atomics in data constructs.
    let only = if n > 0 {
        prop_oneof![Just(None), (0..n).prop_map(Some)].boxed()
    } else {
        Just(None).boxed()
    };
    let atomics_data = if n > 0 && !env.llvm {
        prop_oneof![2 => Just(None), 1 => (any::<bool>(), 0..n).prop_map(Some)].boxed()
    } else {
        Just(None).boxed()
    };
    prop_oneof![
        8 => (buf.clone(), kind(env), dev(n)).prop_map(|(buf, kind, dev)| Op::Region { buf, kind, dev }),
        2 => (buf.clone(), any::<bool>(), dev(n)).prop_map(|(buf, alloc, dev)| Op::Enter { buf, alloc, dev }),
        2 => (buf.clone(), exit).prop_map(|(buf, how)| Op::Exit { buf, how }),
        3 => (buf.clone(), any::<bool>(), dev(n), proptest::option::of(section()).prop_map(move |s| s.filter(|_| !env.llvm)))
            .prop_map(|(buf, to, dev, section)| Op::Update { buf, to, dev, section }),
        2 => (buf.clone(), 0..LEN, 0u32..1000, only).prop_map(|(buf, at, v, only)| Op::HostSet { buf, at, v, only }),
        1 => (dev(n), 1usize..=3, 1u32..4, 0u32..3, atomics_data).prop_map(|(dev, threads, k, host_adds, data)| {
            Op::Atomics { dev, threads, k, host_adds, data }
        }),
        // libomptarget does not refuse an `always, to` copy into a copy a running region reads.
        1 => (buf.clone(), proptest::collection::vec((any::<bool>(), dev(n)), 2..=3))
            .prop_map(move |(buf, readers)| Op::Readers {
                buf,
                readers: readers.into_iter().map(|(always, dev)| (always && !env.llvm, dev)).collect(),
            }),
        1 => proptest::collection::vec(
            (buf.clone(), proptest::collection::vec((kind(env), dev(n)), 1..=3)),
            1..=BUFS
        )
        .prop_map(|parts| Op::Tasks { parts }),
    ]
    .boxed()
}

pub(crate) fn op(env: Env) -> impl Strategy<Value = Op> {
    let n = env.devices;
    leaf(env).prop_recursive(3, 32, 5, move |inner| {
        (
            0..BUFS,
            map_kind(),
            dev(n),
            proptest::collection::vec(inner, 0..6),
        )
            .prop_map(|(buf, (map, always), dev, body)| Op::Data {
                buf,
                map,
                always,
                dev,
                body,
            })
    })
}

pub(crate) fn sequence(env: Env) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(env), 1..14)
}

/// Runs one sequence from fresh buffers, then releases what is still entered and checks the end state: nothing
/// mapped, the host's data the logical value.
pub(crate) fn run_sequence(ops: &[Op], env: Env) -> Res {
    let mut cx = Cx {
        model: Model::new(env),
        atomics: (0..LEN).map(|_| AtomicU32::new(0)).collect(),
    };
    let mut slots: Vec<Slot> = cx
        .model
        .bufs
        .iter()
        .map(|b| Slot::Owned(b.h.iter().map(|v| v.unwrap()).collect()))
        .collect();
    let mut places: Vec<Place<'_>> = slots.iter_mut().map(Place::Slot).collect();
    run_ops(ops, &mut places, &mut cx)?;
    let end: Vec<Op> = (0..BUFS)
        .map(|buf| Op::Exit {
            buf,
            how: ExitKind::Drop,
        })
        .collect();
    run_ops(&end, &mut places, &mut cx).map_err(|e| format!("{e}\n  at the end"))?;
    for (b, buf) in cx.model.bufs.iter().enumerate() {
        assert!(
            buf.copies.iter().all(Option::is_none),
            "model: buffer {b} still mapped at the end"
        );
    }
    Ok(())
}

/// Every sequence one step simpler than `ops`: an operation left out, or a data region replaced by its block.
pub(crate) fn simpler(ops: &[Op]) -> Vec<Vec<Op>> {
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let with = |mid: &[Op]| [&ops[..i], mid, &ops[i + 1..]].concat();
        out.push(with(&[]));
        if let Op::Data { body, .. } = op {
            out.push(with(body));
            for b in simpler(body) {
                let mut op = op.clone();
                if let Op::Data { body, .. } = &mut op {
                    *body = b;
                }
                out.push(with(&[op]));
            }
        }
    }
    out
}

/// Runs a sequence; a panic of the test's own (a model's assertion) is a failure too.
pub(crate) fn attempt(ops: &[Op], env: Env) -> Res {
    catch_unwind(AssertUnwindSafe(|| run_sequence(ops, env)))
        .unwrap_or_else(|p| Err(format!("panicked: {}", message(&*p))))
}

/// Simplifies a failing sequence while it still fails.
pub(crate) fn flatten(mut ops: Vec<Op>, env: Env) -> Vec<Op> {
    while let Some(s) = simpler(&ops).into_iter().find(|s| attempt(s, env).is_err()) {
        ops = s;
    }
    ops
}

pub(crate) static QUIET: AtomicBool = AtomicBool::new(false);

/// The panic hook stays quiet while this lives.
pub(crate) struct Quiet;

impl Quiet {
    pub(crate) fn now() -> Quiet {
        QUIET.store(true, Ordering::Relaxed);
        Quiet
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        QUIET.store(false, Ordering::Relaxed);
    }
}

/// The sequences' expected panics (refusals, failing regions) would flood the output: the panic hook stays quiet
/// while they run.
pub(crate) fn quiet_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.load(Ordering::Relaxed) {
                previous(info)
            }
        }));
    });
}

/// Runs `cases` random sequences from `seed` on this process's devices; panics with the shrunk counterexample.
pub(crate) fn search(cases: u32, seed: u64) {
    let env = Env::here();
    // The model is of devices whose memory is the host's and which run these regions' images: on a GPU, atomics
    // are refused and a panic loses the device.
    let other = (0..env.devices).find_map(|d| {
        offload::device_info(d)
            .map(|i| i.plugin)
            .filter(|&p| !env.llvm && p != "host-elf" && p != "gpu-sim")
            .map(|p| format!("device {d} ({p})"))
    });
    if let Some(other) = other {
        eprintln!("model: skipped: {other} is not host-elf or gpu-sim (OFFLOAD_PLUGINS=host-elf or gpu-sim runs it)");
        return;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    quiet_panics();
    let t0 = std::time::Instant::now();
    let quiet = Quiet::now();
    let r = runner.run(&sequence(env), |ops| {
        attempt(&ops, env).map_err(TestCaseError::fail)
    });
    // Proptest cannot take a data region's block out of it: do that too, for the smallest program (unless the
    // failure depends on timing and does not come back).
    let r = r.map_err(|e| match e {
        TestError::Fail(why, ops) => {
            let simplest = flatten(ops.clone(), env);
            let (why, ops) = match attempt(&simplest, env) {
                Err(e) => (e, simplest),
                Ok(()) => (why.to_string(), ops),
            };
            let ops: Vec<String> = ops.iter().map(|op| format!("    {op:?}")).collect();
            format!("{why}\nsmallest failing sequence:\n{}", ops.join("\n"))
        }
        e => e.to_string(),
    });
    drop(quiet);
    eprintln!(
        "model: {cases} sequences on {} device(s){}{} in {:.1?}",
        env.devices,
        if env.mandatory { ", MANDATORY" } else { "" },
        if env.memory_limited {
            ", little device memory"
        } else {
            ""
        },
        t0.elapsed()
    );
    let tally = std::mem::take(&mut *TALLY.lock().unwrap());
    eprintln!("model: outcomes: {tally:?}");
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// Whether this process runs the other configurations in processes of their own: it has one host-elf device of our
/// runtime, and none of the settings they get.
pub(crate) fn spawns_others() -> bool {
    let ours = std::env::var_os("OFFLOAD_RUNTIME").is_none();
    let one_host_elf = omp_get_num_devices() == 1
        && offload::device_info(0).is_some_and(|i| i.plugin == "host-elf");
    let plain = [
        "OFFLOAD_HOST_DEVICES",
        "OFFLOAD_HOST_MEMORY",
        "OMP_TARGET_OFFLOAD",
    ]
    .iter()
    .all(|v| std::env::var_os(v).is_none());
    ours && one_host_elf && plain
}

/// Device memory for the configuration with little of it: two of the buffers' copies fit (each takes its 32 bytes
/// and a 64-byte header), so some maps fail and most succeed.
pub(crate) const LITTLE_MEMORY: &str = "200";

/// Runs the search here and, from a plain process with one host-elf device, on two devices and on two with little
/// memory, each in a process of its own (the runtime reads its settings at start), at once.
pub(crate) fn everywhere(name: &str, ignored: bool, cases: u32, seed: u64) {
    let others: &[&[(&str, &str)]] = if spawns_others() {
        &[
            &[("OFFLOAD_HOST_DEVICES", "2")],
            &[
                ("OFFLOAD_HOST_DEVICES", "2"),
                ("OFFLOAD_HOST_MEMORY", LITTLE_MEMORY),
            ],
        ]
    } else {
        &[]
    };
    let mut args = vec![name, "--exact", "--nocapture"];
    if ignored {
        args.push("--ignored");
    }
    std::thread::scope(|s| {
        let runs: Vec<_> = others
            .iter()
            .map(|set| (set, s.spawn(|| rerun_self(&args, &[], set))))
            .collect();
        search(cases, seed);
        for (set, run) in runs {
            let out = run.join().expect("the other process");
            let stderr = String::from_utf8_lossy(&out.stderr);
            for line in stderr.lines().filter(|l| l.starts_with("model: ")) {
                eprintln!("{line} ({set:?})");
            }
            assert!(
                out.status.success(),
                "the model with {set:?}:\n{}{stderr}",
                String::from_utf8_lossy(&out.stdout),
            );
        }
    });
}

pub(crate) fn cases_from_env(default: u32) -> u32 {
    std::env::var("OFFLOAD_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
