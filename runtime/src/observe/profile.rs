//! `OFFLOAD_PROFILE=FILE`: a Chrome trace of the run (the Trace Event Format that Perfetto and chrome://tracing
//! open). Events are complete events (`"ph":"X"`) buffered in memory and written to the file when the process exits
//! (an `atexit` handler); times are microseconds since the runtime first read its environment.
//!
//! This module is only the sink: what is recorded, and from where, is the business of its parent, `observe`.

use std::borrow::Cow;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// An event argument's value.
#[derive(Clone, Debug)]
pub enum Value {
    Str(Cow<'static, str>),
    Num(u64),
    Int(i64),
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Self {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(Cow::Owned(s))
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Self {
        Value::Num(n as u64)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Num(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Value::Num(n.into())
    }
}

impl From<i32> for Value {
    fn from(n: i32) -> Self {
        Value::Int(n.into())
    }
}

/// One complete event.
#[derive(Debug)]
pub struct Event {
    pub name: Cow<'static, str>,
    pub cat: &'static str,
    pub start: Instant,
    pub end: Instant,
    pub tid: u64,
    pub args: Vec<(&'static str, Value)>,
}

struct Sink {
    path: PathBuf,
    /// Opened (and truncated) when profiling starts, so a bad path is reported at once; taken at exit.
    file: Mutex<Option<File>>,
    epoch: Instant,
    events: Mutex<Events>,
}

/// The events kept so far: at most `max` (a long run would otherwise grow the buffer without bound), and how many
/// were dropped after that.
#[derive(Debug)]
pub(crate) struct Events {
    kept: Vec<Event>,
    max: usize,
    dropped: u64,
}

/// Events kept by default: about 200 MiB of trace at most.
const DEFAULT_MAX_EVENTS: usize = 1_000_000;

impl Events {
    pub(crate) fn new(max: usize) -> Self {
        Events {
            kept: Vec::new(),
            max,
            dropped: 0,
        }
    }

    /// Keeps `e` if there is room, else counts it; true for the first event dropped.
    pub(crate) fn push(&mut self, e: Event) -> bool {
        if self.kept.len() < self.max {
            self.kept.push(e);
            return false;
        }
        self.dropped += 1;
        self.dropped == 1
    }
}

static SINK: OnceLock<Sink> = OnceLock::new();

/// Starts profiling into `path`: creates the file and arranges for the trace to be written at exit. On failure says
/// so in one line on stderr and returns false (the program runs on, unprofiled).
pub fn open(path: OsString) -> bool {
    let path = PathBuf::from(path);
    let file = match File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            warn(format_args!(
                "offload: cannot write the profile to OFFLOAD_PROFILE={}: {e}; the run is not profiled",
                path.display()
            ));
            return false;
        }
    };
    let sink = Sink {
        path,
        file: Mutex::new(Some(file)),
        epoch: Instant::now(),
        events: Mutex::new(Events::new(
            crate::env::icv()
                .profile_max_events
                .unwrap_or(DEFAULT_MAX_EVENTS),
        )),
    };
    if SINK.set(sink).is_err() {
        return true;
    }
    // SAFETY: registers a plain function that lives for the whole process.
    if unsafe { libc::atexit(write_at_exit) } != 0 {
        warn(format_args!(
            "offload: cannot register the OFFLOAD_PROFILE writer at exit; the run is not profiled"
        ));
        return false;
    }
    true
}

/// Records an event that started at `start` and ends now.
pub fn record(
    name: Cow<'static, str>,
    cat: &'static str,
    start: Instant,
    args: Vec<(&'static str, Value)>,
) {
    let Some(sink) = SINK.get() else { return };
    let event = Event {
        name,
        cat,
        start,
        end: Instant::now(),
        tid: tid(),
        args,
    };
    let (first_drop, max) = {
        let mut events = sink.events.lock().unwrap_or_else(|p| p.into_inner());
        (events.push(event), events.max)
    };
    if first_drop {
        warn(format_args!(
            "offload: OFFLOAD_PROFILE keeps the first {max} events (OFFLOAD_PROFILE_MAX_EVENTS); later ones are \
             counted in the trace's otherData.dropped_events, not recorded"
        ));
    }
}

/// A small number per thread (the main thread, which registers the images, is 1): stable across the trace and
/// cheaper than a system call.
fn tid() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TID: u64 = {
            let tid = NEXT.fetch_add(1, Relaxed);
            // Named threads (the task helpers `offload-task-N`, the team threads) name their tracks.
            if let Some(name) = std::thread::current().name() {
                THREAD_NAMES
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((tid, name.to_string()));
            }
            tid
        };
    }
    TID.try_with(|t| *t).unwrap_or(0)
}

/// The names of the named threads that recorded events, by their trace thread number.
static THREAD_NAMES: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());

/// One line on stderr; never panics (stderr may be closed, and this may run at exit).
fn warn(msg: std::fmt::Arguments<'_>) {
    eprintln_whole!("{msg}");
}

extern "C" fn write_at_exit() {
    // Nothing may unwind out of an `extern "C"` function.
    let _ = std::panic::catch_unwind(|| {
        let Some(sink) = SINK.get() else { return };
        let Some(file) = sink.file.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let events = std::mem::replace(
            &mut *sink.events.lock().unwrap_or_else(|p| p.into_inner()),
            Events::new(0),
        );
        let process = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "offload".into());
        let threads = std::mem::take(&mut *THREAD_NAMES.lock().unwrap_or_else(|p| p.into_inner()));
        let json = to_json(sink.epoch, std::process::id(), &process, &threads, events);
        let mut file = file;
        if let Err(e) = file.write_all(json.as_bytes()).and_then(|()| file.flush()) {
            warn(format_args!(
                "offload: cannot write the profile to OFFLOAD_PROFILE={}: {e}",
                sink.path.display()
            ));
        }
    });
}

