//! `cargo offload inspect PATH`: what a fat binary carries, read from its linkme tables with `object` (what
//! `objdump -s -j` shows of clang's `llvm_offload_entries`, made readable): each offload entry, each device image with
//! the kernels inside it, and every entry some kind of image has no kernel for.

use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};
use offload_model::fatbin::{
    section, DeviceImageRecord, EntryFields, ImageFormat, ImageRecord, OffloadEntry,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("cannot read {0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0} is not an object file this tool reads: {1}")]
    Parse(String, object::read::Error),
    #[error("{0} carries no offload tables (it was not built with offload, or its tables were stripped)")]
    NoTables(String),
}

/// One offload entry: a `#[target]` region.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The device symbol (`__omp_offloading_rs_..`).
    pub symbol: String,
    /// The host function, demangled (the region's host id).
    pub host_fn: String,
    pub kind: u16,
    pub flags: u32,
    pub size: u64,
    /// The package tag: which images hold its kernel.
    pub package_tag: u64,
}

/// One embedded device image.
#[derive(Debug, Clone)]
pub struct Image {
    pub triple: String,
    pub arch: String,
    pub format: ImageFormat,
    pub package: String,
    pub package_tag: u64,
    pub size: usize,
    /// Kernel symbols found inside the image.
    pub kernels: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub entries: Vec<Entry>,
    pub images: Vec<Image>,
    /// Image records this version cannot read, and why.
    pub unreadable: Vec<String>,
}

/// The binary's address space as the loader would see it: section contents plus the relocations a PIE applies.
struct Memory<'a> {
    file: object::File<'a>,
    relocated: BTreeMap<u64, u64>,
}

impl<'a> Memory<'a> {
    fn new(file: object::File<'a>) -> Self {
        let mut relocated = BTreeMap::new();
        let symbols: BTreeMap<usize, u64> = file
            .dynamic_symbols()
            .map(|s| (s.index().0, s.address()))
            .collect();
        for (at, r) in file.dynamic_relocations().into_iter().flatten() {
            let base = match r.target() {
                RelocationTarget::Symbol(i) => symbols.get(&i.0).copied().unwrap_or(0),
                _ => 0,
            };
            relocated.insert(at, base.wrapping_add(r.addend() as u64));
        }
        // An object file (not linked yet) relocates against section symbols.
        if file.kind() == object::ObjectKind::Relocatable {
            for section in file.sections() {
                for (off, r) in section.relocations() {
                    if let RelocationTarget::Symbol(i) = r.target() {
                        if let Ok(sym) = file.symbol_by_index(i) {
                            let base = sym
                                .section_index()
                                .and_then(|s| file.section_by_index(s).ok())
                                .map_or(0, |s| s.address())
                                + sym.address();
                            relocated.insert(
                                section.address() + off,
                                base.wrapping_add(r.addend() as u64),
                            );
                        }
                    }
                }
            }
        }
        Memory { file, relocated }
    }

    fn bytes(&self, addr: u64, len: usize) -> Option<&'a [u8]> {
        self.file.sections().find_map(|s| {
            let start = s.address();
            if addr < start || addr + len as u64 > start + s.size() {
                return None;
            }
            let data = s.data().ok()?;
            let at = (addr - start) as usize;
            data.get(at..at + len)
        })
    }

    /// `N` bytes at `addr` as the loader leaves them: the 8-byte words it relocates hold their targets.
    fn relocated<const N: usize>(&self, addr: u64) -> Option<[u8; N]> {
        let mut out: [u8; N] = self.bytes(addr, N)?.try_into().ok()?;
        for (&at, &value) in self.relocated.range(addr..addr + N as u64) {
            let off = (at - addr) as usize;
            if let Some(word) = out.get_mut(off..off + 8) {
                word.copy_from_slice(&value.to_le_bytes());
            }
        }
        Some(out)
    }

    fn cstr_at(&self, addr: u64) -> String {
        let found = self.file.sections().find_map(|s| {
            let start = s.address();
            (addr >= start && addr < start + s.size())
                .then(|| s.data().ok())
                .flatten()
                .map(|d| &d[(addr - start) as usize..])
        });
        let bytes = found.unwrap_or_default();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    }

    fn table(&self, name: &str) -> Option<(u64, u64)> {
        self.file
            .section_by_name(name)
            .map(|s| (s.address(), s.size()))
    }
}

