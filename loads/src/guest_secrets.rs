//! Where the guest finds its secrets: a segment of its own appended to the
//! initramfs (the kernel unpacks concatenated cpio archives), so the main
//! image keeps its hash from run to run and no secret travels on the
//! kernel cmdline, where QEMU's argv (`ps` on the host) and every process
//! of the guest (`/proc/cmdline`) can read it. The host writes the segment
//! (`bootbench run` with an upload); the init reads each file once, before
//! any workload starts, and removes the directory.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

/// The segment's directory in the guest (mode 0700).
pub const SECRETS_DIR: &str = "/bootbench-secrets";
/// The upload's bearer token, one line (mode 0600).
pub const UPLOAD_TOKEN_FILE: &str = "/bootbench-secrets/upload-token";
/// Extra certificate authorities (PEM) an https upload trusts besides the
/// bundled roots: a lab's own CA (mode 0600).
pub const UPLOAD_CA_FILE: &str = "/bootbench-secrets/upload-ca.pem";
