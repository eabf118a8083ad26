//! The host's results file: each boot's guest document inside a host
//! envelope with what the guest cannot know (QEMU's argv and version, image
//! hashes, the boot's classification, the console log). The bottom of the
//! host crate: it depends on the guest's schema (`loads::schema`) and on
//! nothing else of this crate, least of all a service or a command.

pub mod migration;
pub mod pack;
pub mod storage;
pub mod upload;
pub mod upload_plan;

use loads::schema::{RunDocument, WorkloadResult};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `format` field of every results file.
pub const FORMAT: &str = "bootbench-results";
/// Version of the envelope layout (the guest document has its own).
pub const ENVELOPE_VERSION: u32 = 1;

/// Errors reading or writing results files.
#[derive(Debug, thiserror::Error)]
pub enum ResultsFileError {
    /// The file cannot be read.
    #[error("cannot read results file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of the expected shape.
    #[error("{path} is not a bootbench results file")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// Wrong format marker or a newer envelope version.
    #[error("{path}: unsupported results format '{format}' version {version} (this bootbench reads '{FORMAT}' up to version {ENVELOPE_VERSION})")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// Its format field.
        format: String,
        /// Its version.
        version: u32,
    },
    /// The file cannot be written.
    #[error("cannot write results file {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The kernel a boot used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelRef {
    /// Path of the image booted.
    pub path: PathBuf,
    /// sha256 of the image.
    pub image_sha256: String,
    /// sha256 of its config, when a config was found beside it.
    #[serde(default)]
    pub config_sha256: Option<String>,
    /// Where the kernel came from: the Debian package and exact version
    /// of a fetched kernel, the source of one `bootbench kernel build`
    /// built, or `tree DIR (git COMMIT)` for a `--kernel` tree.
    #[serde(default)]
    pub package: Option<String>,
    /// Kernel release, when known on the host.
    #[serde(default)]
    pub release: Option<String>,
    /// The kernel's full git commit (40 hex digits), when whoever booted
    /// it said (`bootbench lava job --kernel-commit`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// The initramfs a boot used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InitramfsRef {
    /// Path of the image.
    pub path: PathBuf,
    /// sha256 of the image.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// QEMU as run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QemuRef {
    /// `qemu-system-* --version`, first line.
    pub version: String,
    /// The full argv.
    pub argv: Vec<String>,
}

impl QemuRef {
    /// The value after `option` in the argv, e.g. `max` for `-cpu`.
    pub fn option(&self, option: &str) -> Option<&str> {
        self.argv.windows(2).find(|w| w[0] == option).map(|w| w[1].as_str())
    }
}

/// The virtual machine's shape; it decides job counts and load sizes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineShape {
    /// Guest arch.
    pub arch: String,
    /// vCPUs.
    pub smp: u32,
    /// Memory in MiB.
    pub mem_mib: u64,
    /// CPU model, when one was asked for.
    #[serde(default)]
    pub cpu: Option<String>,
    /// `kvm`, `tcg` or `icount`.
    pub accel: String,
    /// Why that accel mode was chosen.
    #[serde(default)]
    pub accel_reason: String,
    /// The versioned machine type QEMU ran (`pc-q35-10.0` for `-machine
    /// q35` in QEMU 10.0), when QEMU said; files written before it was
    /// recorded lack it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// The CPU model the guest ran on: the `-cpu` given to QEMU, or the
    /// machine type's default when none was; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
}

/// The host that ran a boot. Real-clock figures depend on it; icount
/// figures (counts of guest instructions) should not, which is what lets
/// them be compared across hosts when everything the guest ran matches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRef {
    /// The host's name (`uname -n`).
    pub name: String,
    /// Its CPU model, as `/proc/cpuinfo` names it.
    #[serde(default)]
    pub cpu: String,
    /// Its logical CPUs.
    #[serde(default)]
    pub cpus: u32,
    /// Its kernel release (`uname -r`).
    #[serde(default)]
    pub kernel: String,
}

