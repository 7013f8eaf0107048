//! The device link of GPU images, with LLVM 22's tools as subprocesses (no LLVM library in any build, and each step
//! can be rerun by hand from the files it leaves): the device crates' staticlib holds LLVM bitcode for every crate,
//! `core` included.
//!
//! `llvm-link` the user's crates and an IR shim whole, then only what they use of `core`, `compiler_builtins` and the
//! vendor's math library (libdevice, ocml); `opt` internalizes everything but the kernels and optimises (O3); then
//! for NVIDIA `llc` writes PTX per `sm_XX` and `ptxas`, where installed, a cubin (which also proves the PTX valid);
//! for AMD `llc` writes an object and `ld.lld -shared` the HSA code object.

use crate::toolchain::{CudaTools, LlvmTools};
use crate::{Error, ToolchainError};
use offload_model::device_kind::{AmdArch, AMDGCN_TRIPLE, NVPTX_TRIPLE};
use offload_model::fatbin::ImageFormat;
use offload_model::gpu_panic;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What Rust cannot spell (address space 3, special registers), as functions the device crates call; always inlined.
/// The launch-kind word lets offload-device fail `barrier()` and team-shared memory outside `teams, parallel` regions.
/// (The module's triple is prepended: [`nvptx_shim`].)
const NVPTX_SHIM: &str = r#"
@__offload_dyn_shared = external addrspace(3) global [0 x i8], align 16

define ptr @__offload_dyn_shared_ptr() #0 {
  ret ptr addrspacecast (ptr addrspace(3) @__offload_dyn_shared to ptr)
}

define i32 @__offload_dyn_shared_len() #0 {
  %n = call i32 @llvm.nvvm.read.ptx.sreg.dynamic_smem_size()
  ret i32 %n
}

declare i32 @llvm.nvvm.read.ptx.sreg.dynamic_smem_size()

; `omp_get_wtime`: nanoseconds (a non-constant special register: every call reads it anew).
define i64 @__offload_globaltimer() #0 {
  %t = call i64 @llvm.nvvm.read.ptx.sreg.globaltimer()
  ret i64 %t
}

declare i64 @llvm.nvvm.read.ptx.sreg.globaltimer()

; The running kernel's launch kind, one word per block (static shared memory comes before the dynamic block): each
; thread stores it at entry, before it reads it, so no barrier is needed. Atomic, as every thread stores the same.
@__offload_launch_kind_word = internal addrspace(3) global i32 undef, align 4

define void @__offload_set_launch_kind(i32 %k) #0 {
  store atomic i32 %k, ptr addrspace(3) @__offload_launch_kind_word monotonic, align 4
  ret void
}

define i32 @__offload_launch_kind() #0 {
  %k = load atomic i32, ptr addrspace(3) @__offload_launch_kind_word monotonic, align 4
  ret i32 %k
}

; The claim word of the block's team-shared memory: which atomic type `team_shared` hands it out as. A launch does
; not zero static shared memory: offload-device's entry clears it in `teams, parallel` kernels, before a barrier.
@__offload_team_shared_claim_word = internal addrspace(3) global i32 undef, align 4

define ptr @__offload_team_shared_claim() #0 {
  ret ptr addrspacecast (ptr addrspace(3) @__offload_team_shared_claim_word to ptr)
}

attributes #0 = { alwaysinline nounwind }
"#;

fn nvptx_shim() -> String {
    format!("target triple = \"{NVPTX_TRIPLE}\"\n{NVPTX_SHIM}")
}

