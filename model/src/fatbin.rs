//! The fat binary's tables, the one statement of their binary contract: the macro writes an [`OffloadEntry`] per
//! region, build support an [`DeviceImageRecord`] per device image, the runtime registers both before `main`, and
//! `cargo offload inspect` reads them back from a file.
//!
//! The layouts are `#[repr(C)]` structs whose offsets and sizes are asserted below. Code that holds a table in
//! memory uses the structs; code that writes or reads one as bytes (build support's object writer, `inspect`) goes
//! through the one encoder and decoder here, [`EntryFields`] and [`ImageRecord`], whose offsets come from the structs.

use core::ffi::{c_char, c_void};
use core::mem::{offset_of, size_of};

/// The sections of the tables. The runtime declares them as linkme slices, `OFFLOAD_ENTRIES` and `OFFLOAD_IMAGES`,
/// and linkme names a slice's section `linkme_<NAME>` (bounded by `__start_`/`__stop_` symbols), so an object that
/// puts a record into the section joins the slice.
pub mod section {
    /// The entries, LLVM's `llvm_offload_entries` under linkme's name.
    pub const ENTRIES: &str = "linkme_OFFLOAD_ENTRIES";
    /// The device image records.
    pub const IMAGES: &str = "linkme_OFFLOAD_IMAGES";
}

/// LLVM 22's `__tgt_offload_entry` (56 bytes, version 1). `address` is the host function's address (the region's
/// host id), `symbol_name` the NUL-terminated device symbol.
#[repr(C)]
#[derive(Debug)]
pub struct OffloadEntry {
    /// Zero (LLVM reserves it).
    pub reserved: u64,
    /// The entry layout's version, [`OffloadEntry::VERSION`].
    pub version: u16,
    /// The offload kind, [`OffloadEntry::KIND_OPENMP`].
    pub kind: u16,
    /// A kernel: 0. A global: the size of its atomics in the low byte, log2 of its alignment in the next
    /// ([`OffloadEntry::global`]).
    pub flags: u32,
    /// The host address: the region's host id, or the host static of a global.
    pub address: *const c_void,
    /// The NUL-terminated device symbol.
    pub symbol_name: *const c_char,
    /// A kernel: 0. A global: its size in bytes.
    pub size: u64,
    /// The package tag ([`crate::identity::package_tag`]) of the entry's package: which images hold its symbol.
    pub data: u64,
    /// Null (LLVM's auxiliary address, unused here).
    pub aux_addr: *const c_void,
}

// SAFETY: entries are immutable statics pointing at other statics.
unsafe impl Sync for OffloadEntry {}

impl OffloadEntry {
    /// The entry's size in bytes (56).
    pub const SIZE: usize = size_of::<Self>();
    /// The entry layout this version writes and reads.
    pub const VERSION: u16 = 1;
    /// `OFK_OpenMP` in LLVM's `OffloadKind`.
    pub const KIND_OPENMP: u16 = 1;

    /// The entry of a kernel region whose host id is `address` and device symbol is `symbol` (NUL-terminated);
    /// `data` holds the package tag ([`crate::identity::package_tag`]) that picks the images to search.
    pub const fn kernel(address: *const c_void, symbol: &'static [u8], package_tag: u64) -> Self {
        OffloadEntry {
            reserved: 0,
            version: Self::VERSION,
            kind: Self::KIND_OPENMP,
            flags: 0,
            address,
            symbol_name: symbol.as_ptr() as *const c_char,
            size: 0,
            data: package_tag,
            aux_addr: core::ptr::null(),
        }
    }

