//! The device link of NVIDIA images, with LLVM 22's tools as subprocesses (no LLVM library in any build, and each
//! step can be rerun by hand): the device crates' staticlib holds LLVM bitcode for every crate, `core` included.
//!
//! `llvm-link` the user's crates and the IR shim whole, then only what they use of `core`, `compiler_builtins` and
//! libdevice; `opt` internalizes everything but the kernels and optimises (O3, NVVMReflect) per `sm_XX`; `llc` writes
//! PTX; `ptxas`, where installed, assembles it into a cubin (which also proves the PTX valid).

use crate::toolchain::{CudaTools, LlvmTools};
use crate::Error;
use offload_model::abi::DeviceImageRecord;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What Rust cannot spell (address space 3, special registers), as functions the device crates call; always inlined.
const NVPTX_SHIM: &str = r#"target triple = "nvptx64-nvidia-cuda"

@__offload_dyn_shared = external addrspace(3) global [0 x i8], align 16

define ptr @__offload_dyn_shared_ptr() #0 {
  ret ptr addrspacecast (ptr addrspace(3) @__offload_dyn_shared to ptr)
}

define i32 @__offload_dyn_shared_len() #0 {
  %n = call i32 @llvm.nvvm.read.ptx.sreg.dynamic_smem_size()
  ret i32 %n
}

declare i32 @llvm.nvvm.read.ptx.sreg.dynamic_smem_size()

attributes #0 = { alwaysinline nounwind }
"#;

/// One linked image: its architecture, `DeviceImageRecord::FORMAT_*` and bytes.
pub struct Linked {
    pub arch: String,
    pub format: u32,
    pub bytes: Vec<u8>,
}

