//! The versioned result schema: the document one boot (or one local run)
//! produces. Shared by the guest, which writes it, and the host, which reads,
//! checks and compares it. Metric names are stable; every metric carries its
//! unit and the direction that is better.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of [`RunDocument`]'s layout. Bump it when the layout changes, and
/// teach the host's reader to migrate the older one.
pub const SCHEMA_VERSION: u32 = 1;

/// Which direction of a metric is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Larger values are better (throughput, rates).
    Higher,
    /// Smaller values are better (times, latencies).
    Lower,
}

/// One measured value with its unit and direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The measured value.
    pub value: f64,
    /// Unit, e.g. `forks/s`, `s`, `MB/s`.
    pub unit: String,
    /// Which direction is better.
    pub better: Better,
}

impl Metric {
    /// A metric where higher is better.
    pub fn higher(value: f64, unit: &str) -> Self {
        Metric { value, unit: unit.to_string(), better: Better::Higher }
    }
    /// A metric where lower is better.
    pub fn lower(value: f64, unit: &str) -> Self {
        Metric { value, unit: unit.to_string(), better: Better::Lower }
    }
}

/// Overall outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every workload ran every iteration without error.
    Complete,
    /// Some workloads or iterations failed; the rest are valid.
    Partial,
    /// Nothing usable was measured (bad configuration, setup failure).
    Error,
}

/// An error recorded in the result instead of aborting the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// Where it happened, e.g. `workload fork, iteration 3` or `config`.
    #[serde(rename = "where")]
    pub location: String,
    /// What went wrong, with the input that caused it.
    pub message: String,
}

/// The kernel under test, as the guest sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// `uname -r`.
    pub release: String,
    /// `uname -v`.
    pub version: String,
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// sha256 of the kernel image; the guest cannot know it, the host
    /// envelope records it.
    #[serde(default)]
    pub image_sha256: Option<String>,
    /// sha256 of the kernel config; likewise filled by the host.
    #[serde(default)]
    pub config_sha256: Option<String>,
}

/// The machine the workloads ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// Kernel machine name (`uname -m`), e.g. `x86_64`, `ppc64le`.
    pub arch: String,
    /// `little` or `big`.
    pub endian: String,
    /// Pointer width of the userland (32 or 64).
    pub word_bits: u32,
    /// Page size in bytes (ppc64 kernels often use 64 KiB).
    pub page_size: u64,
    /// Online CPUs.
    pub cpus: u32,
    /// CPU model as /proc/cpuinfo names it.
    pub cpu_model: String,
    /// MemTotal in bytes.
    pub mem_bytes: u64,
    /// `kvm`, `tcg`, `icount` or `bare-metal`, when the host said so on the
    /// cmdline (`bootbench.accel=`); `None` when unknown.
    #[serde(default)]
    pub accel: Option<String>,
}

/// bootbench itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootbenchInfo {
    /// Crate version.
    pub version: String,
    /// Git revision the binary was built from, when known.
    #[serde(default)]
    pub git: Option<String>,
}

/// The suite that ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SuiteInfo {
    /// Suite name (`quick`, `standard`, `full`, or a file's name).
    pub name: String,
    /// sha256 of the effective suite (after cmdline overrides), as JSON.
    pub sha256: String,
    /// Seed for every generated input.
    pub seed: u64,
}

/// Where a result came from: enough to reproduce it and to refuse
/// comparisons of unlike things.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The kernel under test.
    pub kernel: KernelInfo,
    /// The machine.
    pub machine: MachineInfo,
    /// /sys/devices/system/cpu/vulnerabilities, file name to contents.
    pub mitigations: BTreeMap<String, String>,
    /// bootbench's own version.
    pub bootbench: BootbenchInfo,
    /// The suite.
    pub suite: SuiteInfo,
    /// RFC 3339 wall-clock time the run started.
    pub started_at: String,
    /// RFC 3339 wall-clock time the run finished.
    pub finished_at: String,
    /// Kernel log lines with `WARNING:`, `BUG:` or `Oops` seen during the run.
    pub kernel_warnings: Vec<String>,
    /// The scratch disk and swap the init set up, when the run had them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageInfo>,
    /// The hardware watchdog the init armed (`bootbench.hw_watchdog`),
    /// when it armed one: a run it guarded may end in a reset instead of a
    /// hang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_watchdog: Option<HwWatchdogInfo>,
}