    /// The entry of a device global (a `#[declare_target] static`): the host static at `address`, `size` bytes
    /// aligned to `align`, and its copy in the images, exported as `symbol`. A nonzero `size` marks a variable, as in
    /// LLVM's entries; `flags` holds the size of its atomics (`DeviceCopy::HOST_ATOMIC`, 0 for a static without
    /// interior mutability) in its low byte and log2 of its alignment in the next.
    pub const fn global(
        address: *const c_void,
        symbol: &'static [u8],
        size: usize,
        align: usize,
        host_atomic: u32,
        package_tag: u64,
    ) -> Self {
        OffloadEntry {
            size: size as u64,
            flags: (host_atomic & 0xff) | (align.trailing_zeros() << 8),
            ..Self::kernel(address, symbol, package_tag)
        }
    }

    /// A global's atomics' size (0: none).
    pub const fn host_atomic(&self) -> u32 {
        self.flags & 0xff
    }

    /// A global's alignment.
    pub const fn align(&self) -> usize {
        1 << ((self.flags >> 8) & 0x3f)
    }

    /// Whether the entry is a device global, not a kernel.
    pub const fn is_global(&self) -> bool {
        self.size != 0
    }
}

// LLVM's layout, which `__tgt_register_lib` reads (LLVM 22's 56-byte `__tgt_offload_entry`, version 1).
const _: () = {
    assert!(OffloadEntry::SIZE == 56);
    assert!(offset_of!(OffloadEntry, reserved) == 0);
    assert!(offset_of!(OffloadEntry, version) == 8);
    assert!(offset_of!(OffloadEntry, kind) == 10);
    assert!(offset_of!(OffloadEntry, flags) == 12);
    assert!(offset_of!(OffloadEntry, address) == 16);
    assert!(offset_of!(OffloadEntry, symbol_name) == 24);
    assert!(offset_of!(OffloadEntry, size) == 32);
    assert!(offset_of!(OffloadEntry, data) == 40);
    assert!(offset_of!(OffloadEntry, aux_addr) == 48);
};

/// What a device image holds, as the image record says and the plugins check before loading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ImageFormat {
    /// An ELF shared object for the host-elf device.
    SharedObject,
    /// PTX text, NUL-terminated (the CUDA driver JIT-compiles it for the device).
    Ptx,
    /// A cubin: ELF machine code for one NVIDIA architecture family.
    Cubin,
    /// An AMD HSA code object.
    Hsaco,
}

impl ImageFormat {
    /// Every format, in code order.
    pub const ALL: [ImageFormat; 4] = [Self::SharedObject, Self::Ptx, Self::Cubin, Self::Hsaco];

    /// The number the record stores.
    pub const fn code(self) -> u32 {
        match self {
            Self::SharedObject => 0,
            Self::Ptx => 1,
            Self::Cubin => 2,
            Self::Hsaco => 3,
        }
    }

    /// The format a record's number stands for, if it is one.
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(Self::SharedObject),
            1 => Some(Self::Ptx),
            2 => Some(Self::Cubin),
            3 => Some(Self::Hsaco),
            _ => None,
        }
    }

    /// The format's name, for people.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SharedObject => "shared object",
            Self::Ptx => "PTX",
            Self::Cubin => "cubin",
            Self::Hsaco => "HSA code object",
        }
    }
}

impl core::fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// One embedded device image, written by build support into the images table of the fat binary. The same image
/// may be linked twice (a package's library and its binaries both carry it); `id` lets the runtime keep one.
/// Read it with [`DeviceImageRecord::decode`]; `format` stays a number here, as a record from another build may
/// hold one this version does not know.
#[repr(C)]
#[derive(Debug)]
pub struct DeviceImageRecord {
    /// The record layout's version, [`DeviceImageRecord::VERSION`].
    pub version: u32,
    /// The image's [`ImageFormat::code`].
    pub format: u32,
    /// A hash of the image's bytes and triple: the same image linked twice has one id.
    pub id: u64,
    /// The image's first byte.
    pub image_start: *const u8,
    /// One past the image's last byte.
    pub image_end: *const u8,
    /// NUL-terminated target triple, e.g. `x86_64-unknown-linux-gnu`.
    pub triple: *const c_char,
    /// NUL-terminated architecture (`sm_90`, `gfx90a`, an x86-64 level or the triple's arch for the host).
    pub arch: *const c_char,
    /// NUL-terminated name of the package whose regions the image holds.
    pub package: *const c_char,
    /// [`crate::identity::package_tag`] of that package: only its entries are looked up in this image.
    pub package_tag: u64,
}