/// One linked image: its architecture, format and bytes.
pub struct Linked {
    pub arch: String,
    pub format: ImageFormat,
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
    globals: &[String],
    archs: &[String],
    llvm: &LlvmTools,
    cuda: &CudaTools,
    work: &Path,
) -> Result<Vec<Linked>, Error> {
    let io = |p: &Path| Error::io(format!("writing {}", p.display()));
    let members = extract_bitcode(std::slice::from_ref(&archive.to_path_buf()), work)?;
    let shim = work.join("shim.ll");
    std::fs::write(&shim, nvptx_shim()).map_err(io(&shim))?;
    let linked = link_bitcode(
        llvm,
        &shim,
        &members.user,
        &members.libs,
        &cuda.libdevice,
        work,
    )?;
    let mut images = Vec::new();
    for sm in archs {
        let opt_bc = work.join(format!("{sm}.bc"));
        run(
            Command::new(&llvm.opt)
                .arg(&linked)
                .arg(format!("-mtriple={NVPTX_TRIPLE}"))
                .arg(format!("-mcpu={sm}"))
                .arg("-passes=internalize,globaldce,default<O3>")
                .arg(public_api(kernels, globals))
                // libdevice's `sqrt` correctly rounded, as on the host.
                .arg("--nvvm-reflect-add=__CUDA_PREC_SQRT=1")
                .arg("-o")
                .arg(&opt_bc),
            "opt",
        )?;
        let ptx_path = work.join(format!("{sm}.ptx"));
        run(
            Command::new(&llvm.llc)
                .arg("-O3")
                .arg(format!("-mtriple={NVPTX_TRIPLE}"))
                .arg(format!("-mcpu={sm}"))
                .arg(&opt_bc)
                .arg("-o")
                .arg(&ptx_path),
            "llc",
        )?;
        let ptx = std::fs::read_to_string(&ptx_path)
            .map_err(Error::io(format!("reading {}", ptx_path.display())))?;
        check_ptx(&ptx, kernels, cuda)?;
        if let Some(ptxas) = &cuda.ptxas {
            images.push(assemble_cubin(ptxas, sm, &ptx_path, work)?);
        }
        // The driver takes PTX as a NUL-terminated string.
        let mut bytes = ptx.into_bytes();
        bytes.push(0);
        images.push(Linked {
            arch: sm.clone(),
            format: ImageFormat::Ptx,
            bytes,
        });
    }
    Ok(images)
}

/// Assembles `ptx_path` into a cubin for `sm` with `ptxas`, keeping its log (`-v`: registers, spills) beside it.
fn assemble_cubin(ptxas: &Path, sm: &str, ptx_path: &Path, work: &Path) -> Result<Linked, Error> {
    let cubin = work.join(format!("{sm}.cubin"));
    let log = run(
        Command::new(ptxas)
            .arg(format!("-arch={sm}"))
            .arg("-v")
            .arg(ptx_path)
            .arg("-o")
            .arg(&cubin),
        "ptxas",
    )?;
    std::fs::write(work.join(format!("{sm}.ptxas.log")), log)
        .map_err(Error::io(format!("writing {}", work.display())))?;
    Ok(Linked {
        arch: sm.to_string(),
        format: ImageFormat::Cubin,
        bytes: std::fs::read(&cubin).map_err(Error::io(format!("reading {}", cubin.display())))?,
    })
}

/// What `internalize` keeps external: the kernels, the device globals (`#[declare_target] static`s, which the
/// runtime pairs with their host statics), and the globals of the panic record and the print buffer, which the
/// plugin finds by name after loading the image (`cuModuleGetGlobal`, `hsa_executable_get_symbol_by_name`) to point
/// them at its memory. offload-device marks the latter `#[used]` too; listing them here does not depend on how
/// rustc lowers that.
fn public_api(kernels: &[String], globals: &[String]) -> String {
    format!(
        "--internalize-public-api-list={},{},{}",
        kernels
            .iter()
            .chain(globals)
            .cloned()
            .collect::<Vec<_>>()
            .join(","),
        gpu_panic::SYMBOL,
        offload_model::device_print::SYMBOL
    )
}

/// The archives' object members, written to `work/members`.
struct Members {
    /// The user's crates' bitcode.
    user: Vec<PathBuf>,
    /// `core`'s and `compiler_builtins`'s bitcode.
    libs: Vec<PathBuf>,
    /// Machine-code objects: AMD's `compiler_builtins` (rustc leaves it out of LTO, so it is never bitcode).
    native: Vec<PathBuf>,
}

