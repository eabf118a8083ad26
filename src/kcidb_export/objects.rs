//! The KCIDB I/O objects an export writes, as typed structs: the subset of
//! KCIDB's schema 5.3 (the `kcidb-io` package's `schema/v05_03.py`) that
//! bootbench knows values for. Field names are the schema's; an absent
//! `Option` is left out, never written as `null` (KCIDB allows no nulls).
//! Owns the shapes only; what goes into them is the parent module's.

use serde::Serialize;

/// The schema version an export declares: KCIDB I/O 5.3.
pub const SCHEMA_MAJOR: u32 = 5;
/// See [`SCHEMA_MAJOR`].
pub const SCHEMA_MINOR: u32 = 3;

/// The whole KCIDB document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Data {
    /// The schema version.
    pub version: Version,
    /// One checkout per kernel group.
    pub checkouts: Vec<Checkout>,
    /// One build per kernel group.
    pub builds: Vec<Build>,
    /// Every boot's tests.
    pub tests: Vec<Test>,
}

/// `version`: which KCIDB schema the data follows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Version {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

/// KCIDB's status of a test or a build (its `$defs/status`). Each
/// variant's doc is KCIDB's own definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// "the test completed and reported the tested code as faulty."
    Fail,
    /// "the test didn't complete due to a failure in its code, and the
    /// status of the tested code is unknown."
    Error,
    /// "the test didn't run due to a failure in the test harness, and the
    /// status of both the test and the tested code is unknown."
    Miss,
    /// "the test completed and reported the tested code as correct."
    Pass,
    /// "the test completed and had not reported the status of the tested
    /// code, but, for example, produced a performance measurement result."
    Done,
    /// "the test did not run or complete, because it was not applicable,
    /// and the status of both the test and the tested code is unknown."
    Skip,
}

/// A source code checkout (`$defs/checkout`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checkout {
    /// `ORIGIN:...`.
    pub id: String,
    /// The CI system.
    pub origin: String,
    /// The widely-recognised name of the tree (`mainline`, `net-next`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_name: Option<String>,
    /// The shortest https:// URL of the repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_repository_url: Option<String>,
    /// The full (40 hex digit) commit hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit_hash: Option<String>,
    /// A human-readable name of the commit, as `git describe` prints it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit_name: Option<String>,
    /// A human-readable comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Whether the source code parts could be combined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// Free-form extra data.
    pub misc: CheckoutMisc,
}

/// A checkout's `misc`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckoutMisc {
    /// Where the kernel came from, as the results file says
    /// ([`crate::results::KernelRef::package`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_source: Option<String>,
    /// Where the commit (or its short form) was found: `--commit`, the
    /// kernel tree's record, or the label bisect gives a commit's boots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_from: Option<String>,
    /// Why there is no `git_commit_hash`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_commit: Option<String>,
}

/// A build (`$defs/build`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Build {
    /// The checkout it built.
    pub checkout_id: String,
    /// `ORIGIN:...`.
    pub id: String,
    /// The CI system.
    pub origin: String,
    /// A human-readable comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Target architecture (`^[a-z0-9_]*$`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// The build's status.
    pub status: Status,
    /// Free-form extra data.
    pub misc: BuildMisc,
}

/// A build's `misc`: what identifies the kernel and how it was booted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuildMisc {
    /// sha256 of the kernel image.
    pub image_sha256: String,
    /// sha256 of its config, when one was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// The kernel release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_release: Option<String>,
    /// Where the kernel came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_source: Option<String>,
    /// The kernel cmdline its boots had (part of the kernel group).
    pub cmdline: String,
    /// The run's label (part of the kernel group).
    pub label: String,
    /// Why the status is what it is.
    pub status_reason: String,
}