// SAFETY: records are immutable and point into read-only data.
unsafe impl Sync for DeviceImageRecord {}

const _: () = {
    assert!(DeviceImageRecord::SIZE == 64);
    assert!(offset_of!(DeviceImageRecord, version) == 0);
    assert!(offset_of!(DeviceImageRecord, format) == 4);
    assert!(offset_of!(DeviceImageRecord, id) == 8);
    assert!(offset_of!(DeviceImageRecord, image_start) == 16);
    assert!(offset_of!(DeviceImageRecord, image_end) == 24);
    assert!(offset_of!(DeviceImageRecord, triple) == 32);
    assert!(offset_of!(DeviceImageRecord, arch) == 40);
    assert!(offset_of!(DeviceImageRecord, package) == 48);
    assert!(offset_of!(DeviceImageRecord, package_tag) == 56);
};

/// Why an image record cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// Written by a build support of another record version.
    Version(u32),
    /// A format this version does not know.
    Format(u32),
}

impl core::fmt::Display for RecordError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RecordError::Version(v) => write!(
                f,
                "image record version {v}, but this build reads version {}: rebuild the program with one version \
                 of offload",
                DeviceImageRecord::VERSION
            ),
            RecordError::Format(c) => write!(
                f,
                "image format {c} is unknown to this version of offload: rebuild the program with one version of \
                 offload"
            ),
        }
    }
}

impl DeviceImageRecord {
    /// The record's size in bytes (64).
    pub const SIZE: usize = size_of::<Self>();
    /// The record layout this version writes and reads.
    pub const VERSION: u32 = 1;

    /// The decoder: what the record says, if this version can read it. The pointers are returned as they are (the
    /// runtime follows them with [`ImageRecord::image`] and [`ImageRecord::string`]; a record read from a file holds
    /// addresses there, see [`ImageRecord::decode`]).
    pub fn decode(&self) -> Result<ImageRecord<*const u8>, RecordError> {
        if self.version != Self::VERSION {
            return Err(RecordError::Version(self.version));
        }
        let format = ImageFormat::from_code(self.format).ok_or(RecordError::Format(self.format))?;
        Ok(ImageRecord {
            format,
            id: self.id,
            image_start: self.image_start,
            image_end: self.image_end,
            triple: self.triple.cast(),
            arch: self.arch.cast(),
            package: self.package.cast(),
            package_tag: self.package_tag,
        })
    }
}

/// A record's pointer fields: where a writer puts relocations and what a reader follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordPointer {
    /// [`DeviceImageRecord::image_start`].
    ImageStart,
    /// [`DeviceImageRecord::image_end`].
    ImageEnd,
    /// [`DeviceImageRecord::triple`].
    Triple,
    /// [`DeviceImageRecord::arch`].
    Arch,
    /// [`DeviceImageRecord::package`].
    Package,
}

impl RecordPointer {
    /// Every pointer field, in record order.
    pub const ALL: [RecordPointer; 5] = [
        Self::ImageStart,
        Self::ImageEnd,
        Self::Triple,
        Self::Arch,
        Self::Package,
    ];

    /// The field's byte offset in the record.
    pub const fn offset(self) -> usize {
        match self {
            Self::ImageStart => offset_of!(DeviceImageRecord, image_start),
            Self::ImageEnd => offset_of!(DeviceImageRecord, image_end),
            Self::Triple => offset_of!(DeviceImageRecord, triple),
            Self::Arch => offset_of!(DeviceImageRecord, arch),
            Self::Package => offset_of!(DeviceImageRecord, package),
        }
    }
}

