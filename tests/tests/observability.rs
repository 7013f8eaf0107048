//! Observability: `OFFLOAD_INFO` levels on stderr and the `OFFLOAD_PROFILE` Chrome trace. Each case runs
//! the probe binary in its own process, since the runtime reads the environment once.
//!
//! The probe maps `y`, 100 `i64`s (800 bytes) at `y_addr`; `double` maps it `tofrom` and returns a `bool` (a 1-byte
//! private `from` copy), `data-env` runs `double` inside `target_data!(map(tofrom: y))` with a `target_update!(from: y)`.

mod common;

use common::probe;
use serde_json::Value;
use std::path::PathBuf;

const REGION: &str = "offload_tests::kernels::double";
const LAUNCH: &str = "offload: launch offload_tests::kernels::double (entry __omp_offloading_rs_13offload_tests7kernels6double) on device 0 (host-elf)";

/// A fresh path for a trace file.
fn trace_path(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("observability-{name}.json"));
    let _ = std::fs::remove_file(&p);
    p
}

/// Lines that say something below launch level.
const DETAIL: [&str; 4] = [
    "offload: copy ",
    "offload: mapping ",
    "offload: alloc",
    "offload: free",
];

/// The device address in a transfer line `... host H -> device D (...)`.
fn device_address_of(line: &str) -> String {
    let at = line.find("-> device 0x").expect(line) + "-> device ".len();
    line[at..]
        .split_whitespace()
        .next()
        .expect(line)
        .to_string()
}

#[test]
fn unset_and_zero_are_quiet() {
    for env in [&[][..], &[("OFFLOAD_INFO", "0")][..]] {
        let r = probe(&["data-env"], env);
        r.assert_ok("device");
        assert_eq!(r.stderr(), "", "{env:?}");
    }
}

#[test]
fn level_1_shows_launches_but_no_transfers() {
    let r = probe(&["double"], &[("OFFLOAD_INFO", "1")]);
    r.assert_ok("device");
    assert_eq!(r.lines("offload: launch "), [LAUNCH], "{}", r.describe());
    for d in DETAIL {
        assert!(r.lines(d).is_empty(), "{d}: {}", r.describe());
    }
}

