//! Finding a block device by the volume label of the ext2/3/4 filesystem
//! on it (`bootbench.scratch_label`): on a lab machine the scratch space is
//! a partition the lab made for us with `mke2fs -L LABEL`, and a device is
//! used only when its superblock carries that label, so a disk the lab did
//! not give us is never mounted or written. Reads 2 KiB of each block
//! device (disks and partitions, as /sys/class/block lists them); never
//! writes. Never panics.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where the superblock starts on the device.
const SUPERBLOCK_OFFSET: usize = 1024;
/// `s_magic`, from the superblock's start.
const MAGIC_OFFSET: usize = 0x38;
/// `s_volume_name`, from the superblock's start, 16 bytes.
const LABEL_OFFSET: usize = 0x78;
/// The ext2/3/4 magic number.
const EXT_MAGIC: u16 = 0xEF53;
/// Devices never looked at: RAM-backed ones the init or the kernel made,
/// optical drives (opening one may close its tray), floppies (slow to
/// probe) and network block devices.
const SKIPPED_PREFIXES: &[&str] = &["ram", "loop", "zram", "sr", "fd", "nbd"];
/// How long a single match must stay single: a second disk with the same
/// label that probes a moment later is still seen.
const SETTLE: Duration = Duration::from_millis(500);

/// Errors when finding a device by its label.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LabelError {
    /// No device carries the label.
    #[error("no disk or partition holds an ext2/3/4 filesystem labelled '{label}' (looked for {waited_s} s among: {seen}); the lab makes one with `mke2fs -t ext4 -L {label}` on a partition it gives to bootbench")]
    NotFound {
        /// The label.
        label: String,
        /// How long it was looked for.
        waited_s: u64,
        /// The devices looked at.
        seen: String,
    },
    /// More than one device carries it: none is used.
    #[error("more than one device holds a filesystem labelled '{label}' ({devices}); none is used: the label must name one partition")]
    Ambiguous {
        /// The label.
        label: String,
        /// The devices.
        devices: String,
    },
}

/// The volume label of the ext2/3/4 filesystem whose first 2 KiB are
/// `head`: `None` when it is not one (or is too short), `Some("")` for an
/// unlabelled one.
pub fn ext_label(head: &[u8]) -> Option<String> {
    let sb = head.get(SUPERBLOCK_OFFSET..)?;
    let magic = u16::from_le_bytes([*sb.get(MAGIC_OFFSET)?, *sb.get(MAGIC_OFFSET + 1)?]);
    if magic != EXT_MAGIC {
        return None;
    }
    let name = sb.get(LABEL_OFFSET..LABEL_OFFSET + 16)?;
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(name.get(..end).unwrap_or_default()).into_owned())
}

/// The label of the filesystem on the device (or image file) at `path`.
pub fn label_of(path: &Path) -> Option<String> {
    let mut head = Vec::with_capacity(2048);
    File::open(path).ok()?.take(2048).read_to_end(&mut head).ok()?;
    ext_label(&head)
}

/// The block devices `sys_class_block` lists (`/sys/class/block`), sorted,
/// without the RAM-backed ones.
fn block_devices(sys_class_block: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sys_class_block)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.retain(|n| !SKIPPED_PREFIXES.iter().any(|p| n.starts_with(p)));
    // A whole disk that holds partitions: an old superblock left at its
    // start (mke2fs on the whole disk, then a partition table) is not a
    // filesystem anyone uses.
    names.retain(|n| !has_partitions(sys_class_block, n));
    names.sort();
    names
}

/// Whether disk `name` has partitions: a child directory of its sysfs
/// directory with a `partition` file.
fn has_partitions(sys_class_block: &Path, name: &str) -> bool {
    std::fs::read_dir(sys_class_block.join(name))
        .map(|d| d.filter_map(Result::ok).any(|e| e.path().join("partition").is_file()))
        .unwrap_or(false)
}