/// nvptx objects are LLVM bitcode, and so are AMD's under `-C linker-plugin-lto`, but for `compiler_builtins`.
fn extract_bitcode(archives: &[PathBuf], work: &Path) -> Result<Members, Error> {
    let members = work.join("members");
    let _ = std::fs::remove_dir_all(&members);
    std::fs::create_dir_all(&members)
        .map_err(Error::io(format!("creating {}", members.display())))?;
    let (mut user, mut libs, mut native) = (Vec::new(), Vec::new(), Vec::new());
    let mut n = 0;
    for archive in archives {
        let bad = |source| Error::ReadObject {
            what: archive.display().to_string(),
            source,
        };
        let data =
            std::fs::read(archive).map_err(Error::io(format!("reading {}", archive.display())))?;
        let ar = object::read::archive::ArchiveFile::parse(&*data).map_err(bad)?;
        for m in ar.members() {
            let m = m.map_err(bad)?;
            let name = String::from_utf8_lossy(m.name()).into_owned();
            if !name.ends_with(".o") {
                continue; // the symbol table and rustc's metadata
            }
            n += 1;
            let path = members.join(format!("{n}-{name}"));
            let bytes = m.data(&*data).map_err(bad)?;
            std::fs::write(&path, bytes)
                .map_err(Error::io(format!("writing {}", path.display())))?;
            if bytes.starts_with(b"\x7fELF") {
                native.push(path);
            } else if name.starts_with("core-") || name.starts_with("compiler_builtins-") {
                libs.push(path);
            } else {
                user.push(path);
            }
        }
    }
    Ok(Members { user, libs, native })
}

/// `work/linked.bc`: the shim and the user's crates whole, then only what they use of the libraries. `--only-needed`
/// applies to every file of a call, so the user's crates are linked in a call of their own. It also pulls from each
/// file, in order, only what is needed *so far*: `core`'s codegen units refer to each other (`fmt` for integers
/// needs the digit table of another unit), so a unit needed only by a later one would be left out, leaving an
/// unresolved symbol. The libraries are first merged whole into one module (`work/libs.bc`, cheap: they are
/// small), which `--only-needed` then resolves transitively.
fn link_bitcode(
    llvm: &LlvmTools,
    shim: &Path,
    user: &[PathBuf],
    libs: &[PathBuf],
    device_libs: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>,
    work: &Path,
) -> Result<PathBuf, Error> {
    let user_bc = work.join("user.bc");
    run(
        Command::new(&llvm.link)
            .arg(shim)
            .args(user)
            .arg("-o")
            .arg(&user_bc),
        "llvm-link",
    )?;
    let libs_bc = work.join("libs.bc");
    run(
        Command::new(&llvm.link).args(libs).arg("-o").arg(&libs_bc),
        "llvm-link",
    )?;
    let linked = work.join("linked.bc");
    run(
        Command::new(&llvm.link)
            .arg(&user_bc)
            .arg("--only-needed")
            .arg(&libs_bc)
            .args(device_libs)
            .arg("-o")
            .arg(&linked),
        "llvm-link",
    )?;
    Ok(linked)
}

/// Every kernel is an entry, and nothing is left to resolve (ptxas would reject it, the driver's JIT too).
fn check_ptx(ptx: &str, kernels: &[String], cuda: &CudaTools) -> Result<(), Error> {
    let functions = ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".extern .func"))
        // `.extern .func (.param .b32 func_retval0) __nv_expf(`: the name is the word before the last `(`.
        .filter_map(|l| l.rsplit_once('(')?.0.split_whitespace().last());
    // `.extern .global .align 1 .b8 NAME[200];`: a variable no module defined. (`.extern .shared` is the launch's
    // dynamic shared memory, which the driver provides.)
    let variables = ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".extern .global"))
        .filter_map(|l| l.split_whitespace().last()?.split('[').next());
    let unresolved: Vec<&str> = functions.chain(variables).collect();
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
                "unresolved functions or variables in the PTX: {}{hint}",
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
    if !ptx_has_panic_record(ptx) {
        return Err(Error::DeviceBuild {
            image: "the NVIDIA device link".into(),
            output: format!(
                "the PTX lacks the global `.visible .global .align 8 .b8 {}[8]` (a panic would trap without its \
                 message): is offload-device's panic record linked in?",
                gpu_panic::SYMBOL
            ),
        });
    }
    Ok(())
}

/// Whether the PTX defines the panic record's global as `cuModuleGetGlobal` finds it: a visible 8-byte variable of
/// the global state space (`.visible .global .align 8 .b8 __offload_panic_record[8];`).
fn ptx_has_panic_record(ptx: &str) -> bool {
    let decl = format!("{}[8];", gpu_panic::SYMBOL);
    ptx.lines().any(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words.starts_with(&[".visible", ".global"]) && words.last() == Some(&decl.as_str())
    })
}

