//! `core` for a GPU target, built once with `-Zbuild-std=core` into a private sysroot that every device crate of every
//! build then uses (`--sysroot`): building `core` takes 30 to 50 s on two cores, a device crate against the sysroot
//! half a second. The cache is keyed by the compiler (`rustc -vV`) and the target, and shared between builds through
//! `OFFLOAD_CACHE_DIR` (default `~/.cache/offload`); a file lock keeps concurrent builds from racing.

use crate::toolchain::Toolchain;
use crate::{Error, ToolchainError};
use offload_model::hash::hash_parts;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The crates of the sysroot: `core` and the intrinsics it calls.
const CRATES: [&str; 2] = ["core", "compiler_builtins"];

fn cache_root() -> Result<PathBuf, Error> {
    if let Some(d) = std::env::var_os("OFFLOAD_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("offload"));
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/offload"))
        .ok_or(ToolchainError::NoCacheDir.into())
}

/// The sysroot holding `core` for `triple` (and `cpu`, where rustc compiles for one GPU: AMD), built on first use.
pub fn core_sysroot(tc: &Toolchain, triple: &str, cpu: Option<&str>) -> Result<PathBuf, Error> {
    let cpu = cpu.unwrap_or_default();
    let key = format!(
        "{:016x}",
        hash_parts(&[
            tc.version.as_bytes(),
            triple.as_bytes(),
            cpu.as_bytes(),
            b"opt3-abort-v1"
        ])
    );
    let root = cache_root()?;
    let sysroot = root.join(format!("sysroot-{triple}{cpu}-{key}"));
    let done = sysroot.join("complete");
    if done.is_file() {
        return Ok(sysroot);
    }
    std::fs::create_dir_all(&root).map_err(Error::io(format!("creating {}", root.display())))?;
    let lock_path = root.join(format!("sysroot-{triple}-{key}.lock"));
    let lock = open_lock(&lock_path)?;
    lock.lock()
        .map_err(Error::io(format!("locking {}", lock_path.display())))?;
    // Another build may have finished it while this one waited.
    if !done.is_file() {
        println!(
            "cargo:warning=offload-build: building `core` for {triple} once (about a minute); later builds reuse {}",
            sysroot.display()
        );
        let t = std::time::Instant::now();
        build_core(
            tc,
            triple,
            cpu,
            &sysroot,
            &root.join(format!("build-{triple}-{key}")),
        )?;
        crate::progress::status(
            "Building",
            &format!("core for {triple} {cpu}, cached in {}", sysroot.display()),
            t,
        );
        std::fs::write(&done, &tc.version)
            .map_err(Error::io(format!("writing {}", done.display())))?;
    }
    Ok(sysroot)
}

/// Opens (creating if needed) the cache's lock file. Its contents do not matter, so it is never truncated, and a
/// symlink in its place is refused (O_NOFOLLOW): the cache directory may be shared, and a planted link must not make
/// a build create or clobber a file elsewhere.
fn open_lock(path: &Path) -> Result<std::fs::File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(Error::io(format!(
            "opening the lock file {} (a symlink there is refused; remove it)",
            path.display()
        )))
}