/// The trace as JSON: a process-name record and a thread-name record for each of `threads` (each a track of its own
/// in Perfetto), then the events by start time (an enclosing event before the ones it holds), and in `otherData` how
/// many events were dropped and the limit.
pub(crate) fn to_json(
    epoch: Instant,
    pid: u32,
    process: &str,
    threads: &[(u64, String)],
    events: Events,
) -> String {
    let Events {
        kept: mut events,
        max,
        dropped,
    } = events;
    events.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut out = String::with_capacity(128 + events.len() * 200);
    out.push_str("{\"traceEvents\":[\n");
    let _ = write!(
        out,
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":"
    );
    push_str(&mut out, process);
    out.push_str("}}");
    for (tid, name) in threads {
        let _ = write!(
            out,
            ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        );
        push_str(&mut out, name);
        out.push_str("}}");
    }
    for e in &events {
        out.push_str(",\n{\"name\":");
        push_str(&mut out, &e.name);
        out.push_str(",\"cat\":");
        push_str(&mut out, e.cat);
        out.push_str(",\"ph\":\"X\",\"ts\":");
        push_micros(
            &mut out,
            e.start.saturating_duration_since(epoch).as_nanos(),
        );
        out.push_str(",\"dur\":");
        push_micros(
            &mut out,
            e.end.saturating_duration_since(e.start).as_nanos(),
        );
        let _ = write!(out, ",\"pid\":{pid},\"tid\":{},\"args\":{{", e.tid);
        for (i, (k, v)) in e.args.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_str(&mut out, k);
            out.push(':');
            match v {
                Value::Str(s) => push_str(&mut out, s),
                Value::Num(n) => {
                    let _ = write!(out, "{n}");
                }
                Value::Int(n) => {
                    let _ = write!(out, "{n}");
                }
            }
        }
        out.push_str("}}");
    }
    let _ = write!(
        out,
        "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"dropped_events\":{dropped},\"max_events\":{max}}}}}\n"
    );
    out
}

/// Nanoseconds as microseconds with three decimals, exactly.
fn push_micros(out: &mut String, ns: u128) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

/// A JSON string literal.
fn push_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn events_become_sorted_complete_events_with_escaped_strings() {
        let epoch = Instant::now();
        let at = |us: u64| epoch + Duration::from_nanos(us * 1000 + 250);
        let inner = Event {
            name: "host to device".into(),
            cat: "transfer",
            start: at(5),
            end: at(6),
            tid: 1,
            args: vec![("bytes", 800usize.into()), ("device", 0i32.into())],
        };
        let outer = Event {
            name: "a::\"b\"\\c\n\u{1}".into(),
            cat: "region",
            start: at(5),
            end: at(9),
            tid: 1,
            args: vec![("delta", Value::Int(-3))],
        };
        let mut events = Events::new(10);
        events.push(inner);
        events.push(outer);
        let json = to_json(epoch, 42, "probe", &[(1, "offload-task-0".into())], events);
        assert!(json.starts_with(
            "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":42,"
        ));
        assert!(json.contains(
            "\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":42,\"tid\":1,\"args\":{\"name\":\"offload-task-0\"}}"
        ));
        assert!(
            json.ends_with(
                "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped_events\":0,\"max_events\":10}}\n"
            ),
            "{json}"
        );
        let outer_at = json
            .find(r#"{"name":"a::\"b\"\\c\n\u0001","cat":"region","ph":"X","ts":5.250,"dur":4.000,"pid":42,"tid":1,"args":{"delta":-3}}"#)
            .expect(&json);
        let inner_at = json
            .find(r#"{"name":"host to device","cat":"transfer","ph":"X","ts":5.250,"dur":1.000,"pid":42,"tid":1,"args":{"bytes":800,"device":0}}"#)
            .expect(&json);
        assert!(outer_at < inner_at, "the enclosing event comes first");
    }

    #[test]
    fn an_empty_trace_is_still_a_trace() {
        let json = to_json(Instant::now(), 1, "x", &[], Events::new(5));
        assert_eq!(
            json,
            "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"x\"}}\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped_events\":0,\"max_events\":5}}\n"
        );
    }

    #[test]
    fn the_buffer_keeps_at_most_its_limit_and_counts_the_rest() {
        let now = Instant::now();
        let event = |i: u64| Event {
            name: format!("e{i}").into(),
            cat: "test",
            start: now,
            end: now,
            tid: i,
            args: Vec::new(),
        };
        let mut events = Events::new(3);
        let firsts: Vec<bool> = (0..10).map(|i| events.push(event(i))).collect();
        assert_eq!(
            firsts.iter().filter(|&&f| f).count(),
            1,
            "the first drop is told once"
        );
        assert!(firsts[3]);
        let json = to_json(now, 1, "x", &[], events);
        assert_eq!(json.matches("\"ph\":\"X\"").count(), 3);
        assert!(
            json.contains("\"otherData\":{\"dropped_events\":7,\"max_events\":3}"),
            "{json}"
        );
    }
}