/// The AMD shim: the dispatch packet's fields (address space 4), the launch's dynamic LDS (address space 3), a
/// barrier that waits for LDS writes (`s_barrier` alone does not), a trap (out of line), and ocml's control constants
/// for this GPU (what ROCm's `oclc_*.bc` files hold, written here so any gfx works): correctly rounded `sqrt`, no
/// fast-math. They are strong definitions, not `linkonce_odr` as in ROCm: llvm-link drops unreferenced linkonce ones
/// before ocml comes.
// long: one LLVM IR module's text with a few values put in, which reads best whole.
fn amdgcn_shim(gfx: &str) -> String {
    // gfx90a -> 9010, gfx942 -> 9402, gfx1100 -> 11000. Build support checked the name, so it parses.
    let (major, minor, stepping) = AmdArch::parse(gfx).map_or((0, 0, 0), |a| a.isa_version());
    let isa = major * 1000 + minor * 100 + stepping;
    // gfx9 (GCN, CDNA) runs 64-wide wavefronts; RDNA (gfx10 and later) compiles compute for 32.
    let wave64 = u8::from(major == 9);
    // The 100 MHz real-time counter: `s_memrealtime` up to gfx10; gfx11 dropped that instruction, and LLVM's
    // `readsteadycounter` reads the same counter there (through `s_sendmsg_rtn`).
    let realtime = if major >= 11 {
        "llvm.readsteadycounter"
    } else {
        "llvm.amdgcn.s.memrealtime"
    };
    format!(
        r#"target triple = "{AMDGCN_TRIPLE}"

@__offload_dyn_lds = external addrspace(3) global [0 x i8], align 16

; Fields of the HSA kernel dispatch packet (hsa.h's offsets), read here rather than in Rust: there a read through
; the packet's pointer carries debug-build checks (alignment, overlap) that cannot be optimised away, and their
; panic, reached from the panic record's code, would make the panic path call itself.
define i32 @__offload_workgroup_size_x() #0 {{
  %p = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %f = getelementptr inbounds i8, ptr addrspace(4) %p, i64 4
  %v = load i16, ptr addrspace(4) %f, align 4
  %w = zext i16 %v to i32
  ret i32 %w
}}

define i32 @__offload_grid_size_x() #0 {{
  %p = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %f = getelementptr inbounds i8, ptr addrspace(4) %p, i64 12
  %v = load i32, ptr addrspace(4) %f, align 4
  ret i32 %v
}}

define i32 @__offload_group_segment_size() #0 {{
  %p = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %f = getelementptr inbounds i8, ptr addrspace(4) %p, i64 28
  %v = load i32, ptr addrspace(4) %f, align 4
  ret i32 %v
}}

define ptr @__offload_dyn_lds_ptr() #0 {{
  ret ptr addrspacecast (ptr addrspace(3) @__offload_dyn_lds to ptr)
}}

define void @__offload_barrier() #1 {{
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  ret void
}}

; The running kernel's launch kind, one word of static LDS per workgroup (the dynamic LDS follows the static):
; each work-item stores it at entry, before it reads it, so no barrier is needed.
@__offload_launch_kind_word = internal addrspace(3) global i32 undef, align 4

define void @__offload_set_launch_kind(i32 %k) #0 {{
  store atomic i32 %k, ptr addrspace(3) @__offload_launch_kind_word monotonic, align 4
  ret void
}}

define i32 @__offload_launch_kind() #0 {{
  %k = load atomic i32, ptr addrspace(3) @__offload_launch_kind_word monotonic, align 4
  ret i32 %k
}}

; The claim word of the workgroup's team-shared memory: which atomic type `team_shared` hands it out as. A dispatch
; does not zero static LDS: offload-device's entry clears it in `teams, parallel` kernels, before a barrier.
@__offload_team_shared_claim_word = internal addrspace(3) global i32 undef, align 4

define ptr @__offload_team_shared_claim() #0 {{
  ret ptr addrspacecast (ptr addrspace(3) @__offload_team_shared_claim_word to ptr)
}}

define i64 @__offload_realtime() #0 {{
  %t = call i64 @{realtime}()
  ret i64 %t
}}

declare i64 @{realtime}()