/// A test run (`$defs/test`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Test {
    /// The build tested.
    pub build_id: String,
    /// `ORIGIN:...`, unique per boot and test.
    pub id: String,
    /// The CI system.
    pub origin: String,
    /// Dot-separated path (`bootbench.boot`, `bootbench.fork.fork_rate`).
    pub path: String,
    /// The test's status.
    pub status: Status,
    /// The measured value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<Number>,
    /// A human-readable comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The part of the log most relevant to the outcome (at most 16384
    /// characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_excerpt: Option<String>,
    /// When the boot's suite started (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// Seconds the test took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// The machine it ran on.
    pub environment: Environment,
    /// Free-form extra data.
    pub misc: TestMisc,
}

/// A test's numeric output (`number`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Number {
    /// The value (always finite: JSON has no NaN).
    pub value: f64,
    /// Its unit, as the workload gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// A test's `environment`: the machine shape and the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Environment {
    /// The machine in words.
    pub comment: String,
    /// The machine as the results file records it.
    pub misc: EnvironmentMisc,
}

/// An environment's `misc`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvironmentMisc {
    /// Guest arch.
    pub arch: String,
    /// vCPUs.
    pub smp: u32,
    /// Memory in MiB.
    pub mem_mib: u64,
    /// The CPU model the guest ran on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// `kvm`, `tcg`, `icount`, or the host itself for `bootbench local`.
    pub accel: String,
    /// The versioned machine type QEMU ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// `qemu-system-* --version`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qemu_version: Option<String>,
    /// The host that ran the boot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostMisc>,
}

/// The host in an environment's `misc`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostMisc {
    /// `uname -n`.
    pub name: String,
    /// Its CPU model.
    pub cpu: String,
    /// Its logical CPUs.
    pub cpus: u32,
    /// Its kernel release.
    pub kernel: String,
}

/// A test's `misc`: which boot it belongs to, and what the test's kind
/// adds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestMisc {
    /// The results file it came from.
    pub results_file: String,
    /// The boot's 0-based index in its run.
    pub boot_index: u32,
    /// The guest's run id, or the id the host made for a boot without a
    /// document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The boot's classification (`ok`, `panic`, ...).
    pub classification: String,
    /// What the test's kind adds.
    #[serde(flatten)]
    pub detail: TestDetail,
}

/// What each kind of test adds to its `misc`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TestDetail {
    /// `bootbench.boot`.
    Boot(BootMisc),
    /// `bootbench.WORKLOAD`.
    Workload(WorkloadMisc),
    /// `bootbench.WORKLOAD.METRIC`.
    Metric(MetricMisc),
}

/// The boot test's `misc`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootMisc {
    /// The classification's detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What failed after the result was complete, when the boot is `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_failure: Option<String>,
    /// Why there is no guest document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_error: Option<String>,
    /// The guest document's own status (`complete`, `partial`, `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_status: Option<String>,
    /// The errors the guest recorded, `WHERE: MESSAGE`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guest_errors: Vec<String>,
    /// Workloads a failed boot finished before it failed: kept in the
    /// results file for the record, never exported as measurements.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workloads_kept: Vec<String>,
    /// QEMU's exit status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qemu_status: Option<i32>,
}

/// A workload test's `misc`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadMisc {
    /// The workload's place in the suite, from 1.
    pub position: usize,
    /// Its effective parameters.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Warmup iterations run and discarded.
    pub warmup: u32,
    /// Measured iterations.
    pub iterations: usize,
    /// Why it stopped early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Failures of parts of iterations that did not stop the rest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub iteration_errors: Vec<String>,
}

/// A metric test's `misc`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricMisc {
    /// The workload's place in the suite, from 1.
    pub position: usize,
    /// The metric's name, as the workload gave it (the path's last part
    /// may be the same name with characters KCIDB refuses replaced).
    pub metric: String,
    /// Which direction is better: `higher` or `lower`.
    pub better: String,
    /// The number is the mean of these, one per measured iteration that
    /// has the metric; a value JSON cannot hold (NaN) as its text.
    pub iterations: Vec<serde_json::Value>,
}
