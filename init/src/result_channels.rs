//! Getting the result out: the framed stream on the console, and the same
//! stream on a virtio-serial port when the host asked for one
//! (`bootbench.port=NAME`). Every line is one write(2), so nothing of ours
//! is split by another userspace writer.

use loads::console_protocol;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Errors on a result channel.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The named virtio port never appeared.
    #[error("virtio port '{name}' not found under /sys/class/virtio-ports after {waited_ms} ms")]
    PortMissing {
        /// Port name.
        name: String,
        /// How long we waited.
        waited_ms: u128,
    },
    /// Opening or writing the port failed.
    #[error("cannot write virtio port {path}")]
    PortWrite {
        /// Device node.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The kernel's console log level, lowered to emergencies only while the
/// result goes out: a printk reaching the serial line in the middle of a
/// result line would damage it (the checksums catch that, but the chunk
/// is lost on that channel). The messages stay in the kernel log.
struct QuietConsole {
    previous: Option<libc::c_int>,
}

/// `SYSLOG_ACTION_CONSOLE_LEVEL` of syslog(2).
const SYSLOG_ACTION_CONSOLE_LEVEL: libc::c_int = 8;

impl QuietConsole {
    fn new() -> QuietConsole {
        // The first field of /proc/sys/kernel/printk is the console level.
        let previous = fs::read_to_string("/proc/sys/kernel/printk")
            .ok()
            .and_then(|t| t.split_whitespace().next().and_then(|f| f.parse().ok()));
        // SAFETY: this action reads no buffer; the pointer may be null.
        let set = unsafe { libc::klogctl(SYSLOG_ACTION_CONSOLE_LEVEL, std::ptr::null_mut(), 1) } == 0;
        QuietConsole { previous: previous.filter(|_| set) }
    }
}

impl Drop for QuietConsole {
    fn drop(&mut self) {
        if let Some(level) = self.previous {
            // SAFETY: as in `new`.
            unsafe { libc::klogctl(SYSLOG_ACTION_CONSOLE_LEVEL, std::ptr::null_mut(), level) };
        }
    }
}

/// Prints one line to the console (stdout is /dev/console).
pub fn console_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    let _ = out.write_all(&buf);
    let _ = out.flush();
}

/// Prints a human-readable message, prefixed so it is easy to grep.
pub fn say(msg: &str) {
    console_line(&format!("bootbench: {msg}"));
}

/// The device node of the virtio port named `name`, if present now.
fn find_port(name: &str) -> Option<PathBuf> {
    let dir = fs::read_dir("/sys/class/virtio-ports").ok()?;
    dir.flatten().find_map(|e| {
        let port_name = fs::read_to_string(e.path().join("name")).ok()?;
        (port_name.trim() == name).then(|| PathBuf::from("/dev").join(e.file_name()))
    })
}

/// Waits up to `limit` for the port to be probed (the module loads it
/// asynchronously). Only used after the workloads, never while measuring.
fn wait_for_port(name: &str, limit: Duration) -> Result<PathBuf, ChannelError> {
    let t0 = Instant::now();
    loop {
        if let Some(p) = find_port(name).filter(|p| p.exists()) {
            return Ok(p);
        }
        if t0.elapsed() >= limit {
            return Err(ChannelError::PortMissing { name: name.to_string(), waited_ms: t0.elapsed().as_millis() });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a framed stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// One workload's result, printed as soon as the workload ends, so a
    /// crash later in the boot cannot take it along.
    Workload,
    /// The whole result document, printed once the workloads are done.
    Result,
}

/// The protocol lines of `document`. The only place that frames.
pub fn frame(stream: Stream, run_id: &str, document: &str) -> Vec<String> {
    let kind = match stream {
        Stream::Workload => console_protocol::StreamKind::Workload,
        Stream::Result => console_protocol::StreamKind::Result,
    };
    console_protocol::encode(kind, run_id, document)
}

/// Writes framed `lines` to the console, with the kernel's console quiet
/// meanwhile, and waits until the console has sent them.
pub fn emit_console(lines: &[String]) {
    {
        let _quiet = QuietConsole::new();
        for l in lines {
            console_line(l);
        }
    }
    drain_console();
}

/// Waits until the console (fd 1) has sent what was written to it: a real
/// UART holds a few KB in its transmit buffer, which a power-off would cut.
/// A no-op when fd 1 is not a terminal.
pub fn drain_console() {
    let _ = nix::sys::termios::tcdrain(std::io::stdout());
}

/// Writes framed `lines` to the virtio port named `name`. Called in a
/// bounded child: the port may block while the host side is not reading.
pub fn emit_port(name: &str, lines: &[String]) -> Result<(), ChannelError> {
    let path = wait_for_port(name, Duration::from_secs(5))?;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|source| ChannelError::PortWrite { path: path.clone(), source })?;
    for l in lines {
        let mut buf = Vec::with_capacity(l.len() + 1);
        buf.extend_from_slice(l.as_bytes());
        buf.push(b'\n');
        f.write_all(&buf).map_err(|source| ChannelError::PortWrite { path: path.clone(), source })?;
    }
    f.flush().map_err(|source| ChannelError::PortWrite { path, source })
}