; Out of line and `norecurse`: every panic path ends here, and `llvm.trap` itself is not known not to call back, so a
; function that traps in line is not inferred `norecurse`, and the AMDGPU backend gives every kernel that calls one
; (`core`'s overflow panics) a dynamic stack: scratch sized by the runtime's default rather than by the kernel.
define void @__offload_trap() #2 {{
  call void @llvm.trap()
  unreachable
}}

declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare void @llvm.amdgcn.s.barrier()
declare void @llvm.trap()

@__oclc_ISA_version = protected addrspace(4) constant i32 {isa}, align 4
@__oclc_ABI_version = protected addrspace(4) constant i32 500, align 4
@__oclc_wavefrontsize64 = protected addrspace(4) constant i8 {wave64}, align 1
@__oclc_correctly_rounded_sqrt32 = protected addrspace(4) constant i8 1, align 1
@__oclc_daz_opt = protected addrspace(4) constant i8 0, align 1
@__oclc_finite_only_opt = protected addrspace(4) constant i8 0, align 1
@__oclc_unsafe_math_opt = protected addrspace(4) constant i8 0, align 1

attributes #0 = {{ alwaysinline nounwind }}
attributes #1 = {{ alwaysinline nounwind convergent }}
attributes #2 = {{ noinline norecurse nounwind noreturn cold }}
"#
    )
}

