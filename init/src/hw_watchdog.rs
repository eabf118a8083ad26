//! The hardware watchdog (`/dev/watchdog*`, the kernel's watchdog API):
//! what its boot status says (did it reset the machine?), arming it with a
//! timeout, petting it while PID 1 makes progress, and disarming it
//! (`WDIOS_DISABLECARD` and the magic close) before a planned reboot or
//! power-off. Opening the device starts the watchdog, so every open here
//! ends armed on purpose or disarmed. The armed device's fd is kept in one
//! process-wide slot so that every place PID 1 shows progress can pet it
//! (never a free-running thread: a stuck PID 1 must stop petting). Never
//! panics.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

/// The device nodes tried, in order.
pub const DEVICES: &[&str] = &["/dev/watchdog0", "/dev/watchdog"];
/// Where the kernel shows each watchdog (CONFIG_WATCHDOG_SYSFS).
pub const SYSFS_CLASS: &str = "/sys/class/watchdog";
/// `WDIOF_CARDRESET`: the last reboot was the watchdog's doing.
pub const WDIOF_CARDRESET: i32 = 0x0020;
/// `WDIOS_DISABLECARD`, for `WDIOC_SETOPTIONS`.
const WDIOS_DISABLECARD: libc::c_int = 0x0001;

/// `struct watchdog_info`.
#[repr(C)]
#[derive(Default)]
pub struct WatchdogInfo {
    options: u32,
    firmware_version: u32,
    identity: [u8; 32],
}

nix::ioctl_read!(wdioc_getsupport, b'W', 0, WatchdogInfo);
nix::ioctl_read!(wdioc_getbootstatus, b'W', 2, libc::c_int);
nix::ioctl_read!(wdioc_setoptions, b'W', 4, libc::c_int);
nix::ioctl_read!(wdioc_keepalive, b'W', 5, libc::c_int);
nix::ioctl_readwrite!(wdioc_settimeout, b'W', 6, libc::c_int);

/// Errors with the watchdog device.
#[derive(Debug, thiserror::Error)]
pub enum WatchdogError {
    /// No device node could be opened.
    #[error("no watchdog device could be opened (tried {tried}; is its driver loaded?)")]
    Open {
        /// The nodes tried.
        tried: String,
        /// The last error.
        #[source]
        source: std::io::Error,
    },
    /// An ioctl failed.
    #[error("{what} on {device} failed")]
    Ioctl {
        /// What was being done.
        what: &'static str,
        /// The device.
        device: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The magic close could not be written.
    #[error("the magic close ('V') on {device} failed")]
    MagicClose {
        /// The device.
        device: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// What a watchdog says about the last reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootStatus {
    /// Whether it reset the machine (`WDIOF_CARDRESET`).
    pub reset: bool,
    /// Its identity string (the driver's).
    pub identity: String,
}

/// A watchdog armed by [`arm`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Armed {
    /// The device node.
    pub device: String,
    /// Its identity string.
    pub identity: String,
    /// The timeout the driver took (it may round what was asked).
    pub timeout_s: u64,
}

impl Armed {
    /// The `hw-watchdog` event's text: `armed device=PATH identity=TEXT
    /// timeout_s=N`, the identity's spaces as `_` (`-` when it has none).
    pub fn event_text(&self) -> String {
        let identity = if self.identity.is_empty() { "-".to_string() } else { self.identity.replace(' ', "_") };
        format!("armed device={} identity={identity} timeout_s={}", self.device, self.timeout_s)
    }
}

/// The armed device's fd, or -1.
static ARMED_FD: AtomicI32 = AtomicI32::new(-1);

fn identity_of(info: &WatchdogInfo) -> String {
    let end = info.identity.iter().position(|b| *b == 0).unwrap_or(info.identity.len());
    String::from_utf8_lossy(info.identity.get(..end).unwrap_or_default()).trim().to_string()
}

/// Opens the first device node that opens (this starts the watchdog).
fn open_device() -> Result<(OwnedFd, String), WatchdogError> {
    let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
    for dev in DEVICES {
        match OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC).open(dev) {
            Ok(f) => return Ok((OwnedFd::from(f), dev.to_string())),
            Err(e) => last = e,
        }
    }
    Err(WatchdogError::Open { tried: DEVICES.join(", "), source: last })
}