/// A hardware watchdog armed for the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HwWatchdogInfo {
    /// The device node, e.g. `/dev/watchdog0`.
    pub device: String,
    /// The driver's identity string, e.g. `i6300ESB timer`.
    #[serde(default)]
    pub identity: String,
    /// The timeout the driver took, in seconds.
    pub timeout_s: u64,
}

/// The block storage a run used (contest's loads live there): what the
/// init mounted, with which block scheduler, and the swap it enabled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageInfo {
    /// The scratch block device, e.g. `/dev/vda`.
    #[serde(default)]
    pub scratch_device: Option<String>,
    /// The volume label it was found by (`bootbench.scratch_label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_label: Option<String>,
    /// Filesystem type mounted on it, e.g. `ext4`.
    #[serde(default)]
    pub scratch_fs: Option<String>,
    /// Where it is mounted, e.g. `/scratch`.
    #[serde(default)]
    pub scratch_mount: Option<String>,
    /// Size of the scratch device in bytes.
    #[serde(default)]
    pub scratch_bytes: Option<u64>,
    /// The block scheduler in effect on the scratch device (the bracketed
    /// entry of /sys/block/DEV/queue/scheduler), e.g. `mq-deadline`.
    #[serde(default)]
    pub scheduler: Option<String>,
    /// The swap device or file, e.g. `/dev/vdb`.
    #[serde(default)]
    pub swap_device: Option<String>,
    /// Swap size in bytes, as the kernel reports it (/proc/swaps).
    #[serde(default)]
    pub swap_bytes: Option<u64>,
    /// The compressed RAM swap device, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zram: Option<ZramInfo>,
    /// The userland pack's disk, found by its virtio serial, e.g.
    /// `/dev/vdc`, when the host attached one; on a lab machine, the
    /// read-only loop device its pack store's file is attached to, e.g.
    /// `/dev/loop0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_device: Option<String>,
    /// Where the pack is mounted read-only, e.g. `/pack`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_mount: Option<String>,
    /// On a lab machine, the label of the pack store the pack came from
    /// (`bootbench.pack_label`) and its device, e.g. `/dev/vdb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_store: Option<PackStoreInfo>,
}

/// A lab machine's pack store, as the candidate found it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackStoreInfo {
    /// Its volume label.
    pub label: String,
    /// The disk or partition that carries it.
    pub device: String,
    /// The pack's file in it, relative to its root.
    pub file: String,
}

/// A zram swap device as the init set it up and left it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZramInfo {
    /// The device, `/dev/zram0`.
    pub device: String,
    /// Its uncompressed size (`disksize`) in bytes.
    pub disksize_bytes: u64,
    /// The compressor in effect (bracketed entry of `comp_algorithm`),
    /// e.g. `lzo-rle`.
    #[serde(default)]
    pub algorithm: Option<String>,
    /// Swap size in bytes, as the kernel reports it (/proc/swaps).
    #[serde(default)]
    pub swap_bytes: Option<u64>,
    /// Its swap priority: above any disk swap, so it fills first.
    pub priority: i32,
    /// Uncompressed bytes stored when the workloads ended (`mm_stat`).
    #[serde(default)]
    pub stored_bytes: Option<u64>,
    /// What they took compressed (`mm_stat`).
    #[serde(default)]
    pub compressed_bytes: Option<u64>,
    /// The most memory zram took at any time during the run, compressed
    /// pages and allocator overhead (`mem_used_max` of `mm_stat`).
    #[serde(default)]
    pub peak_used_bytes: Option<u64>,
}

/// Guest-side timings, in seconds of CLOCK_BOOTTIME (time since the kernel
/// started), so the boot itself is visible.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestTimings {
    /// When the init started.
    pub init_start_s: f64,
    /// When the first workload's child was started; `None` if none ran.
    #[serde(default)]
    pub first_workload_s: Option<f64>,
    /// When the last workload ended.
    #[serde(default)]
    pub workloads_done_s: Option<f64>,
}