#[test]
fn level_1_says_when_a_host_launch_gets_fewer_threads_than_asked_and_why() {
    let r = probe(&["wide"], &[("OFFLOAD_INFO", "1")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    let hw = r.get("hardware_threads");
    // The default: as many teams as hardware threads; each gets as many threads as the host runs at once.
    let note = format!(
        "offload: region probe::wide gets {hw} teams of {hw} threads: thread_limit(4096) is more than {hw}, the \
         host's hardware threads (a team's threads all run at once, for its barriers; more would fight for the cores)"
    );
    assert_eq!(
        r.lines("offload: region "),
        [
            format!("{note} (device 0, host-elf)"),
            format!("{note} (host-fallback)")
        ],
        "one note for each wide launch, none for the narrow ones: {}",
        r.describe()
    );
    // Each note follows its launch's line.
    let stderr = r.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    for k in (0..lines.len()).filter(|&k| lines[k].starts_with("offload: region ")) {
        assert!(
            k > 0 && lines[k - 1].starts_with("offload: launch probe::wide"),
            "{}",
            r.describe()
        );
    }
    // Quiet by default.
    let r = probe(&["wide"], &[]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.stderr(), "");
}

#[test]
fn level_2_shows_every_transfer_with_direction_size_addresses_and_region() {
    let r = probe(&["double"], &[("OFFLOAD_INFO", "2")]);
    r.assert_ok("device");
    let y = r.get("y_addr");
    let here = format!("(device 0, host-elf, region {REGION})");
    // In: `y` only (the return slot is `from`).
    let to = r.lines("offload: copy host to device:");
    assert_eq!(to.len(), 1, "{}", r.describe());
    let dev = device_address_of(&to[0]);
    assert_eq!(
        to[0],
        format!("offload: copy host to device: 800 bytes, host {y} -> device {dev} {here}")
    );
    // Out: the return value (a bool), then `y` from the same device address back to the same host address.
    let from = r.lines("offload: copy device to host:");
    assert_eq!(from.len(), 2, "{}", r.describe());
    assert!(
        from[0].starts_with("offload: copy device to host: 1 bytes, device 0x")
            && from[0].ends_with(&here),
        "{}",
        from[0]
    );
    assert_eq!(
        from[1],
        format!("offload: copy device to host: 800 bytes, device {dev} -> host {y} {here}")
    );
    // Level 2 includes level 1, and nothing of level 4.
    assert_eq!(r.lines("offload: launch "), [LAUNCH]);
    for d in ["offload: mapping ", "offload: alloc", "offload: free"] {
        assert!(r.lines(d).is_empty(), "{d}: {}", r.describe());
    }
    // The launch comes between the copies in and out.
    let err = r.stderr();
    let (i, l, o) = (
        err.find(&to[0]).unwrap(),
        err.find(LAUNCH).unwrap(),
        err.find(&from[1]).unwrap(),
    );
    assert!(i < l && l < o, "{err}");
}

#[test]
fn level_3_is_launches_and_transfers() {
    let r = probe(&["double"], &[("OFFLOAD_INFO", "3")]);
    r.assert_ok("device");
    assert_eq!(r.lines("offload: launch ").len(), 1);
    assert_eq!(r.lines("offload: copy ").len(), 3, "{}", r.describe());
    assert!(r.lines("offload: mapping ").is_empty(), "{}", r.describe());
}

#[test]
fn level_4_shows_every_mapping_table_change_with_counts() {
    let r = probe(&["data-env"], &[("OFFLOAD_INFO", "4")]);
    r.assert_ok("device");
    let y = r.get("y_addr");
    let data = "(device 0, host-elf, target_data!)";
    let exit = "(device 0, host-elf, target_data! exit)";
    let region = format!("(device 0, host-elf, region {REGION})");
    let to = r.lines("offload: copy host to device:");
    assert_eq!(
        to.len(),
        1,
        "only target_data! copies y in: {}",
        r.describe()
    );
    let dev = device_address_of(&to[0]);
    assert!(to[0].ends_with(data), "{}", to[0]);
    let entry = |change: &str, s: u32, cx: &str| {
        format!(
            "offload: mapping {change}: host {y}, 800 bytes, device {dev}, refs structured {s} dynamic 0 {cx}"
        )
    };
    assert_eq!(
        r.lines("offload: mapping "),
        [
            entry("new", 1, data),
            entry("up", 2, &region),
            entry("down", 1, &region),
            entry("removed", 0, exit),
        ],
        "{}",
        r.describe()
    );
    // The present copy is not copied by the region; target_update! and the exit copy it back.
    let out: Vec<String> = r
        .lines("offload: copy device to host: 800 bytes")
        .iter()
        .map(|l| l[l.rfind('(').unwrap()..].to_string())
        .collect();
    assert_eq!(
        out,
        ["(device 0, host-elf, target_update!)", exit],
        "{}",
        r.describe()
    );
    // The allocation behind the entry, and the region's private return slot.
    let allocs = r.lines("offload: alloc: ");
    let frees = r.lines("offload: free: ");
    assert_eq!(
        allocs[0],
        format!("offload: alloc: 800 bytes at device {dev} {data}")
    );
    assert_eq!(
        frees.last().unwrap(),
        &format!("offload: free: 800 bytes at device {dev} {exit}")
    );
    assert_eq!((allocs.len(), frees.len()), (2, 2), "{}", r.describe());
    assert!(
        allocs[1].starts_with("offload: alloc: 1 bytes at device 0x")
            && allocs[1].ends_with(&region)
    );
    // Lower levels are still on.
    assert_eq!(r.lines("offload: launch "), [LAUNCH]);
}

#[test]
fn a_negative_level_enables_everything() {
    let r = probe(&["double"], &[("OFFLOAD_INFO", "-1")]);
    r.assert_ok("device");
    assert_eq!(r.lines("offload: launch ").len(), 1);
    assert_eq!(r.lines("offload: copy ").len(), 3);
    let changes: Vec<String> = r
        .lines("offload: mapping ")
        .iter()
        .map(|l| l.split(':').nth(1).unwrap().trim().to_string())
        .collect();
    assert_eq!(
        changes,
        ["mapping new", "mapping removed"],
        "{}",
        r.describe()
    );
}

// ---- OFFLOAD_PROFILE ----------------------------------------------------------------------------------------------

/// The trace's complete events, after checking the file's shape and every event's fields.
fn read_trace(path: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    assert_eq!(v["displayTimeUnit"], "ns");
    let events = v["traceEvents"]
        .as_array()
        .expect("traceEvents is an array");
    let complete: Vec<Value> = events.iter().filter(|e| e["ph"] == "X").cloned().collect();
    assert!(!complete.is_empty(), "{text}");
    let pid = complete[0]["pid"].as_u64().expect("pid");
    for e in &complete {
        assert!(e["name"].as_str().is_some_and(|n| !n.is_empty()), "{e}");
        assert!(e["cat"].as_str().is_some(), "{e}");
        assert!(e["ts"].as_f64().is_some_and(|t| t >= 0.0), "{e}");
        assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
        assert_eq!(e["pid"].as_u64(), Some(pid), "{e}");
        assert!(e["tid"].as_u64().is_some(), "{e}");
        assert!(e["args"].is_object(), "{e}");
    }
    // Every other record is metadata (the process name).
    assert!(events.iter().all(|e| e["ph"] == "X" || e["ph"] == "M"));
    complete
}

fn in_cat<'a>(events: &'a [Value], cat: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["cat"] == cat).collect()
}