/// What an image record says, its pointers as `P`: real pointers in the running program
/// ([`DeviceImageRecord::decode`]), addresses (`u64`) in a file ([`ImageRecord::encode`], [`ImageRecord::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageRecord<P> {
    /// The image's format.
    pub format: ImageFormat,
    /// [`DeviceImageRecord::id`].
    pub id: u64,
    /// [`DeviceImageRecord::image_start`].
    pub image_start: P,
    /// [`DeviceImageRecord::image_end`].
    pub image_end: P,
    /// [`DeviceImageRecord::triple`].
    pub triple: P,
    /// [`DeviceImageRecord::arch`].
    pub arch: P,
    /// [`DeviceImageRecord::package`].
    pub package: P,
    /// [`DeviceImageRecord::package_tag`].
    pub package_tag: u64,
}

impl<P: Copy> ImageRecord<P> {
    /// The value of a pointer field.
    pub fn pointer(&self, field: RecordPointer) -> P {
        match field {
            RecordPointer::ImageStart => self.image_start,
            RecordPointer::ImageEnd => self.image_end,
            RecordPointer::Triple => self.triple,
            RecordPointer::Arch => self.arch,
            RecordPointer::Package => self.package,
        }
    }
}

impl ImageRecord<u64> {
    /// The encoder: the record's bytes, with its pointer fields zero, and the address each pointer field must hold
    /// (a writer of a relocatable object turns these into relocations; a linker fills them in).
    pub fn encode(&self) -> ([u8; DeviceImageRecord::SIZE], [(RecordPointer, u64); 5]) {
        let mut bytes = [0u8; DeviceImageRecord::SIZE];
        put(
            &mut bytes,
            offset_of!(DeviceImageRecord, version),
            &DeviceImageRecord::VERSION.to_le_bytes(),
        );
        put(
            &mut bytes,
            offset_of!(DeviceImageRecord, format),
            &self.format.code().to_le_bytes(),
        );
        put(
            &mut bytes,
            offset_of!(DeviceImageRecord, id),
            &self.id.to_le_bytes(),
        );
        put(
            &mut bytes,
            offset_of!(DeviceImageRecord, package_tag),
            &self.package_tag.to_le_bytes(),
        );
        (bytes, RecordPointer::ALL.map(|p| (p, self.pointer(p))))
    }

    /// The decoder for a record read from a file, its pointer fields already relocated (a record in memory is read
    /// by [`DeviceImageRecord::decode`], which this calls).
    pub fn decode(bytes: &[u8; DeviceImageRecord::SIZE]) -> Result<Self, RecordError> {
        let addr = |p: RecordPointer| {
            core::ptr::without_provenance::<u8>(u64_at(bytes, p.offset()) as usize)
        };
        let record = DeviceImageRecord {
            version: u32_at(bytes, offset_of!(DeviceImageRecord, version)),
            format: u32_at(bytes, offset_of!(DeviceImageRecord, format)),
            id: u64_at(bytes, offset_of!(DeviceImageRecord, id)),
            image_start: addr(RecordPointer::ImageStart),
            image_end: addr(RecordPointer::ImageEnd),
            triple: addr(RecordPointer::Triple).cast(),
            arch: addr(RecordPointer::Arch).cast(),
            package: addr(RecordPointer::Package).cast(),
            package_tag: u64_at(bytes, offset_of!(DeviceImageRecord, package_tag)),
        };
        let r = record.decode()?;
        let a = |p: *const u8| p.addr() as u64;
        Ok(ImageRecord {
            format: r.format,
            id: r.id,
            image_start: a(r.image_start),
            image_end: a(r.image_end),
            triple: a(r.triple),
            arch: a(r.arch),
            package: a(r.package),
            package_tag: r.package_tag,
        })
    }

    /// The image's length in bytes.
    pub fn image_len(&self) -> u64 {
        self.image_end.saturating_sub(self.image_start)
    }
}