fn ioctl_err<'d>(what: &'static str, device: &'d str) -> impl FnOnce(nix::Error) -> WatchdogError + 'd {
    move |source| WatchdogError::Ioctl { what, device: device.to_string(), source }
}

fn identity(fd: &OwnedFd) -> String {
    let mut info = WatchdogInfo::default();
    // SAFETY: WDIOC_GETSUPPORT fills a struct watchdog_info, which `info` is.
    match unsafe { wdioc_getsupport(fd.as_raw_fd(), &mut info) } {
        Ok(_) => identity_of(&info),
        Err(_) => String::new(),
    }
}

/// Stops the watchdog behind `fd` and closes it: `WDIOS_DISABLECARD`, then
/// the magic close, which a driver without `nowayout` also takes as a stop.
fn disarm_fd(fd: OwnedFd, device: &str) -> Result<(), WatchdogError> {
    let mut opt = WDIOS_DISABLECARD;
    // SAFETY: WDIOC_SETOPTIONS reads an int, which `opt` is.
    let disabled = unsafe { wdioc_setoptions(fd.as_raw_fd(), &mut opt) }
        .map(|_| ())
        .map_err(ioctl_err("WDIOC_SETOPTIONS(WDIOS_DISABLECARD)", device));
    let mut file = std::fs::File::from(fd);
    let closed =
        file.write_all(b"V").map_err(|source| WatchdogError::MagicClose { device: device.to_string(), source });
    drop(file);
    disabled.and(closed)
}