impl HostRef {
    /// `name [CPU, N CPUs]`: what tells two hosts apart.
    pub fn describe(&self) -> String {
        format!("{} [{}, {} CPUs]", self.name, self.cpu, self.cpus)
    }
}

/// How a boot ended and how long it took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootInfo {
    /// 0-based boot index within the run.
    pub index: u32,
    /// ok, init_panic (the appliance's own init panicked: a bootbench
    /// failure, not the kernel's), panic, oops, hang, qemu_failure or
    /// incomplete.
    pub classification: String,
    /// Details: the panic line, the timeout, what chunks were lost.
    #[serde(default)]
    pub detail: Option<String>,
    /// What failed after the result was complete (a timeout, a kernel panic
    /// or oops, the init's own panic), when the verdict is `ok` anyway: the
    /// result is intact and counts, the failure is recorded beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_failure: Option<String>,
    /// Host wall time from QEMU start to exit.
    pub wall_s: f64,
    /// Host wall time until the init said hello.
    #[serde(default)]
    pub to_hello_s: Option<f64>,
    /// QEMU's exit status (recorded, never the verdict).
    #[serde(default)]
    pub qemu_status: Option<i32>,
    /// The run id a results store keeps this boot's envelope under when
    /// the guest sent no document (a panic, a hang): made by the host
    /// ([`host_run_id`]), since only a document carries the guest's own.
    /// Absent when there is a document, and in files written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope_id: Option<String>,
}

/// A new host-made run id for a boot without a guest document: `host-`
/// and 32 random hex digits (a valid run id, never a guest's boot id).
pub fn host_run_id() -> String {
    format!("{HOST_ID_PREFIX}{}", uuid::Uuid::new_v4().simple())
}

/// How every [`host_run_id`] starts.
pub const HOST_ID_PREFIX: &str = "host-";

/// One result channel of a boot and whether it carried the guest's result
/// stream intact on its own. The host merges the channels, so a result can
/// arrive even when each channel lost a part; this says which one worked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelReport {
    /// `console` (the serial console) or `port` (the virtio-serial results port).
    pub name: String,
    /// Whether this channel alone held the complete, checksummed stream.
    pub intact: bool,
    /// What was wrong with it, when it was not intact.
    #[serde(default)]
    pub detail: Option<String>,
}

/// The workloads a failed boot finished before it failed: each one's own
/// result stream arrived intact although the boot's result document did
/// not (say the kernel panicked in the second workload). Kept for the
/// record; never measurements of a boot: the boot stays failed, and
/// `compare`, `report` and bisect read only [`BootRecord::result`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeptWorkloads {
    /// The finished workloads' results, in the order the guest printed them.
    pub workloads: Vec<WorkloadResult>,
    /// Workload streams that arrived intact but are not a workload result
    /// (with why), so that none is dropped silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl KeptWorkloads {
    /// Parses the guest's per-workload result streams (JSON texts, in the
    /// order printed); `None` when there are none.
    pub fn parse(streams: &[String]) -> Option<KeptWorkloads> {
        if streams.is_empty() {
            return None;
        }
        let mut kept = KeptWorkloads::default();
        for (i, text) in streams.iter().enumerate() {
            match loads::schema::WorkloadStreamDocument::parse(text) {
                Ok((_, w)) => kept.workloads.push(w),
                Err(e) => kept.errors.push(format!(
                    "workload stream {} of {} is intact but not a workload result: {e}",
                    i + 1,
                    streams.len()
                )),
            }
        }
        Some(kept)
    }
}