impl ImageRecord<*const u8> {
    /// The image's bytes.
    ///
    /// # Safety
    /// The record is one linked into this program (its pointers span the image, which lives as long as `'a`).
    pub unsafe fn image<'a>(&self) -> &'a [u8] {
        let len = self
            .image_end
            .addr()
            .saturating_sub(self.image_start.addr());
        if len == 0 {
            return &[];
        }
        // SAFETY: per the contract.
        unsafe { core::slice::from_raw_parts(self.image_start, len) }
    }

    /// One of the record's strings ([`RecordPointer::Triple`], `Arch` or `Package`); empty where it is absent or
    /// not UTF-8.
    ///
    /// # Safety
    /// The record is one linked into this program (the field is null or a NUL-terminated string that lives as long
    /// as `'a`).
    pub unsafe fn string<'a>(&self, field: RecordPointer) -> &'a str {
        let p = self.pointer(field);
        if p.is_null() {
            return "";
        }
        // SAFETY: per the contract.
        unsafe { core::ffi::CStr::from_ptr(p.cast()) }
            .to_str()
            .unwrap_or("")
    }
}

/// An offload entry as a file holds it, pointers as addresses; [`OffloadEntry`] is the same in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryFields {
    /// [`OffloadEntry::reserved`].
    pub reserved: u64,
    /// [`OffloadEntry::version`].
    pub version: u16,
    /// [`OffloadEntry::kind`].
    pub kind: u16,
    /// [`OffloadEntry::flags`].
    pub flags: u32,
    /// [`OffloadEntry::address`], as an address.
    pub address: u64,
    /// [`OffloadEntry::symbol_name`], as an address.
    pub symbol_name: u64,
    /// [`OffloadEntry::size`].
    pub size: u64,
    /// [`OffloadEntry::data`].
    pub data: u64,
    /// [`OffloadEntry::aux_addr`], as an address.
    pub aux_addr: u64,
}

impl EntryFields {
    /// The encoder (the macro writes entries as statics; this is for tools and tests).
    pub fn encode(&self) -> [u8; OffloadEntry::SIZE] {
        let mut b = [0u8; OffloadEntry::SIZE];
        put(
            &mut b,
            offset_of!(OffloadEntry, reserved),
            &self.reserved.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, version),
            &self.version.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, kind),
            &self.kind.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, flags),
            &self.flags.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, address),
            &self.address.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, symbol_name),
            &self.symbol_name.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, size),
            &self.size.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, data),
            &self.data.to_le_bytes(),
        );
        put(
            &mut b,
            offset_of!(OffloadEntry, aux_addr),
            &self.aux_addr.to_le_bytes(),
        );
        b
    }

    /// The decoder, for an entry whose pointer fields are already relocated.
    pub fn decode(b: &[u8; OffloadEntry::SIZE]) -> Self {
        let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        EntryFields {
            reserved: u64_at(b, offset_of!(OffloadEntry, reserved)),
            version: u16_at(offset_of!(OffloadEntry, version)),
            kind: u16_at(offset_of!(OffloadEntry, kind)),
            flags: u32_at(b, offset_of!(OffloadEntry, flags)),
            address: u64_at(b, offset_of!(OffloadEntry, address)),
            symbol_name: u64_at(b, offset_of!(OffloadEntry, symbol_name)),
            size: u64_at(b, offset_of!(OffloadEntry, size)),
            data: u64_at(b, offset_of!(OffloadEntry, data)),
            aux_addr: u64_at(b, offset_of!(OffloadEntry, aux_addr)),
        }
    }

    /// The pointer fields' offsets, which a reader of a relocatable file must relocate.
    pub const POINTERS: [usize; 3] = [
        offset_of!(OffloadEntry, address),
        offset_of!(OffloadEntry, symbol_name),
        offset_of!(OffloadEntry, aux_addr),
    ];
}