/// The one device (`DEV_DIR/NAME`) whose ext2/3/4 filesystem is labelled
/// `label`, looked for until it appears or `wait` passes (a real machine's
/// disks may probe after the init starts). Two or more are an error.
pub fn find(sys_class_block: &Path, dev_dir: &Path, label: &str, wait: Duration) -> Result<String, LabelError> {
    let start = Instant::now();
    let scan = || -> (Vec<String>, Vec<String>) {
        let names = block_devices(sys_class_block);
        let found = names
            .iter()
            .map(|n| dev_dir.join(n))
            .filter(|p| label_of(p).as_deref() == Some(label))
            .map(|p| p.display().to_string())
            .collect();
        (names, found)
    };
    loop {
        let (names, mut found) = scan();
        if found.len() == 1 && !wait.is_zero() {
            std::thread::sleep(SETTLE);
            found = scan().1;
        }
        match found.len() {
            1 => return Ok(found.into_iter().next().unwrap_or_default()),
            0 if start.elapsed() < wait => std::thread::sleep(Duration::from_millis(50)),
            0 => {
                return Err(LabelError::NotFound {
                    label: label.to_string(),
                    waited_s: wait.as_secs(),
                    seen: if names.is_empty() { "none".into() } else { names.join(", ") },
                })
            }
            _ => return Err(LabelError::Ambiguous { label: label.to_string(), devices: found.join(", ") }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A superblock image: magic and label as ext4 writes them.
    fn image(magic: u16, label: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 4096];
        v[SUPERBLOCK_OFFSET + MAGIC_OFFSET..][..2].copy_from_slice(&magic.to_le_bytes());
        v[SUPERBLOCK_OFFSET + LABEL_OFFSET..][..label.len()].copy_from_slice(label);
        v
    }

    #[test]
    fn the_label_is_read_only_from_an_ext_superblock() {
        assert_eq!(ext_label(&image(EXT_MAGIC, b"bb-scratch")), Some("bb-scratch".into()));
        assert_eq!(ext_label(&image(EXT_MAGIC, b"sixteen-bytes-xx")), Some("sixteen-bytes-xx".into()));
        assert_eq!(ext_label(&image(EXT_MAGIC, b"")), Some(String::new()));
        assert_eq!(ext_label(&image(0x1234, b"bb-scratch")), None, "not ext2/3/4");
        assert_eq!(ext_label(&image(EXT_MAGIC, b"bb-scratch")[..1100]), None, "too short");
        assert_eq!(ext_label(&[]), None);
    }

    #[test]
    fn a_filesystem_mke2fs_labelled_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("scratch.img");
        std::fs::write(&img, vec![0u8; 8 << 20]).unwrap();
        let out = std::process::Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-L", "bb-scratch"])
            .arg(&img)
            .output()
            .expect("mke2fs (e2fsprogs) is needed: scripts/setup installs it");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(label_of(&img), Some("bb-scratch".into()));
    }

    /// A fake /sys/class/block and /dev: each device an image file.
    fn machine(devices: &[(&str, Vec<u8>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        for (name, data) in devices {
            std::fs::create_dir_all(dir.path().join("sys").join(name)).unwrap();
            std::fs::write(dir.path().join("dev").join(name), data).unwrap();
        }
        dir
    }

    #[test]
    fn only_the_one_partition_with_the_label_is_chosen() {
        let m = machine(&[
            ("sda", vec![0u8; 4096]),
            ("sda1", image(EXT_MAGIC, b"root")),
            ("sda2", image(EXT_MAGIC, b"bb-scratch")),
            ("sdb", image(0x1234, b"bb-scratch")),
            ("ram0", image(EXT_MAGIC, b"bb-scratch")),
            ("sr0", image(EXT_MAGIC, b"bb-scratch")),
        ]);
        let (sys, dev) = (m.path().join("sys"), m.path().join("dev"));
        let found = find(&sys, &dev, "bb-scratch", Duration::ZERO).unwrap();
        assert_eq!(found, dev.join("sda2").display().to_string());
        // A label nobody has: named, with what was seen.
        let e = find(&sys, &dev, "other", Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("'other'") && e.to_string().contains("sda, sda1, sda2, sdb"), "{e}");
        // A prefix of the label is not the label.
        assert!(find(&sys, &dev, "bb-scratc", Duration::ZERO).is_err());
    }

    #[test]
    fn a_stale_label_on_a_whole_disk_with_partitions_is_not_looked_at() {
        // sdb was mke2fs'd whole once, then partitioned: its old
        // superblock still says bb-scratch, its partition too.
        let m = machine(&[("sdb", image(EXT_MAGIC, b"bb-scratch")), ("sdb1", image(EXT_MAGIC, b"bb-scratch"))]);
        let sys = m.path().join("sys");
        std::fs::create_dir_all(sys.join("sdb/sdb1")).unwrap();
        std::fs::write(sys.join("sdb/sdb1/partition"), b"1\n").unwrap();
        let found = find(&sys, &m.path().join("dev"), "bb-scratch", Duration::ZERO).unwrap();
        assert_eq!(found, m.path().join("dev/sdb1").display().to_string());
    }

    #[test]
    fn two_devices_with_the_label_are_refused() {
        let m = machine(&[("sda2", image(EXT_MAGIC, b"bb-scratch")), ("sdb1", image(EXT_MAGIC, b"bb-scratch"))]);
        let e = find(&m.path().join("sys"), &m.path().join("dev"), "bb-scratch", Duration::ZERO).unwrap_err();
        assert!(matches!(e, LabelError::Ambiguous { .. }), "{e}");
        assert!(e.to_string().contains("sda2") && e.to_string().contains("sdb1"), "{e}");
    }
}
