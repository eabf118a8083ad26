//! A compressed RAM swap device (`bootbench.zram=BYTES`): sizes zram0,
//! writes a swap header on it (the `mkswap` crate), and enables it at a
//! priority above any disk swap, so memory loads swap to RAM first. At the
//! end it reads how much was stored and what it took compressed. The zram
//! module itself is loaded from the early module list before this runs.

use crate::block_device::{appears, read, swapon, wait_for, write, DeviceError, DEVICE_WAIT};
use loads::schema::ZramInfo;
use std::fs;
use std::path::Path;

/// The device the zram module creates first.
pub const ZRAM_DEVICE: &str = "/dev/zram0";
/// Its sysfs directory.
const ZRAM_SYSFS: &str = "/sys/block/zram0";
/// Swap priority of the zram device; disk swap enabled without a priority
/// gets a negative one, so zram fills first.
pub const ZRAM_PRIORITY: i32 = 100;

/// Errors while setting up or reading the zram swap.
#[derive(Debug, thiserror::Error)]
pub enum ZramError {
    /// zram0 never appeared.
    #[error("{ZRAM_SYSFS} did not appear within {} s (is the zram module packed and loaded? bootbench run --zram packs it)", DEVICE_WAIT.as_secs())]
    NoDevice,
    /// The device could not be opened.
    #[error("cannot open {ZRAM_DEVICE}")]
    Open(#[source] std::io::Error),
    /// The swap header could not be written.
    #[error("cannot write a swap header on {ZRAM_DEVICE}")]
    Header(#[source] mkswap::Error),
    /// The swap header did not reach the device.
    #[error("cannot flush the swap header to {ZRAM_DEVICE}")]
    Flush(#[source] std::io::Error),
    /// A kernel file did not have the expected shape.
    #[error("cannot understand {path}: '{text}'")]
    Unparsable {
        /// The file.
        path: String,
        /// What it held (trimmed).
        text: String,
    },
    /// A sysfs or procfs file could not be read or written, the device
    /// node did not appear, or swapon(2) refused.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

fn sysfs(name: &str) -> String {
    format!("{ZRAM_SYSFS}/{name}")
}

/// The bracketed (active) compressor of a `comp_algorithm` file, e.g.
/// `lzo-rle` from `lzo [lzo-rle] lz4 zstd`.
fn active_algorithm(text: &str) -> Option<&str> {
    text.split_whitespace().find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
}

/// From `mm_stat`: uncompressed bytes stored, the bytes they take
/// compressed (fields 1 and 2), and the most memory zram ever used
/// (`mem_used_max`, field 5).
fn parse_mm_stat(text: &str) -> Option<(u64, u64, u64)> {
    let fields: Vec<u64> = text.split_whitespace().take(5).map(str::parse).collect::<Result<_, _>>().ok()?;
    match fields.as_slice() {
        [stored, compressed, _, _, peak] => Some((*stored, *compressed, *peak)),
        _ => None,
    }
}

/// Sizes zram0 to `bytes`, makes it swap and enables it above disk swap.
pub fn setup(bytes: u64) -> Result<ZramInfo, ZramError> {
    if !appears(Path::new(&sysfs("disksize"))) {
        return Err(ZramError::NoDevice);
    }
    let algorithm = active_algorithm(&read(&sysfs("comp_algorithm"))?).map(str::to_string);
    write(&sysfs("disksize"), &bytes.to_string())?;
    wait_for(ZRAM_DEVICE)?;
    let mut device = fs::OpenOptions::new().read(true).write(true).open(ZRAM_DEVICE).map_err(ZramError::Open)?;
    mkswap::SwapWriter::new().write(&mut device).map_err(ZramError::Header)?;
    device.sync_all().map_err(ZramError::Flush)?;
    drop(device);
    let swap_bytes = swapon(ZRAM_DEVICE, Some(ZRAM_PRIORITY))?;
    Ok(ZramInfo {
        device: ZRAM_DEVICE.to_string(),
        disksize_bytes: bytes,
        algorithm,
        swap_bytes: Some(swap_bytes),
        priority: ZRAM_PRIORITY,
        stored_bytes: None,
        compressed_bytes: None,
        peak_used_bytes: None,
    })
}

/// Reads what zram holds now into `info` (at the end of the workloads).
pub fn record_usage(info: &mut ZramInfo) -> Result<(), ZramError> {
    let path = sysfs("mm_stat");
    let text = read(&path)?;
    let (stored, compressed, peak) =
        parse_mm_stat(&text).ok_or_else(|| ZramError::Unparsable { path, text: text.trim().to_string() })?;
    info.stored_bytes = Some(stored);
    info.compressed_bytes = Some(compressed);
    info.peak_used_bytes = Some(peak);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_active_compressor_is_the_bracketed_one() {
        assert_eq!(active_algorithm("lzo [lzo-rle] lz4 zstd\n"), Some("lzo-rle"));
        assert_eq!(active_algorithm("lzo lz4"), None);
    }

    #[test]
    fn mm_stat_gives_stored_and_compressed_bytes() {
        let text = "  8192000  1024000  1200000        0  1200000        5        0        0        0\n";
        assert_eq!(parse_mm_stat(text), Some((8_192_000, 1_024_000, 1_200_000)));
        assert_eq!(parse_mm_stat("x y 1 2 3"), None);
        assert_eq!(parse_mm_stat("12 13 14 15"), None);
    }
}
