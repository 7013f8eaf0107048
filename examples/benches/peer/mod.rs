//! The clang-22 peer of a benchmark: builds `peer/NAME.c` with OpenMP offloading to libomptarget's x86_64 host plugin.
//! [`run`] runs it once and returns its "name value" lines; a [`Session`] keeps it running and asks for one figure at
//! a time, so ours and the peer's can be measured in turns a few milliseconds apart.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

fn build(name: &str, extra_flags: &[&str]) -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("benches/peer/{name}.c"));
    let exe = std::env::temp_dir().join(format!("offload-peer-{name}"));
    let built = Command::new("clang-22")
        .args(["-O3", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"])
        .args(extra_flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .map_err(|e| format!("clang-22 not found ({e}); apt-get install clang-22 libomp-22-dev liboffload-22-dev"))?;
    if !built.status.success() {
        return Err(format!(
            "clang-22 failed:\n{}",
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    Ok(exe)
}

fn command(exe: &Path, args: &[String]) -> Command {
    let mut c = Command::new(exe);
    c.args(args).env_remove("OMP_TARGET_OFFLOAD");
    c
}

#[allow(dead_code)] // each bench is its own crate and uses one of the two
pub fn run(
    name: &str,
    extra_flags: &[&str],
    args: &[String],
) -> Result<Vec<(String, f64)>, String> {
    let run = command(&build(name, extra_flags)?, args)
        .output()
        .map_err(|e| e.to_string())?;
    if !run.status.success() {
        return Err(format!(
            "the peer failed:\n{}",
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| {
            l.split_once(' ')
                .and_then(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        })
        .collect())
}

/// libomp's default `KMP_BLOCKTIME` (200 ms), how long its idle threads spin, and a margin.
const BLOCKTIME: std::time::Duration = std::time::Duration::from_millis(250);

/// A running peer: it sets up once, then answers each line it reads (the name of a measurement) with one number.
#[allow(dead_code)]
pub struct Session {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

#[allow(dead_code)]
impl Session {
    pub fn start(name: &str, extra_flags: &[&str], args: &[String]) -> Result<Session, String> {
        let mut child = command(&build(name, extra_flags)?, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let to = child.stdin.take().ok_or("no stdin")?;
        let from = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut s = Session { child, to, from };
        s.read().and_then(|l| match l.as_str() {
            "ready" => Ok(s),
            other => Err(format!("the peer said {other:?} instead of \"ready\"")),
        })
    }

    /// The peer's figure for `what`, once the peer's OpenMP threads have gone to sleep: libomp's idle threads spin
    /// for their block time after a parallel region ([`BLOCKTIME`]) and would take the cores from whatever is measured
    /// next, which two programs run one after the other never see (ours ran at half speed in every such turn).
    pub fn ask(&mut self, what: &str) -> Result<f64, String> {
        writeln!(self.to, "{what}").map_err(|e| format!("the peer is gone: {e}"))?;
        let line = self.read()?;
        std::thread::sleep(BLOCKTIME);
        line.parse()
            .map_err(|_| format!("the peer answered {what:?} with {line:?}"))
    }

    /// Asks for several figures at once: the peer answers with one line of numbers.
    pub fn ask_all(&mut self, what: &str) -> Result<Vec<f64>, String> {
        writeln!(self.to, "{what}").map_err(|e| format!("the peer is gone: {e}"))?;
        let line = self.read()?;
        line.split_whitespace()
            .map(|v| v.parse())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("the peer answered {what:?} with {line:?}"))
    }

    fn read(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.from.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line.trim().to_string()),
            _ => Err(format!(
                "the peer stopped ({})",
                self.child
                    .wait()
                    .map_or_else(|e| e.to_string(), |s| s.to_string())
            )),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