/// What PID 1 and the rest of userspace did while a workload was measured.
/// The appliance promises a silent userland; this is the evidence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuietObservation {
    /// Measured wall time these counts cover, in seconds.
    pub measured_s: f64,
    /// PID 1's voluntary context switches during the measured phases.
    pub pid1_voluntary_switches: u64,
    /// PID 1's involuntary context switches during the measured phases.
    pub pid1_involuntary_switches: u64,
    /// Highest count of userspace tasks seen at the start of a measured
    /// phase, other than PID 1 and the workload's own process tree.
    pub other_userspace_tasks: u32,
    /// How the workload process started: it must not inherit PID 1's
    /// blocked signals or OOM protection.
    #[serde(default)]
    pub workload_process: Option<ProcessState>,
}

/// A process's signal and OOM state, from /proc/self.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessState {
    /// `SigBlk` of /proc/self/status (hex mask; all zeros when clean).
    pub signals_blocked: String,
    /// `SigIgn` of /proc/self/status (hex mask; all zeros when clean).
    pub signals_ignored: String,
    /// /proc/self/oom_score_adj.
    pub oom_score_adj: i32,
}

/// One measured iteration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    /// Metrics by stable name.
    pub metrics: BTreeMap<String, Metric>,
    /// Workload-specific detail (counts, per-op latencies).
    #[serde(default)]
    pub detail: serde_json::Map<String, serde_json::Value>,
    /// Failures of parts of the iteration that did not stop the rest
    /// (e.g. one contest row whose load died): each names the part. Any
    /// makes the run `partial`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// What the whole system did during the iteration (context switches,
    /// per-CPU time, interrupts, softirqs, vmstat), to explain a
    /// difference; absent when /proc could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemDeltas>,
}

/// Changes of system-wide counters over one measured iteration (from
/// /proc/stat, /proc/interrupts, /proc/softirqs and /proc/vmstat). They
/// count everything the machine did in that time, the workload's setup and
/// teardown inside the iteration included. The maps hold only the entries
/// that changed, so documents stay small.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemDeltas {
    /// Context switches of all CPUs (`ctxt` of /proc/stat).
    pub context_switches: u64,
    /// Tasks created, forks and clones (`processes` of /proc/stat).
    pub forks: u64,
    /// Time each CPU spent per state, in seconds.
    pub cpus: Vec<CpuTime>,
    /// Interrupts per /proc/interrupts line, summed over CPUs. Numbered
    /// lines are keyed by number and description (`26 IO-APIC 4-edge
    /// ttyS0`), named ones by name (`LOC`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interrupts: BTreeMap<String, u64>,
    /// Softirqs per kind (`TIMER`, `NET_RX`...), summed over CPUs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub softirqs: BTreeMap<String, u64>,
    /// /proc/vmstat changes by name. Event counters (`pgfault`) only grow;
    /// gauges (`nr_free_pages`) may shrink, hence signed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vmstat: BTreeMap<String, i64>,
}

/// One CPU's time per state over an iteration, in seconds (/proc/stat
/// ticks divided by USER_HZ). Signed: some kernels' idle and iowait
/// accounting can step back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTime {
    /// CPU number (`cpuN`).
    pub cpu: u32,
    /// User mode, niced tasks excluded.
    pub user_s: f64,
    /// User mode at positive nice.
    pub nice_s: f64,
    /// Kernel mode.
    pub system_s: f64,
    /// Idle.
    pub idle_s: f64,
    /// Idle with I/O outstanding.
    pub iowait_s: f64,
    /// Hard interrupts.
    pub irq_s: f64,
    /// Softirqs.
    pub softirq_s: f64,
    /// Stolen by the hypervisor.
    pub steal_s: f64,
}

/// One workload's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// Workload name, e.g. `fork`.
    pub name: String,
    /// Effective parameters, defaults included, so comparisons can refuse
    /// unlike runs.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Warmup iterations run and discarded.
    pub warmup: u32,
    /// Why the workload stopped early, if it did.
    #[serde(default)]
    pub error: Option<String>,
    /// Measured iterations.
    pub iterations: Vec<Iteration>,
    /// PID 1 and other tasks during the measured phase (guest only).
    #[serde(default)]
    pub quiet: Option<QuietObservation>,
}