/// One boot: envelope plus the guest's document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootRecord {
    /// User label (`--label`).
    pub label: String,
    /// The kernel cmdline as passed.
    pub cmdline: String,
    /// Kernel image.
    pub kernel: KernelRef,
    /// Initramfs.
    pub initramfs: InitramfsRef,
    /// QEMU.
    pub qemu: QemuRef,
    /// Machine shape and accel.
    pub machine: MachineShape,
    /// The host that ran it; absent in files written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostRef>,
    /// Boot outcome.
    pub boot: BootInfo,
    /// The guest's document when it arrived intact.
    #[serde(default)]
    pub result: Option<RunDocument>,
    /// Why there is no document (or why it was refused).
    #[serde(default)]
    pub result_error: Option<String>,
    /// When there is no document: the workloads the guest finished before
    /// the boot failed, from their own result streams. Not a result: the
    /// boot's classification and `result` are unchanged by them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads_kept: Option<KeptWorkloads>,
    /// Each result channel the boot had, and whether it delivered the
    /// stream intact by itself.
    #[serde(default)]
    pub channels: Vec<ChannelReport>,
    /// The guest's HTTP upload, when the run asked for one (`--serve`,
    /// `--upload-url`).
    #[serde(default)]
    pub upload: Option<upload::UploadRecord>,
    /// The scratch and swap disks the host made for this boot (sizes, the
    /// mke2fs/mkswap used), when it had any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<storage::HostStorage>,
    /// The userland pack attached to this boot, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<pack::PackRecord>,
    /// The lab job that booted it, when a lab (LAVA) did rather than
    /// bootbench's own QEMU; absent for bootbench's boots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabJob>,
    /// The whole console log.
    pub console_log: String,
}

/// The job of a lab's scheduler that booted a kernel (`bootbench lava
/// import`): what identifies it there, and how the lab judged it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabJob {
    /// The scheduler: `lava`.
    pub system: String,
    /// The job's id there, when known.
    #[serde(default)]
    pub job_id: Option<String>,
    /// Where the job is (its server page), when it came from a server.
    #[serde(default)]
    pub url: Option<String>,
    /// The device that ran it, when known.
    #[serde(default)]
    pub device: Option<String>,
    /// The device type.
    #[serde(default)]
    pub device_type: Option<String>,
    /// How the device booted (`qemu`, `u-boot`, `grub`, `ipxe`).
    #[serde(default)]
    pub boot_method: Option<String>,
    /// The lab's verdict on the job (`pass` or `fail`), with its error.
    #[serde(default)]
    pub result: Option<String>,
    /// The lab's error, when the job failed.
    #[serde(default)]
    pub error: Option<String>,
    /// The lab's class of that error (LAVA's `error_type`: `Test`,
    /// `Infrastructure`, `Canceled`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// The kernel of the lab machine's agent that booted the candidate by
    /// kexec (`uname -r` and `-v`), for bootbench's own lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_kernel: Option<String>,
}

impl BootRecord {
    /// Boots with the same key belong to one kernel group.
    pub fn group_key(&self) -> (String, String, String) {
        (self.kernel.image_sha256.clone(), self.cmdline.clone(), self.label.clone())
    }
}

/// A results file: any number of boots, possibly of several kernels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsFile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Envelope version.
    pub version: u32,
    /// Boots in the order they ran.
    pub boots: Vec<BootRecord>,
}

impl Default for ResultsFile {
    fn default() -> Self {
        ResultsFile { format: FORMAT.into(), version: ENVELOPE_VERSION, boots: Vec::new() }
    }
}