fn run(cmd: &mut Command, what: &str) -> Result<String, Error> {
    let out = cmd.output().map_err(Error::io(format!("running {what}")))?;
    if !out.status.success() {
        return Err(Error::DeviceBuild {
            image: format!("the device link ({what})"),
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Links the staticlib `archive` into PTX (and cubins) for each of `archs`, keeping `kernels`; files go to `work`.
pub fn link_nvptx(
    archive: &Path,
    kernels: &[String],
    archs: &[String],
    llvm: &LlvmTools,
    cuda: &CudaTools,
    work: &Path,
) -> Result<Vec<Linked>, Error> {
    let io = |p: &Path| Error::io(format!("writing {}", p.display()));
    let members = work.join("members");
    let _ = std::fs::remove_dir_all(&members);
    std::fs::create_dir_all(&members).map_err(io(&members))?;
    let data =
        std::fs::read(archive).map_err(Error::io(format!("reading {}", archive.display())))?;
    let ar = object::read::archive::ArchiveFile::parse(&*data)
        .map_err(|e| Error::Config(format!("reading {}: {e}", archive.display())))?;
    let (mut user, mut libs): (Vec<PathBuf>, Vec<PathBuf>) = (Vec::new(), Vec::new());
    for (i, m) in ar.members().enumerate() {
        let m = m.map_err(|e| Error::Config(format!("reading {}: {e}", archive.display())))?;
        let name = String::from_utf8_lossy(m.name()).into_owned();
        if !name.ends_with(".o") {
            continue; // the symbol table and rustc's metadata
        }
        let bytes = m
            .data(&*data)
            .map_err(|e| Error::Config(format!("reading {}: {e}", archive.display())))?;
        let path = members.join(format!("{i}-{name}"));
        std::fs::write(&path, bytes).map_err(io(&path))?;
        if name.starts_with("core-") || name.starts_with("compiler_builtins-") {
            libs.push(path);
        } else {
            user.push(path);
        }
    }
    let shim = work.join("shim.ll");
    std::fs::write(&shim, NVPTX_SHIM).map_err(io(&shim))?;
    // `--only-needed` applies to every file of a call, so the user's crates are linked whole in a call of their own.
    let user_bc = work.join("user.bc");
    run(
        Command::new(&llvm.link)
            .arg(&shim)
            .args(&user)
            .arg("-o")
            .arg(&user_bc),
        "llvm-link",
    )?;
    let linked = work.join("linked.bc");
    run(
        Command::new(&llvm.link)
            .arg(&user_bc)
            .arg("--only-needed")
            .args(&libs)
            .args(&cuda.libdevice)
            .arg("-o")
            .arg(&linked),
        "llvm-link",
    )?;
    let mut images = Vec::new();
    for sm in archs {
        let opt_bc = work.join(format!("{sm}.bc"));
        run(
            Command::new(&llvm.opt)
                .arg(&linked)
                .args(["-mtriple=nvptx64-nvidia-cuda", &format!("-mcpu={sm}")])
                .arg("-passes=internalize,globaldce,default<O3>")
                .arg(format!(
                    "--internalize-public-api-list={}",
                    kernels.join(",")
                ))
                // libdevice's `sqrt` correctly rounded, as on the host.
                .arg("--nvvm-reflect-add=__CUDA_PREC_SQRT=1")
                .arg("-o")
                .arg(&opt_bc),
            "opt",
        )?;
        let ptx_path = work.join(format!("{sm}.ptx"));
        run(
            Command::new(&llvm.llc)
                .args([
                    "-O3",
                    "-mtriple=nvptx64-nvidia-cuda",
                    &format!("-mcpu={sm}"),
                ])
                .arg(&opt_bc)
                .arg("-o")
                .arg(&ptx_path),
            "llc",
        )?;
        let ptx = std::fs::read_to_string(&ptx_path)
            .map_err(Error::io(format!("reading {}", ptx_path.display())))?;
        check_ptx(&ptx, kernels, cuda)?;
        if let Some(ptxas) = &cuda.ptxas {
            let cubin = work.join(format!("{sm}.cubin"));
            let log = run(
                Command::new(ptxas)
                    .arg(format!("-arch={sm}"))
                    .arg("-v")
                    .arg(&ptx_path)
                    .arg("-o")
                    .arg(&cubin),
                "ptxas",
            )?;
            std::fs::write(work.join(format!("{sm}.ptxas.log")), log).map_err(io(work))?;
            images.push(Linked {
                arch: sm.clone(),
                format: DeviceImageRecord::FORMAT_CUBIN,
                bytes: std::fs::read(&cubin)
                    .map_err(Error::io(format!("reading {}", cubin.display())))?,
            });
        }
        // The driver takes PTX as a NUL-terminated string.
        let mut bytes = ptx.into_bytes();
        bytes.push(0);
        images.push(Linked {
            arch: sm.clone(),
            format: DeviceImageRecord::FORMAT_PTX,
            bytes,
        });
    }
    Ok(images)
}

/// Every kernel is an entry, and nothing is left to resolve (ptxas would reject it, the driver's JIT too).
fn check_ptx(ptx: &str, kernels: &[String], cuda: &CudaTools) -> Result<(), Error> {
    let unresolved: Vec<&str> = ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".extern .func"))
        // `.extern .func (.param .b32 func_retval0) __nv_expf(`: the name is the word before the last `(`.
        .filter_map(|l| l.rsplit_once('(')?.0.split_whitespace().last())
        .collect();
    if !unresolved.is_empty() {
        let math = unresolved.iter().any(|f| f.starts_with("__nv_"));
        let hint = if math && cuda.libdevice.is_none() {
            "; the math functions come from CUDA's libdevice.10.bc: install the CUDA toolkit or the pip wheel \
             `nvidia-cuda-nvcc`, or point OFFLOAD_LIBDEVICE at the file"
        } else {
            ""
        };
        return Err(Error::DeviceBuild {
            image: "the NVIDIA device link".into(),
            output: format!(
                "unresolved functions in the PTX: {}{hint}",
                unresolved.join(", ")
            ),
        });
    }
    let missing: Vec<&String> = kernels
        .iter()
        .filter(|k| !ptx.contains(&format!(".entry {k}(")))
        .collect();
    if !missing.is_empty() {
        return Err(Error::DeviceBuild {
            image: "the NVIDIA device link".into(),
            output: format!("kernels missing from the PTX: {missing:?}"),
        });
    }
    Ok(())
}