fn ts(e: &Value) -> f64 {
    e["ts"].as_f64().unwrap()
}

fn end(e: &Value) -> f64 {
    ts(e) + e["dur"].as_f64().unwrap()
}

#[test]
fn profile_writes_a_chrome_trace_of_registration_devices_images_memory_transfers_and_launches() {
    let path = trace_path("double");
    let r = probe(&["double"], &[("OFFLOAD_PROFILE", path.to_str().unwrap())]);
    r.assert_ok("device");
    assert_eq!(r.stderr(), "", "profiling prints nothing");
    let ev = read_trace(&path);
    let y = r.get("y_addr");

    let reg = in_cat(&ev, "registration");
    assert_eq!(reg.len(), 1, "{reg:?}");
    assert!(reg[0]["args"]["images"].as_u64() >= Some(1), "{}", reg[0]);
    // double, scale_on (the library) and negate (the probe).
    assert!(reg[0]["args"]["entries"].as_u64() >= Some(3), "{}", reg[0]);

    let init = in_cat(&ev, "device init");
    for e in &init {
        let a = &e["args"];
        assert_eq!(
            e["name"],
            format!("discover {}", a["plugin"].as_str().unwrap())
        );
        // A count, or the reason there is none.
        assert!(
            a["devices"].as_u64() > Some(0) || a["reason"].as_str().is_some_and(|s| !s.is_empty()),
            "{e}"
        );
    }
    let host = init
        .iter()
        .find(|e| e["args"]["plugin"] == "host-elf")
        .expect("host-elf discovery");
    assert_eq!(host["args"]["devices"], 1);

    let images = in_cat(&ev, "image");
    let image = images
        .iter()
        .find(|e| e["args"]["package"] == "offload-tests")
        .expect("the host image of offload-tests");
    assert_eq!(image["args"]["triple"], "x86_64-unknown-linux-gnu");
    assert!(image["args"]["arch"].is_string());
    assert!(image["args"]["bytes"].as_u64() > Some(0));
    assert_eq!(image["args"]["device"], 0);
    assert!(image["args"].get("error").is_none(), "{image}");

    let memory = in_cat(&ev, "memory");
    let of = |name: &str, bytes: u64| {
        memory
            .iter()
            .filter(|e| e["name"] == name && e["args"]["bytes"] == bytes)
            .count()
    };
    assert_eq!((of("alloc", 800), of("free", 800)), (1, 1), "{memory:?}");
    assert!(memory
        .iter()
        .all(|e| e["args"]["device"] == 0 && e["args"]["region"] == REGION));

    let transfers = in_cat(&ev, "transfer");
    let moved = |dir: &str| {
        transfers
            .iter()
            .filter(|e| {
                e["name"] == dir
                    && e["args"]["direction"] == dir
                    && e["args"]["bytes"] == 800
                    && e["args"]["host_address"] == y
                    && e["args"]["device"] == 0
                    && e["args"]["plugin"] == "host-elf"
                    && e["args"]["region"] == REGION
            })
            .count()
    };
    assert_eq!(moved("host to device"), 1, "{transfers:?}");
    assert_eq!(moved("device to host"), 1, "{transfers:?}");

    let launches = in_cat(&ev, "launch");
    assert_eq!(launches.len(), 1, "{launches:?}");
    let launch = launches[0];
    assert_eq!(launch["name"], REGION);
    let a = &launch["args"];
    assert_eq!(a["region"], REGION);
    assert_eq!(a["device"], 0);
    assert_eq!(a["plugin"], "host-elf");
    assert!(a["entry"]
        .as_str()
        .unwrap()
        .starts_with("__omp_offloading_rs_"));
    assert!(
        a["teams"].as_u64() >= Some(1) && a["threads"].as_u64() >= Some(1),
        "{launch}"
    );
    assert!(in_cat(&ev, "fallback").is_empty());

    // Time order: registration before main, devices and images on first use, then the region, which encloses its
    // transfers and its launch.
    assert!(end(reg[0]) <= ts(host) && end(host) <= ts(image) && end(image) <= ts(launch));
    let region = in_cat(&ev, "region");
    assert_eq!(region.len(), 1);
    assert_eq!(region[0]["name"], REGION);
    let eps = 0.0015;
    for e in transfers.iter().chain(memory.iter()).chain([&launch]) {
        assert!(
            ts(region[0]) <= ts(e) + eps && end(e) <= end(region[0]) + eps,
            "{e} outside {}",
            region[0]
        );
    }
}