/// One workload's result as its own console stream, printed when the
/// workload ends. Streams are told apart by their content's hash, so the
/// workload's position in the suite is part of it: two workloads with the
/// same result (the same spec failing the same way) are two streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadStreamDocument {
    /// The workload's place in the suite, from 1.
    pub position: u32,
    /// Its result, as the boot's document will hold it.
    pub workload: WorkloadResult,
}

impl WorkloadStreamDocument {
    /// Reads a workload stream: this envelope, or (from images before it)
    /// a bare [`WorkloadResult`], whose position is then unknown.
    pub fn parse(text: &str) -> serde_json::Result<(Option<u32>, WorkloadResult)> {
        match serde_json::from_str::<WorkloadStreamDocument>(text) {
            Ok(d) => Ok((Some(d.position), d.workload)),
            Err(envelope_error) => match serde_json::from_str::<WorkloadResult>(text) {
                Ok(w) => Ok((None, w)),
                Err(_) => Err(envelope_error),
            },
        }
    }
}

/// The guest's result document for one boot (or one `bootbench local` run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDocument {
    /// Always [`SCHEMA_VERSION`] when written.
    pub schema_version: u32,
    /// Unique per run (the guest's boot id).
    pub run_id: String,
    /// Overall outcome.
    pub status: Status,
    /// Errors, each with where it happened.
    pub errors: Vec<RunError>,
    /// Where the result came from.
    pub provenance: Provenance,
    /// Guest timings.
    #[serde(default)]
    pub timings: GuestTimings,
    /// Workload results in suite order.
    pub workloads: Vec<WorkloadResult>,
}

impl RunDocument {
    /// Status derived from errors and workload outcomes: `error` when nothing
    /// was measured, `partial` when anything failed, else `complete`.
    pub fn derive_status(&self) -> Status {
        let measured = self.workloads.iter().any(|w| !w.iterations.is_empty());
        let failed = !self.errors.is_empty()
            || self.workloads.iter().any(|w| w.error.is_some() || w.iterations.iter().any(|i| !i.errors.is_empty()));
        match (measured, failed) {
            (false, _) => Status::Error,
            (true, true) => Status::Partial,
            (true, false) => Status::Complete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_follows_errors_and_measurements() {
        let mut doc = RunDocument {
            schema_version: SCHEMA_VERSION,
            run_id: "r".into(),
            status: Status::Error,
            errors: vec![],
            provenance: Provenance::default(),
            timings: GuestTimings::default(),
            workloads: vec![],
        };
        assert_eq!(doc.derive_status(), Status::Error);
        let mut w = WorkloadResult { name: "fork".into(), ..Default::default() };
        w.iterations.push(Iteration::default());
        doc.workloads.push(w);
        assert_eq!(doc.derive_status(), Status::Complete);
        doc.errors.push(RunError { location: "x".into(), message: "y".into() });
        assert_eq!(doc.derive_status(), Status::Partial);
    }

    #[test]
    fn an_armed_hardware_watchdog_is_recorded_and_older_documents_still_read() {
        let mut p = Provenance::default();
        let plain = serde_json::to_value(&p).unwrap();
        assert!(plain.get("hw_watchdog").is_none(), "nothing written when none was armed: {plain}");
        let back: Provenance = serde_json::from_value(plain).unwrap();
        assert_eq!(back.hw_watchdog, None, "a document from before the field reads as none armed");
        p.hw_watchdog =
            Some(HwWatchdogInfo { device: "/dev/watchdog0".into(), identity: "i6300ESB timer".into(), timeout_s: 300 });
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["hw_watchdog"]["timeout_s"], 300);
        assert_eq!(serde_json::from_value::<Provenance>(j).unwrap(), p);
    }

    #[test]
    fn metric_direction_serialises_lowercase() {
        let j = serde_json::to_string(&Metric::higher(1.5, "forks/s")).unwrap();
        assert_eq!(j, r#"{"value":1.5,"unit":"forks/s","better":"higher"}"#);
    }
}