pub fn inspect(path: &std::path::Path) -> Result<Report, InspectError> {
    let shown = path.display().to_string();
    let data = std::fs::read(path).map_err(|e| InspectError::Io(shown.clone(), e))?;
    let file = object::File::parse(&*data).map_err(|e| InspectError::Parse(shown.clone(), e))?;
    let mem = Memory::new(file);
    let (Some(entries_at), images_at) = (mem.table(section::ENTRIES), mem.table(section::IMAGES))
    else {
        return Err(InspectError::NoTables(shown));
    };
    let host_fns: BTreeMap<u64, String> = mem
        .file
        .symbols()
        .filter(|s| s.is_definition())
        .filter_map(|s| Some((s.address(), s.name().ok()?.to_string())))
        .collect();
    let mut entries = Vec::new();
    for k in 0..entries_at.1 / OffloadEntry::SIZE as u64 {
        let Some(bytes) = mem.relocated(entries_at.0 + k * OffloadEntry::SIZE as u64) else {
            continue;
        };
        let e = EntryFields::decode(&bytes);
        let host_fn = host_fns
            .get(&e.address)
            .map(|n| format!("{:#}", rustc_demangle::demangle(n)))
            .unwrap_or_else(|| format!("{:#x}", e.address));
        entries.push(Entry {
            symbol: mem.cstr_at(e.symbol_name),
            host_fn,
            kind: e.kind,
            flags: e.flags,
            size: e.size,
            package_tag: e.data,
        });
    }
    let mut images = Vec::new();
    let mut unreadable = Vec::new();
    let mut seen = BTreeSet::new();
    if let Some((start, size)) = images_at {
        for k in 0..size / DeviceImageRecord::SIZE as u64 {
            let Some(bytes) = mem.relocated(start + k * DeviceImageRecord::SIZE as u64) else {
                continue;
            };
            let rec = match ImageRecord::decode(&bytes) {
                Ok(rec) => rec,
                Err(e) => {
                    unreadable.push(format!("image record {k}: {e}"));
                    continue;
                }
            };
            // A package's image is linked into its library and its binaries alike: the runtime keeps one.
            if !seen.insert(rec.id) {
                continue;
            }
            let len = rec.image_len() as usize;
            let bytes = mem.bytes(rec.image_start, len).unwrap_or_default();
            images.push(Image {
                triple: mem.cstr_at(rec.triple),
                arch: mem.cstr_at(rec.arch),
                format: rec.format,
                package: mem.cstr_at(rec.package),
                package_tag: rec.package_tag,
                size: len,
                kernels: kernels_in(bytes, rec.format),
            });
        }
    }
    Ok(Report {
        entries,
        images,
        unreadable,
    })
}

/// The kernel symbols an image defines, by its format.
pub fn kernels_in(bytes: &[u8], format: ImageFormat) -> Vec<String> {
    let is_kernel = |n: &str| n.starts_with("__omp_offloading_");
    let mut out: Vec<String> = match format {
        ImageFormat::Ptx => String::from_utf8_lossy(bytes)
            .lines()
            .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
            .filter_map(|l| l.split('(').next())
            .map(str::to_string)
            .collect(),
        _ => match object::File::parse(bytes) {
            Ok(f) => f
                .dynamic_symbols()
                .chain(f.symbols())
                .filter_map(|s| s.name().ok().map(str::to_string))
                // An AMD code object names each kernel's descriptor `NAME.kd`.
                .filter_map(|n| match format {
                    ImageFormat::Hsaco => n.strip_suffix(".kd").map(str::to_string),
                    _ => Some(n),
                })
                .filter(|n| is_kernel(n))
                .collect(),
            Err(_) => Vec::new(),
        },
    };
    out.sort();
    out.dedup();
    out
}

impl Report {
    /// For each kind of image (triple, architecture, format), the entries none of its images has a kernel for.
    pub fn missing(&self) -> Vec<(String, Vec<&Entry>)> {
        let mut kinds: BTreeMap<String, Vec<&Image>> = BTreeMap::new();
        for i in &self.images {
            kinds
                .entry(format!("{} {} ({})", i.triple, i.arch, i.format))
                .or_default()
                .push(i);
        }
        kinds
            .into_iter()
            .map(|(kind, imgs)| {
                let missing = self
                    .entries
                    .iter()
                    // A device global (size > 0) is a variable of the image, not a kernel.
                    .filter(|e| e.size == 0)
                    .filter(|e| {
                        !imgs.iter().any(|i| {
                            i.package_tag == e.package_tag && i.kernels.contains(&e.symbol)
                        })
                    })
                    .collect();
                (kind, missing)
            })
            .collect()
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "offload entries ({}):", self.entries.len());
        for e in &self.entries {
            let _ = writeln!(
                out,
                "  {}\n    host function {}  kind {}  size {}  flags {:#x}  package tag {:#018x}",
                e.symbol, e.host_fn, e.kind, e.size, e.flags, e.package_tag
            );
        }
        let _ = writeln!(out, "device images ({}):", self.images.len());
        for i in &self.images {
            let _ = writeln!(
                out,
                "  {} {} ({}), package `{}`, {} bytes, {} kernels",
                i.triple,
                i.arch,
                i.format,
                i.package,
                i.size,
                i.kernels.len()
            );
            for k in &i.kernels {
                let _ = writeln!(out, "    {k}");
            }
        }
        for u in &self.unreadable {
            let _ = writeln!(out, "  {u}");
        }
        let missing = self.missing();
        if missing.iter().all(|(_, m)| m.is_empty()) {
            let _ = writeln!(out, "every entry has a kernel in every kind of image");
        }
        for (kind, m) in missing.iter().filter(|(_, m)| !m.is_empty()) {
            let _ = writeln!(out, "entries without a kernel in any {kind} image:");
            for e in m {
                let _ = writeln!(out, "  {} ({})", e.symbol, e.host_fn);
            }
        }
        out
    }
}