#[test]
fn profile_records_host_fallbacks_with_their_reason_alongside_info() {
    let path = trace_path("fallback");
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_PROFILE", path.to_str().unwrap()),
            ("OMP_TARGET_OFFLOAD", "disabled"),
            ("OFFLOAD_INFO", "1"),
        ],
    );
    r.assert_ok("host");
    assert_eq!(
        r.lines("offload: "),
        ["offload: launch offload_tests::kernels::double on the host (host-fallback): OMP_TARGET_OFFLOAD=DISABLED"]
    );
    let ev = read_trace(&path);
    let fallback = in_cat(&ev, "fallback");
    assert_eq!(fallback.len(), 1, "{ev:?}");
    assert_eq!(fallback[0]["name"], REGION);
    assert_eq!(fallback[0]["args"]["region"], REGION);
    assert_eq!(fallback[0]["args"]["reason"], "OMP_TARGET_OFFLOAD=DISABLED");
    for cat in ["launch", "transfer", "memory", "device init"] {
        assert!(in_cat(&ev, cat).is_empty(), "{cat}: {ev:?}");
    }
}

#[test]
fn profile_records_data_constructs_and_mapping_changes() {
    let path = trace_path("data-env");
    let r = probe(
        &["data-env"],
        &[("OFFLOAD_PROFILE", path.to_str().unwrap())],
    );
    r.assert_ok("device");
    let ev = read_trace(&path);
    let constructs: Vec<&str> = in_cat(&ev, "construct")
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        constructs,
        ["target_data!", "target_update!", "target_data! exit"]
    );
    let changes: Vec<&str> = in_cat(&ev, "mapping")
        .iter()
        .map(|e| e["args"]["change"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["new", "up", "down", "removed"]);
    let back: Vec<&str> = in_cat(&ev, "transfer")
        .iter()
        .filter(|e| e["args"]["direction"] == "device to host" && e["args"]["bytes"] == 800)
        .map(|e| e["args"]["construct"].as_str().unwrap())
        .collect();
    assert_eq!(back, ["target_update!", "target_data! exit"]);
}

#[test]
fn an_unwritable_profile_gives_one_line_on_stderr_and_a_successful_run() {
    // A directory that does not exist: the file cannot be created.
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("observability-no-such-dir")
        .join("trace.json");
    let r = probe(
        &["double"],
        &[("OFFLOAD_PROFILE", missing.to_str().unwrap())],
    );
    r.assert_ok("device");
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("offload: cannot write the profile to OFFLOAD_PROFILE=")
            && err.contains(missing.to_str().unwrap()),
        "{err}"
    );
    assert!(!missing.exists());

    // A file that opens but takes no bytes: the write at exit fails.
    if std::path::Path::new("/dev/full").exists() {
        let r = probe(&["double"], &[("OFFLOAD_PROFILE", "/dev/full")]);
        r.assert_ok("device");
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("offload: cannot write the profile to OFFLOAD_PROFILE=/dev/full: "),
            "{err}"
        );
    }
}

/// Processes sharing one stderr (MPI ranks under one launcher, a job's steps into one log) keep their lines whole:
/// each line is one write, so another process's line cannot land inside it.
#[test]
fn lines_of_processes_sharing_a_pipe_stay_whole() {
    use std::io::Read;
    let (mut reader, writer) = std::io::pipe().expect("a pipe");
    let children: Vec<_> = (0..3)
        .map(|_| {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_probe"));
            for k in common::RUNTIME_ENV {
                cmd.env_remove(k);
            }
            cmd.args(["repeat", "300"])
                .env("OFFLOAD_INFO", "4")
                .stdout(std::process::Stdio::null())
                .stderr(writer.try_clone().expect("the pipe's write end"));
            cmd.spawn().expect("running the probe")
        })
        .collect();
    drop(writer);
    let mut text = String::new();
    reader
        .read_to_string(&mut text)
        .expect("the probes' stderr");
    for mut child in children {
        assert!(child.wait().expect("the probe").success(), "{text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 3 * 300, "{} lines", lines.len());
    let broken: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.starts_with("offload: ") || l.matches("offload: ").count() != 1)
        .collect();
    assert!(
        broken.is_empty(),
        "{} lines broken, e.g. {:?}",
        broken.len(),
        &broken[..broken.len().min(3)]
    );
}
