//! How to exec an applet by name: the flag that selects applet mode, the
//! path of this process's own image, and a `Command` for
//! `EXE --applet NAME`. Modules that start applets (the build, SDET, the
//! workload context) take these from here; the dispatcher that runs an
//! applet (`applets`) sits above them all. Depends on no module of the
//! crate.

// PID 1 can reach this module (see ARCHITECTURE.md, "PID 1"): no panics.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::path::Path;
use std::process::Command;

/// The argv[1] that selects applet mode.
pub const APPLET_FLAG: &str = "--applet";

/// The path that execs this process's own image. Exec'ing the magic link
/// itself (rather than the path it reads as) still works when the binary
/// was replaced or deleted on disk while running.
pub const SELF_EXE: &str = "/proc/self/exe";

/// A `Command` that runs applet `name` from the executable `exe` (see
/// `RunContext::applet_exe`).
pub fn command_in(exe: &Path, name: &str) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg(APPLET_FLAG).arg(name);
    cmd
}