impl ResultsFile {
    /// Reads and checks a results file.
    pub fn read(path: &Path) -> Result<ResultsFile, ResultsFileError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ResultsFileError::Read { path: path.into(), source })?;
        let file: ResultsFile =
            serde_json::from_str(&text).map_err(|source| ResultsFileError::Parse { path: path.into(), source })?;
        if file.format != FORMAT || file.version > ENVELOPE_VERSION {
            return Err(ResultsFileError::Unsupported {
                path: path.into(),
                format: file.format,
                version: file.version,
            });
        }
        Ok(file)
    }

    /// Writes the file atomically and durably: a temp file beside it,
    /// fsync, rename over the old file, fsync of the directory. An
    /// interrupted write (or a crash, or a power cut) never destroys an
    /// earlier complete file: the path holds either it or the new one.
    pub fn write(&self, path: &Path) -> Result<(), ResultsFileError> {
        use std::io::Write;
        let err = |source| ResultsFileError::Write { path: path.into(), source };
        let json = serde_json::to_vec_pretty(self).map_err(|e| err(std::io::Error::other(e)))?;
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(".partial");
        let tmp = PathBuf::from(tmp_name);
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(&json).and_then(|()| f.sync_all()).map_err(err)?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(err)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let mut f = ResultsFile::default();
        f.boots.push(BootRecord { label: "a".into(), ..Default::default() });
        f.write(&p).unwrap();
        assert_eq!(ResultsFile::read(&p).unwrap(), f);

        std::fs::write(&p, r#"{"format":"other","version":1,"boots":[]}"#).unwrap();
        assert!(matches!(ResultsFile::read(&p), Err(ResultsFileError::Unsupported { .. })));
        std::fs::write(&p, "not json").unwrap();
        let e = ResultsFile::read(&p).unwrap_err();
        assert!(e.to_string().contains("r.json"), "{e}");
        assert!(matches!(ResultsFile::read(&dir.path().join("missing.json")), Err(ResultsFileError::Read { .. })));
    }

    #[test]
    fn write_replaces_the_file_whole_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let mut f = ResultsFile::default();
        for label in ["a", "b"] {
            f.boots.push(BootRecord { label: label.into(), ..Default::default() });
            f.write(&p).unwrap();
            assert_eq!(ResultsFile::read(&p).unwrap(), f);
        }
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("r.json")]);
    }

    #[test]
    fn kept_workloads_keep_every_stream_and_say_which_did_not_parse() {
        assert_eq!(KeptWorkloads::parse(&[]), None);
        let fork = serde_json::to_string(&WorkloadResult { name: "fork".into(), ..Default::default() }).unwrap();
        let kept = KeptWorkloads::parse(&[fork, "{\"name\": 3}".into()]).unwrap();
        assert_eq!(kept.workloads.len(), 1);
        assert_eq!(kept.workloads[0].name, "fork");
        assert_eq!(kept.errors.len(), 1, "a stream that does not parse is recorded, not dropped");
        assert!(kept.errors[0].contains("workload stream 2 of 2"), "{:?}", kept.errors);
    }

    #[test]
    fn two_workloads_with_the_same_result_are_two_streams_and_both_are_kept() {
        use loads::console_protocol::{encode, Decoder, StreamKind};
        // The same spec failing the same way twice: byte-identical results.
        let failed =
            WorkloadResult { name: "dbench".into(), error: Some("no scratch disk".into()), ..Default::default() };
        let mut decoder = Decoder::new();
        for position in [1, 2] {
            let json = loads::runner::workload_stream_json(position, &failed).unwrap();
            for line in encode(StreamKind::Workload, "boot", &json) {
                decoder.feed_line(&line);
            }
        }
        let streams = decoder.workload_documents();
        assert_eq!(streams.len(), 2, "one stream swallowed the other");
        let kept = KeptWorkloads::parse(&streams).unwrap();
        assert_eq!(kept.workloads, [failed.clone(), failed.clone()]);
        assert!(kept.errors.is_empty(), "{:?}", kept.errors);
        // A stream from an image before the envelope: a bare result.
        let bare = KeptWorkloads::parse(&[serde_json::to_string(&failed).unwrap()]).unwrap();
        assert_eq!(bare.workloads, [failed]);
    }

    #[test]
    fn late_failure_and_kept_workloads_appear_only_when_there_are_some() {
        let plain = serde_json::to_value(BootRecord::default()).unwrap();
        assert!(plain["boot"].get("late_failure").is_none());
        assert!(plain.get("workloads_kept").is_none());
        let mut r = BootRecord::default();
        r.boot.late_failure = Some("after the result was complete: hang (silence)".into());
        let fork = serde_json::to_string(&WorkloadResult { name: "fork".into(), ..Default::default() }).unwrap();
        r.workloads_kept = KeptWorkloads::parse(&[fork]);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["boot"]["late_failure"], "after the result was complete: hang (silence)");
        assert_eq!(v["workloads_kept"]["workloads"][0]["name"], "fork");
        assert_eq!(serde_json::from_value::<BootRecord>(v).unwrap(), r);
    }
}
