//! The fat binary's tables and their registration: what clang's offloading pipeline keeps in
//! `llvm_offload_entries` and the binary descriptor, kept here in linkme slices.
//!
//! `OFFLOAD_ENTRIES` holds one LLVM-layout `__tgt_offload_entry` per `#[target]` region (written by the macro);
//! `OFFLOAD_IMAGES` one [`DeviceImageRecord`] per embedded device image (written by build support as an ELF object).
//! A constructor in `.init_array` builds the descriptor before `main`, as `.omp_offloading.descriptor_reg` does.

use linkme::distributed_slice;
use offload_model::fatbin::{DeviceImageRecord, ImageFormat, OffloadEntry, RecordPointer};
use std::ffi::CStr;
use std::sync::OnceLock;

/// One offload entry per `#[target]` region of the program, which the macro's expansion adds.
#[distributed_slice]
pub static OFFLOAD_ENTRIES: [OffloadEntry];

/// One record per device image embedded in the program, which build support links in.
#[distributed_slice]
pub static OFFLOAD_IMAGES: [DeviceImageRecord];

/// A registered device image.
pub struct Image {
    pub bytes: &'static [u8],
    pub format: ImageFormat,
    pub triple: &'static str,
    pub arch: &'static str,
    pub package: &'static str,
    /// Only entries with this tag (in their `data` field) are looked up in the image.
    pub package_tag: u64,
}

/// The binary descriptor: every image once, and the host entries every image may implement.
pub struct BinDesc {
    pub images: Vec<Image>,
    pub entries: &'static [OffloadEntry],
    /// Whether any entry is a device global (a `#[declare_target] static`): then a device loads its images before
    /// its present table is first used, so that the globals are present.
    pub has_globals: bool,
}

static DESC: OnceLock<BinDesc> = OnceLock::new();

/// Runs before `main`. Only reads the tables (and the observability environment; `OFFLOAD_PROFILE` opens its file):
/// devices and images initialise on first use.
// Miri cannot read the linker-defined bounds of the tables; its tests never need them.
#[cfg(not(miri))]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER: extern "C" fn() = {
    extern "C" fn register() {
        descriptor();
    }
    register
};

pub fn descriptor() -> &'static BinDesc {
    DESC.get_or_init(|| {
        let start = crate::observe::Watch::now().start();
        let mut images: Vec<Image> = Vec::new();
        let mut seen = Vec::new();
        for rec in OFFLOAD_IMAGES.iter() {
            // A record of another version or an unknown format is not ours to load.
            let Ok(rec) = rec.decode() else {
                continue;
            };
            // A package's image is linked into its library and its binaries alike; keep one.
            if seen.contains(&rec.id) {
                continue;
            }
            seen.push(rec.id);
            // SAFETY: build support writes records pointing at the image bytes and NUL-terminated strings, all
            // static.
            let (bytes, triple, arch, package) = unsafe {
                (
                    rec.image(),
                    rec.string(RecordPointer::Triple),
                    rec.string(RecordPointer::Arch),
                    rec.string(RecordPointer::Package),
                )
            };
            images.push(Image {
                bytes,
                format: rec.format,
                triple,
                arch,
                package,
                package_tag: rec.package_tag,
            });
        }
        let entries: &'static [OffloadEntry] = &OFFLOAD_ENTRIES;
        crate::observe::registered(start, images.len(), entries.len());
        BinDesc {
            images,
            entries,
            has_globals: entries.iter().any(OffloadEntry::is_global),
        }
    })
}

/// Whether the program has device globals (`#[declare_target] static`s). Never under Miri, which cannot read the
/// tables (its tests have none).
pub fn has_globals() -> bool {
    !cfg!(miri) && descriptor().has_globals
}

/// The index of an entry in the table, used to look kernels up in O(1).
pub fn entry_index(entry: &'static OffloadEntry) -> usize {
    let base = OFFLOAD_ENTRIES.as_ptr() as usize;
    (entry as *const OffloadEntry as usize - base) / std::mem::size_of::<OffloadEntry>()
}

pub fn entry_symbol(entry: &OffloadEntry) -> &'static CStr {
    // SAFETY: the macro writes a NUL-terminated static symbol.
    unsafe { CStr::from_ptr(entry.symbol_name) }
}
