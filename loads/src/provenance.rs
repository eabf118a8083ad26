//! Where a result came from: kernel, machine, mitigations, and kernel
//! warnings. Reads /proc, /sys and /dev/kmsg; never fails, records what it
//! cannot read as empty.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::schema::{BootbenchInfo, KernelInfo, MachineInfo};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

fn read_trim(path: &str) -> String {
    fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// The running kernel.
pub fn kernel() -> KernelInfo {
    KernelInfo {
        release: read_trim("/proc/sys/kernel/osrelease"),
        version: read_trim("/proc/sys/kernel/version"),
        cmdline: read_trim("/proc/cmdline"),
        image_sha256: None,
        config_sha256: None,
    }
}

/// CPU model from /proc/cpuinfo: `model name` on x86, `cpu` on powerpc.
fn cpu_model(cpuinfo: &str) -> String {
    for key in ["model name", "cpu", "Processor", "cpu model"] {
        if let Some(v) = cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        }) {
            return v;
        }
    }
    String::new()
}

fn mem_total_bytes(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// The machine's MemTotal in bytes; `None` when /proc/meminfo cannot be
/// read or has none.
pub fn mem_total() -> Option<u64> {
    Some(mem_total_bytes(&fs::read_to_string("/proc/meminfo").ok()?)).filter(|&b| b > 0)
}

/// The machine; `accel` as the host announced it.
pub fn machine(accel: Option<String>) -> MachineInfo {
    let uname = nix::sys::utsname::uname().ok();
    let cpus = nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN).ok().flatten().unwrap_or(1);
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096);
    MachineInfo {
        arch: uname.map(|u| u.machine().to_string_lossy().into_owned()).unwrap_or_default(),
        endian: if cfg!(target_endian = "big") { "big" } else { "little" }.to_string(),
        word_bits: usize::BITS,
        page_size: page as u64,
        cpus: cpus as u32,
        cpu_model: cpu_model(&fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
        mem_bytes: mem_total_bytes(&fs::read_to_string("/proc/meminfo").unwrap_or_default()),
        accel,
    }
}

/// Every file of /sys/devices/system/cpu/vulnerabilities.
pub fn mitigations() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(dir) = fs::read_dir("/sys/devices/system/cpu/vulnerabilities") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            out.insert(name, fs::read_to_string(e.path()).map(|s| s.trim().to_string()).unwrap_or_default());
        }
    }
    out
}

/// bootbench's own version.
pub fn bootbench() -> BootbenchInfo {
    BootbenchInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        git: option_env!("BOOTBENCH_GIT").map(str::to_string),
    }
}

/// Kernel log lines that report a warning, bug or oops.
pub fn is_kernel_warning(msg: &str) -> bool {
    msg.contains("WARNING:") || msg.contains("BUG:") || msg.contains("Oops") || msg.contains("Call Trace")
}

/// Reads /dev/kmsg without blocking and returns the warning lines (message
/// text only). `from_boot` reads the whole buffer; otherwise the caller gets
/// only what is logged after [`KmsgCursor::open`].
pub struct KmsgCursor {
    file: Option<fs::File>,
}

impl KmsgCursor {
    /// Opens /dev/kmsg; `from_boot` false skips what is already logged.
    pub fn open(from_boot: bool) -> KmsgCursor {
        let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg").ok();
        if let (Some(f), false) = (&file, from_boot) {
            use std::os::fd::AsRawFd;
            // SEEK_END on /dev/kmsg moves past every record logged so far.
            // SAFETY: lseek on an owned, open descriptor.
            unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_END) };
        }
        KmsgCursor { file }
    }

    /// Warning lines logged since the last call (or since opening).
    pub fn warnings(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let Some(f) = self.file.as_mut() else { return out };
        let mut buf = vec![0u8; 8192];
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let rec = String::from_utf8_lossy(buf.get(..n).unwrap_or_default());
                    // Record: "prio,seq,usec,flags;message\n continuation..."
                    let msg = rec.split_once(';').map(|(_, m)| m).unwrap_or(&rec);
                    let first = msg.lines().next().unwrap_or("").to_string();
                    if is_kernel_warning(&first) {
                        out.push(first);
                    }
                }
                // EPIPE: records were overwritten; keep reading from the next.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_per_arch() {
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: QEMU Virtual CPU version 2.5+\n"),
            "QEMU Virtual CPU version 2.5+"
        );
        assert_eq!(
            cpu_model("processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\n"),
            "POWER9 (architected), altivec supported"
        );
    }

    #[test]
    fn mem_total() {
        assert_eq!(mem_total_bytes("MemTotal:        1004512 kB\nMemFree: 1 kB\n"), 1004512 * 1024);
        assert_eq!(mem_total_bytes("garbage"), 0);
    }

    #[test]
    fn machine_reads_this_host() {
        let m = machine(None);
        assert!(m.cpus >= 1);
        assert!(m.mem_bytes > 0);
        assert!(m.page_size >= 4096);
        assert_eq!(m.word_bits, usize::BITS);
    }

    #[test]
    fn warnings_are_recognised() {
        assert!(is_kernel_warning("WARNING: CPU: 0 PID: 1 at mm/slub.c:123"));
        assert!(is_kernel_warning("BUG: unable to handle page fault"));
        assert!(!is_kernel_warning("random: crng init done"));
    }
}
