//! A binary carrying, beside its real images, two broken x86_64 images: one truncated ELF and one that is not an
//! ELF at all (what a corrupt download or a bad build would leave). tests/policy.rs checks that each disables itself
//! with a message while the regions still run on the device.

use offload::__private::{linkme, DeviceImageRecord, ImageFormat, OFFLOAD_IMAGES};
use offload_tests::kernels::double;
use std::ffi::CStr;

static TRUNCATED: [u8; 64] = {
    let mut b = [0u8; 64];
    b[0] = 0x7f;
    b[1] = b'E';
    b[2] = b'L';
    b[3] = b'F';
    b
};
static NOT_ELF: [u8; 16] = *b"PK\x03\x04 a zip file!";

const fn record(bytes: &'static [u8], package: &'static CStr, id: u64) -> DeviceImageRecord {
    DeviceImageRecord {
        version: DeviceImageRecord::VERSION,
        format: ImageFormat::SharedObject.code(),
        id,
        image_start: bytes.as_ptr(),
        // SAFETY: one past the end of the same array.
        image_end: unsafe { bytes.as_ptr().add(bytes.len()) },
        triple: c"x86_64-unknown-linux-gnu".as_ptr(),
        arch: c"x86_64".as_ptr(),
        package: package.as_ptr(),
        package_tag: 1,
    }
}

#[linkme::distributed_slice(OFFLOAD_IMAGES)]
#[linkme(crate = linkme)]
static TRUNCATED_IMAGE: DeviceImageRecord = record(&TRUNCATED, c"truncated", 1);

#[linkme::distributed_slice(OFFLOAD_IMAGES)]
#[linkme(crate = linkme)]
static NOT_ELF_IMAGE: DeviceImageRecord = record(&NOT_ELF, c"not-elf", 2);

fn main() {
    let mut y: Vec<i64> = (0..10).collect();
    let on_host = double(&mut y);
    println!("ran_on={}", offload_tests::ran_on(on_host));
    println!(
        "results_correct={}",
        y.iter().enumerate().all(|(i, &v)| v == 2 * i as i64)
    );
}