/// Links the rlibs `archives` (bitcode built for `gfx`) into an HSA code object keeping `kernels`: the same bitcode
/// steps as for NVIDIA, then `llc` to an object and `ld.lld -shared` to the code object.
pub fn link_amdgcn(
    archives: &[PathBuf],
    kernels: &[String],
    globals: &[String],
    gfx: &str,
    llvm: &LlvmTools,
    device_libs: &[PathBuf],
    work: &Path,
) -> Result<Vec<Linked>, Error> {
    let io = |p: &Path| Error::io(format!("writing {}", p.display()));
    let lld = llvm.lld.as_ref().ok_or(ToolchainError::Lld)?;
    let members = extract_bitcode(archives, work)?;
    let shim = work.join("shim.ll");
    std::fs::write(&shim, amdgcn_shim(gfx)).map_err(io(&shim))?;
    let linked = link_bitcode(llvm, &shim, &members.user, &members.libs, device_libs, work)?;
    let opt_bc = work.join(format!("{gfx}.bc"));
    run(
        Command::new(&llvm.opt)
            .arg(&linked)
            .arg(format!("-mtriple={AMDGCN_TRIPLE}"))
            .arg(format!("-mcpu={gfx}"))
            .arg("-passes=internalize,globaldce,default<O3>")
            .arg(public_api(kernels, globals))
            .arg("-o")
            .arg(&opt_bc),
        "opt",
    )?;
    let obj = work.join(format!("{gfx}.o"));
    run(
        Command::new(&llvm.llc)
            .arg("-O3")
            .arg(format!("-mtriple={AMDGCN_TRIPLE}"))
            .arg(format!("-mcpu={gfx}"))
            .arg("-filetype=obj")
            .arg(&opt_bc)
            .arg("-o")
            .arg(&obj),
        "llc",
    )?;
    let hsaco = work.join(format!("{gfx}.hsaco"));
    let out = Command::new(lld)
        .args(["-shared", "--no-undefined"])
        .arg(&obj)
        // Machine-code members only where the kernels need them, as from an archive.
        .arg("--start-lib")
        .args(&members.native)
        .arg("--end-lib")
        .arg("-o")
        .arg(&hsaco)
        .output()
        .map_err(Error::io("running ld.lld"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let hint = if err.contains("__ocml_") && device_libs.is_empty() {
            "\nthe math functions come from ROCm's ocml.bc: `apt-get install rocm-device-libs`, or point \
             OFFLOAD_ROCM_DEVICE_LIBS at the directory that has it"
        } else {
            ""
        };
        return Err(Error::DeviceBuild {
            image: format!("the AMD device link for {gfx} (ld.lld)"),
            output: format!("{err}{hint}"),
        });
    }
    let bytes = std::fs::read(&hsaco).map_err(Error::io(format!("reading {}", hsaco.display())))?;
    check_hsaco(&bytes, kernels, gfx)?;
    Ok(vec![Linked {
        arch: gfx.to_string(),
        format: ImageFormat::Hsaco,
        bytes,
    }])
}

/// Every kernel has its kernel descriptor (`NAME.kd`, what the HSA runtime looks up), and the panic record's global
/// is exported.
fn check_hsaco(bytes: &[u8], kernels: &[String], gfx: &str) -> Result<(), Error> {
    use object::{Object, ObjectSymbol};
    let file =
        object::File::parse(bytes).map_err(Error::read_object(format!("the {gfx} code object")))?;
    let names: Vec<String> = file
        .dynamic_symbols()
        .chain(file.symbols())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect();
    let missing: Vec<&String> = kernels
        .iter()
        .filter(|k| !names.contains(&format!("{k}.kd")))
        .collect();
    let image = || format!("the AMD device link for {gfx}");
    if !missing.is_empty() {
        return Err(Error::DeviceBuild {
            image: image(),
            output: format!("kernel descriptors missing from the code object: {missing:?}"),
        });
    }
    if !hsaco_has_panic_record(&file) {
        return Err(Error::DeviceBuild {
            image: image(),
            output: format!(
                "the code object does not export the 8-byte variable {} (a panic would trap without its message): \
                 is offload-device's panic record linked in?",
                gpu_panic::SYMBOL
            ),
        });
    }
    Ok(())
}

/// Whether the code object exports the panic record's global as a variable `hsa_executable_get_symbol_by_name`
/// finds: a defined, global, visible 8-byte data object in the dynamic symbol table (the loader allocates such a
/// variable per agent, in the agent's memory).
fn hsaco_has_panic_record<'a>(file: &impl object::Object<'a>) -> bool {
    use object::{ObjectSymbol, SymbolKind, SymbolScope};
    file.dynamic_symbols().any(|s| {
        s.name() == Ok(gpu_panic::SYMBOL)
            && s.kind() == SymbolKind::Data
            && s.is_definition()
            && s.scope() == SymbolScope::Dynamic
            && s.size() == 8
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "__omp_offloading_rs_1k";

    fn ptx(record: &str) -> String {
        format!(
            ".version 7.8\n.target sm_90\n.address_size 64\n\n{record}\n.visible .entry {KERNEL}(\n\t.param .u64 p0\n)\n{{\n\tret;\n}}\n"
        )
    }

    fn check(ptx: &str) -> Result<(), Error> {
        let cuda = CudaTools {
            ptxas: None,
            libdevice: None,
        };
        check_ptx(ptx, &[KERNEL.to_string()], &cuda)
    }

    #[test]
    fn the_ptx_must_define_the_panic_record_as_a_visible_global() {
        assert!(check(&ptx(
            ".visible .global .align 8 .b8 __offload_panic_record[8];"
        ))
        .is_ok());
        for wrong in [
            "",
            // Internalized: the driver cannot find it.
            ".global .align 8 .b8 __offload_panic_record[8];",
            // Declared, not defined here.
            ".extern .global .align 8 .b8 __offload_panic_record[8];",
            ".visible .global .align 8 .b8 __offload_panic_record_x[8];",
            ".visible .global .align 4 .b8 __offload_panic_record[4];",
        ] {
            let e = check(&ptx(wrong)).unwrap_err().to_string();
            assert!(e.contains("__offload_panic_record"), "{wrong}: {e}");
        }
    }

    #[test]
    fn unresolved_variables_are_refused_but_dynamic_shared_memory_is_not() {
        let record = ".visible .global .align 8 .b8 __offload_panic_record[8];";
        let shared = ".extern .shared .align 16 .b8 __offload_dyn_shared[];";
        assert!(check(&ptx(&format!("{record}\n{shared}"))).is_ok());
        let missing = ".extern .global .align 1 .b8 anon.3fb3.8.llvm.1585[200];";
        let e = check(&ptx(&format!("{record}\n{missing}")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unresolved functions or variables in the PTX: anon.3fb3.8.llvm.1585"),
            "{e}"
        );
    }

    #[test]
    fn the_panic_record_and_print_buffer_are_kept_through_internalize() {
        let api = public_api(&["a".into()], &["b".into()]);
        assert_eq!(
            api,
            "--internalize-public-api-list=a,b,__offload_panic_record,__offload_print_buffer"
        );
    }
}