/// Builds `core` for `triple` (and `cpu`) in `work`, a scratch directory removed after, into `sysroot`.
fn build_core(
    tc: &Toolchain,
    triple: &str,
    cpu: &str,
    sysroot: &Path,
    work: &Path,
) -> Result<(), Error> {
    let seed = write_seed(work)?;
    let mut cmd = cargo_build_std(tc, triple, cpu, &seed, work);
    set_cargo_home(&mut cmd, tc, work)?;
    let out = cmd
        .output()
        .map_err(Error::io(format!("running {}", tc.cargo.display())))?;
    if !out.status.success() {
        return Err(Error::DeviceBuild {
            image: format!("`core` for {triple} (with {})", tc.rustc.display()),
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    install_rlibs(&out.stdout, triple, sysroot)?;
    let _ = std::fs::remove_dir_all(work);
    Ok(())
}

fn write_error(what: &Path) -> impl FnOnce(std::io::Error) -> Error {
    Error::io(format!("writing {}", what.display()))
}

/// An empty `#![no_std]` package for `-Zbuild-std` to build `core` beside.
fn write_seed(work: &Path) -> Result<PathBuf, Error> {
    let seed = work.join("seed");
    std::fs::create_dir_all(seed.join("src")).map_err(write_error(&seed))?;
    std::fs::write(
        seed.join("Cargo.toml"),
        "[package]\nname = \"offload-core-seed\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .map_err(write_error(&seed))?;
    std::fs::write(seed.join("src/lib.rs"), "#![no_std]\n").map_err(write_error(&seed))?;
    Ok(seed)
}

/// `cargo build -Zbuild-std=core` of the seed, in a scrubbed environment, optimised and aborting on panic.
fn cargo_build_std(tc: &Toolchain, triple: &str, cpu: &str, seed: &Path, work: &Path) -> Command {
    let mut cmd = Command::new(&tc.cargo);
    cmd.current_dir(seed)
        .args([
            "build",
            "--release",
            "-Zbuild-std=core",
            "--message-format=json",
        ])
        .args(["--target", triple])
        .arg("--target-dir")
        .arg(work.join("target"))
        .env_clear()
        .env("RUSTC", &tc.rustc)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_TERM_COLOR", "never")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !cpu.is_empty() {
        // AMD: rustc compiles for one GPU, and the objects must be bitcode for the device link.
        cmd.env(
            "CARGO_ENCODED_RUSTFLAGS",
            format!("-Ctarget-cpu={cpu}\x1f-Clinker-plugin-lto"),
        );
    }
    for k in ["PATH", "HOME", "RUSTUP_HOME", "TMPDIR", "CARGO_MAKEFLAGS"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd
}

/// The cargo home the build sees: with a vendored toolchain, one of its own that takes the library's dependencies
/// from the vendored copies, with no network; else the caller's.
fn set_cargo_home(cmd: &mut Command, tc: &Toolchain, work: &Path) -> Result<(), Error> {
    match &tc.vendor {
        Some(vendor) => {
            let home = work.join("cargo-home");
            std::fs::create_dir_all(&home).map_err(write_error(&home))?;
            std::fs::write(
                home.join("config.toml"),
                format!(
                    "[source.crates-io]\nreplace-with = \"rust-library-vendor\"\n\n\
                     [source.rust-library-vendor]\ndirectory = {:?}\n\n[net]\noffline = true\n",
                    vendor.display().to_string()
                ),
            )
            .map_err(write_error(&home))?;
            cmd.env("CARGO_HOME", home);
        }
        None => {
            if let Some(v) = std::env::var_os("CARGO_HOME") {
                cmd.env("CARGO_HOME", v);
            }
        }
    }
    Ok(())
}

/// Copies the [`CRATES`]' rlibs the build reported (its JSON messages, `stdout`) into a fresh `sysroot`.
fn install_rlibs(stdout: &[u8], triple: &str, sysroot: &Path) -> Result<(), Error> {
    let lib = sysroot.join("lib/rustlib").join(triple).join("lib");
    let _ = std::fs::remove_dir_all(sysroot);
    std::fs::create_dir_all(&lib).map_err(write_error(&lib))?;
    let mut found = 0;
    for line in String::from_utf8_lossy(stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let name = msg["target"]["name"].as_str().unwrap_or_default();
        if msg["reason"] != "compiler-artifact" || !CRATES.contains(&name) {
            continue;
        }
        for f in msg["filenames"].as_array().into_iter().flatten() {
            let f = Path::new(f.as_str().unwrap_or_default());
            if f.extension().is_some_and(|e| e == "rlib") {
                let to = lib.join(f.file_name().unwrap_or_default());
                std::fs::copy(f, &to).map_err(write_error(&to))?;
                found += 1;
            }
        }
    }
    if found != CRATES.len() {
        return Err(Error::DeviceBuild {
            image: format!("`core` for {triple}"),
            output: "cargo built it but reported no core and compiler_builtins rlibs".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::open_lock;

    #[test]
    fn the_lock_file_neither_truncates_nor_follows_a_symlink() {
        let dir = std::env::temp_dir().join(format!("offload-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Someone else's file, and a symlink to it where the lock goes.
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let lock = dir.join("sysroot.lock");
        let _ = std::fs::remove_file(&lock);
        std::os::unix::fs::symlink(&victim, &lock).unwrap();
        let opened = open_lock(&lock);
        assert!(opened.is_err(), "the lock followed a symlink");
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"precious",
            "the symlink's target was truncated"
        );
        // A lock file that exists keeps its contents; one that does not is created.
        std::fs::remove_file(&lock).unwrap();
        std::fs::write(&lock, b"held").unwrap();
        open_lock(&lock).expect("an existing lock file opens");
        assert_eq!(
            std::fs::read(&lock).unwrap(),
            b"held",
            "the lock file was truncated"
        );
        std::fs::remove_file(&lock).unwrap();
        open_lock(&lock).expect("a missing lock file is created");
        assert!(lock.is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