// The tables are little-endian: the host (the one that links them) is x86_64.
fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ImageRecord<u64> {
        ImageRecord {
            format: ImageFormat::Cubin,
            id: 0x0123_4567_89ab_cdef,
            image_start: 0x1000,
            image_end: 0x1000 + 4096,
            triple: 0x2000,
            arch: 0x2020,
            package: 0x2040,
            package_tag: 0xfeed_f00d_dead_beef,
        }
    }

    /// What a linker does with the encoder's relocations.
    fn link(bytes: &mut [u8; DeviceImageRecord::SIZE], pointers: &[(RecordPointer, u64)]) {
        for (p, addr) in pointers {
            put(bytes, p.offset(), &addr.to_le_bytes());
        }
    }

    #[test]
    fn an_encoded_record_decodes_to_itself() {
        for format in ImageFormat::ALL {
            let rec = ImageRecord { format, ..record() };
            let (mut bytes, pointers) = rec.encode();
            // Unrelocated, the pointers are zero (the relocations carry them).
            for p in RecordPointer::ALL {
                assert_eq!(u64_at(&bytes, p.offset()), 0);
            }
            link(&mut bytes, &pointers);
            assert_eq!(ImageRecord::decode(&bytes), Ok(rec));
        }
    }

    #[test]
    fn the_byte_layout_is_the_structs() {
        let (mut bytes, pointers) = record().encode();
        link(&mut bytes, &pointers);
        // The same record in memory, as the runtime sees it, byte for byte.
        let in_memory = DeviceImageRecord {
            version: DeviceImageRecord::VERSION,
            format: ImageFormat::Cubin.code(),
            id: record().id,
            image_start: core::ptr::without_provenance(0x1000),
            image_end: core::ptr::without_provenance(0x2000),
            triple: core::ptr::without_provenance(0x2000),
            arch: core::ptr::without_provenance(0x2020),
            package: core::ptr::without_provenance(0x2040),
            package_tag: record().package_tag,
        };
        // SAFETY: a `repr(C)` struct of integers and pointers without padding, read as bytes.
        let raw: [u8; DeviceImageRecord::SIZE] = unsafe { core::mem::transmute(in_memory) };
        assert_eq!(raw, bytes);
    }

    #[test]
    fn records_of_another_version_or_format_are_refused() {
        let (mut bytes, _) = record().encode();
        bytes[0] = 2;
        assert_eq!(ImageRecord::decode(&bytes), Err(RecordError::Version(2)));
        let (mut bytes, _) = record().encode();
        bytes[offset_of!(DeviceImageRecord, format)] = 9;
        assert_eq!(ImageRecord::decode(&bytes), Err(RecordError::Format(9)));
    }

    #[test]
    fn formats_round_trip_through_their_codes() {
        for f in ImageFormat::ALL {
            assert_eq!(ImageFormat::from_code(f.code()), Some(f));
        }
        assert_eq!(ImageFormat::from_code(4), None);
        // The codes are the contract: records of earlier builds must still read.
        assert_eq!(ImageFormat::SharedObject.code(), 0);
        assert_eq!(ImageFormat::Ptx.code(), 1);
        assert_eq!(ImageFormat::Cubin.code(), 2);
        assert_eq!(ImageFormat::Hsaco.code(), 3);
    }

    #[test]
    fn an_encoded_entry_decodes_to_itself_and_matches_the_struct() {
        let fields = EntryFields {
            reserved: 0,
            version: OffloadEntry::VERSION,
            kind: OffloadEntry::KIND_OPENMP,
            flags: 0,
            address: 0x4000,
            symbol_name: 0x5000,
            size: 0,
            data: 0xabcd,
            aux_addr: 0,
        };
        let bytes = fields.encode();
        assert_eq!(EntryFields::decode(&bytes), fields);
        let entry = OffloadEntry::kernel(core::ptr::without_provenance(0x4000), b"k\0", 0xabcd);
        let entry = OffloadEntry {
            symbol_name: core::ptr::without_provenance(0x5000),
            ..entry
        };
        // SAFETY: a `repr(C)` struct of integers and pointers without padding, read as bytes.
        let raw: [u8; OffloadEntry::SIZE] = unsafe { core::mem::transmute(entry) };
        assert_eq!(raw, bytes);
    }
}