/// What the machine's watchdog says about the last reset: from sysfs when
/// the kernel shows it (nothing is opened then), otherwise from the device,
/// which is disarmed again at once. `Ok(None)`: no watchdog at all.
pub fn boot_status() -> Result<Option<BootStatus>, WatchdogError> {
    if let Some(s) = boot_status_in(Path::new(SYSFS_CLASS)) {
        return Ok(Some(s));
    }
    let (fd, device) = match open_device() {
        Ok(d) => d,
        Err(WatchdogError::Open { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let identity = identity(&fd);
    let mut status: libc::c_int = 0;
    // SAFETY: WDIOC_GETBOOTSTATUS writes an int, which `status` is.
    let read =
        unsafe { wdioc_getbootstatus(fd.as_raw_fd(), &mut status) }.map_err(ioctl_err("WDIOC_GETBOOTSTATUS", &device));
    let disarmed = disarm_fd(fd, &device);
    read?;
    disarmed?;
    Ok(Some(BootStatus { reset: status & WDIOF_CARDRESET != 0, identity }))
}

/// The first watchdog under `class` (sysfs) with a readable `bootstatus`.
fn boot_status_in(class: &Path) -> Option<BootStatus> {
    let mut dirs: Vec<_> = std::fs::read_dir(class).ok()?.flatten().map(|e| e.path()).collect();
    dirs.sort();
    dirs.iter().find_map(|dir| {
        let status: i64 = std::fs::read_to_string(dir.join("bootstatus")).ok()?.trim().parse().ok()?;
        let identity = std::fs::read_to_string(dir.join("identity")).unwrap_or_default().trim().to_string();
        Some(BootStatus { reset: status & i64::from(WDIOF_CARDRESET) != 0, identity })
    })
}

/// Opens the watchdog, sets `timeout_s` and pets it once; from then on
/// [`pet`] keeps it from resetting the machine and [`disarm`] stops it. On
/// any failure the device is disarmed again.
pub fn arm(timeout_s: u64) -> Result<Armed, WatchdogError> {
    let (fd, device) = open_device()?;
    let identity = identity(&fd);
    let mut timeout = libc::c_int::try_from(timeout_s).unwrap_or(libc::c_int::MAX);
    // SAFETY: WDIOC_SETTIMEOUT reads and writes back an int, `timeout`.
    if let Err(e) = unsafe { wdioc_settimeout(fd.as_raw_fd(), &mut timeout) } {
        let _ = disarm_fd(fd, &device);
        return Err(ioctl_err("WDIOC_SETTIMEOUT", &device)(e));
    }
    let raw = fd.into_raw_fd();
    let old = ARMED_FD.swap(raw, Ordering::SeqCst);
    if old >= 0 {
        // SAFETY: a slot's fd is owned by the slot; it was just taken out.
        let _ = disarm_fd(unsafe { OwnedFd::from_raw_fd(old) }, &device);
    }
    pet();
    Ok(Armed { device, identity, timeout_s: u64::try_from(timeout).unwrap_or(timeout_s) })
}

/// Whether a watchdog timeout of `timeout_s` outlasts two `alive` ticks
/// of `alive_s` (PID 1 pets it at each): one late tick must not reset a
/// healthy machine. A driver may round the timeout asked for down.
pub fn outlasts_two_ticks(timeout_s: u64, alive_s: u64) -> bool {
    timeout_s > alive_s.saturating_mul(2)
}

/// Pets the armed watchdog, if there is one (a no-op otherwise).
pub fn pet() {
    let fd = ARMED_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let mut dummy: libc::c_int = 0;
        // SAFETY: WDIOC_KEEPALIVE ignores its int argument; `fd` is the
        // slot's open watchdog fd.
        let _ = unsafe { wdioc_keepalive(fd, &mut dummy) };
    }
}

/// Whether a watchdog is armed.
pub fn armed() -> bool {
    ARMED_FD.load(Ordering::SeqCst) >= 0
}

/// Disarms the armed watchdog, if there is one.
pub fn disarm() -> Result<(), WatchdogError> {
    let fd = ARMED_FD.swap(-1, Ordering::SeqCst);
    if fd < 0 {
        return Ok(());
    }
    // SAFETY: the slot owned this fd; it was just taken out of it.
    disarm_fd(unsafe { OwnedFd::from_raw_fd(fd) }, "the armed watchdog")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_boot_status_reads_the_card_reset_bit_and_the_identity() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().join("watchdog0");
        std::fs::create_dir(&w).unwrap();
        std::fs::write(w.join("bootstatus"), "32\n").unwrap();
        std::fs::write(w.join("identity"), "i6300ESB timer\n").unwrap();
        assert_eq!(boot_status_in(dir.path()), Some(BootStatus { reset: true, identity: "i6300ESB timer".into() }));
        std::fs::write(w.join("bootstatus"), "0\n").unwrap();
        assert_eq!(boot_status_in(dir.path()).map(|s| s.reset), Some(false));
        assert_eq!(boot_status_in(&dir.path().join("none")), None);
    }

    #[test]
    fn the_armed_event_is_one_word_per_value() {
        let a = Armed { device: "/dev/watchdog0".into(), identity: "i6300ESB timer".into(), timeout_s: 300 };
        assert_eq!(a.event_text(), "armed device=/dev/watchdog0 identity=i6300ESB_timer timeout_s=300");
        let a = Armed { identity: String::new(), ..a };
        assert!(a.event_text().contains("identity=- "), "{}", a.event_text());
    }

    #[test]
    fn a_timeout_the_driver_rounded_down_to_two_ticks_is_refused() {
        assert!(outlasts_two_ticks(121, 60));
        assert!(!outlasts_two_ticks(120, 60), "one late tick would reset the machine");
        assert!(!outlasts_two_ticks(30, u64::MAX));
    }

    #[test]
    fn identities_stop_at_their_nul() {
        let mut info = WatchdogInfo::default();
        info.identity[..5].copy_from_slice(b"iTCO\0");
        info.identity[5] = b'x';
        assert_eq!(identity_of(&info), "iTCO");
    }
}
