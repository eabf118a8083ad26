//! The lab protocol: what a lab machine's agent (the init in role
//! `agent`, `bootbench.role=agent`) and the receiver (`bootbench serve`)
//! say to each other, and the cmdline keys of both the agent and the
//! candidate kernels it boots. One definition, used by the guest and the
//! host, so that neither can drift from the other.
//!
//! The model: the machine's default boot (PXE, the default GRUB entry, or
//! QEMU's `-kernel`/`-initrd`) brings up the agent; the agent says hello
//! (which also tells the receiver that the machine came back from its last
//! job), asks for the next job for its machine name, downloads the job's
//! kernel and initramfs (each checked against its sha256), reports that it
//! is about to kexec, and boots the candidate with `kexec_file_load` and
//! `reboot(LINUX_REBOOT_CMD_KEXEC)`. The candidate runs the suite, uploads
//! its document to the job's own upload base (`{base}/lab/jobs/{id}`, with
//! the job's own token from its secrets segment), and reboots
//! (`bootbench.after=reboot`), so the default boot brings the agent back.
//!
//! Every request of the agent carries `Authorization: Bearer TOKEN` with
//! the machine's token (from the agent initramfs's secrets segment, the
//! file [`crate::guest_secrets::UPLOAD_TOKEN_FILE`]). All bodies are JSON
//! except the job files, which are raw bytes.
//!
//! Endpoints (paths relative to the receiver's base URL):
//! - `POST lab/machines/{machine}/hello` with [`Hello`] → 200 [`HelloReply`].
//! - `GET lab/machines/{machine}/next` → 200 [`NextAnswer`].
//! - `GET lab/jobs/{id}/kernel`, `GET lab/jobs/{id}/initrd`, and
//!   `GET lab/jobs/{id}/pack` for a job with a [`JobPack`] → 200 bytes
//!   (only the machine the job is for may fetch them).
//!
//! The userland pack: a machine the lab gave a pack store (a partition
//! with an ext2/3/4 filesystem labelled for it) keeps the pack images its
//! jobs need there, as [`pack_store_file`]. Before the kexec the agent
//! mounts the store, fetches the job's pack into it when it is not there
//! yet (sha256-checked, written under a temporary name and renamed), and
//! unmounts it; the candidate mounts the store read-only
//! (`bootbench.pack_label`) and the pack from it through a read-only loop
//! device (`bootbench.pack_sha256`). A store holds only what bootbench put
//! there: a filesystem with anything but `lost+found` and no
//! [`PACK_STORE_MARKER`] is never written to.
//! - `POST lab/jobs/{id}/events` with [`JobEvent`] → 200 `{}`.
//! - The candidate: `PUT lab/jobs/{id}/runs/{run_id}`, the upload protocol
//!   of `results_uploader` under the job's base URL.
//!
//! Errors are JSON `{"error": "..."}` with a 4xx/5xx status: 401/403 a
//! missing, wrong or revoked token; 404 an unknown machine or job; 409 a
//! job that is not (or no longer) the machine's current one.

// PID 1 runs this module (the agent): no panics (see ARCHITECTURE.md).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use serde::{Deserialize, Serialize};

/// `bootbench.role=agent|candidate`: what the init does. `candidate` (the
/// default) runs the suite; `agent` serves a lab machine.
pub const ROLE_KEY: &str = "bootbench.role";
/// `bootbench.lab=URL`: the receiver's base URL (agent role).
pub const LAB_URL_KEY: &str = "bootbench.lab";
/// `bootbench.machine=NAME`: the machine's name at the receiver (agent role).
pub const MACHINE_KEY: &str = "bootbench.machine";
/// `bootbench.after=poweroff|reboot|halt`: what the init does once the
/// result is out (default `poweroff`; a lab job's candidate reboots).
pub const AFTER_KEY: &str = "bootbench.after";
/// `bootbench.netconsole=IP:PORT`: send the kernel's messages to this UDP
/// address with netconsole, configured before the first workload.
pub const NETCONSOLE_KEY: &str = "bootbench.netconsole";
/// `bootbench.hw_watchdog=SECONDS`: open `/dev/watchdog`, set this timeout
/// and pet it while PID 1 makes progress; a hung kernel is then reset by
/// the hardware (0 or absent: off).
pub const HW_WATCHDOG_KEY: &str = "bootbench.hw_watchdog";
/// `bootbench.lab_job=ID`: the lab job a candidate boots for (recorded in
/// its document's cmdline; the upload URL carries it too).
pub const JOB_KEY: &str = "bootbench.lab_job";

/// The longest machine name: letters, digits, `-`, `_` and `.`.
pub const MAX_MACHINE_NAME: usize = 64;
/// The largest job file an agent downloads (kernel or initramfs).
pub const MAX_JOB_FILE_BYTES: u64 = 1 << 30;
/// The slowest rate a lab machine is given time for when it fetches a
/// job's pack into its store, in bytes per second: the agent's download
/// is cut at the pack's size at this rate (and the request timeout), and
/// the host waits that long on top of its boot bound while the agent has
/// the job. 8 Mbit/s: a 2 GiB pack has about 34 minutes.
pub const PACK_MIN_RATE: u64 = 1 << 20;
/// The largest userland pack an agent fetches into its pack store.
pub const MAX_PACK_BYTES: u64 = 32 << 30;
/// The file at the root of a pack store that says bootbench may write
/// there: written by the first agent on a new filesystem (only
/// `lost+found`), or by the lab.
pub const PACK_STORE_MARKER: &str = ".bootbench-packs";
/// The directory of a pack store that holds the packs.
pub const PACK_STORE_DIR: &str = "packs";

/// A pack's file in a pack store, relative to its root:
/// `packs/SHA256.ext4`.
pub fn pack_store_file(sha256: &str) -> String {
    format!("{PACK_STORE_DIR}/{sha256}.ext4")
}

/// Whether `s` is a sha256 as the protocol writes it: 64 lower-case hex
/// digits (it goes into file names).
pub fn valid_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
/// The longest wait a receiver may ask for between two `next` requests.
pub const MAX_POLL_S: u64 = 3600;

/// Whether `name` is a valid machine name (it goes into URLs and file
/// names unescaped).
pub fn valid_machine_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_MACHINE_NAME
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// What the agent says when it comes up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The agent's kernel: `uname -r` and `uname -v`, space-separated.
    pub agent_kernel: String,
    /// The agent's bootbench version.
    pub agent_version: String,
    /// The agent boot's `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// Whether a hardware watchdog reports that it reset the machine
    /// (`WDIOF_CARDRESET` in its boot status); `None` when no watchdog
    /// could say.
    #[serde(default)]
    pub watchdog_reset: Option<bool>,
    /// The watchdog that said so (its identity string), when one did.
    #[serde(default)]
    pub watchdog: Option<String>,
    /// What this agent can do beyond booting a kernel, e.g.
    /// [`CAPABILITY_PACK_STORE`]; an older agent sends none.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// The capability of an agent that puts a job's pack into the machine's
/// pack store ([`JobPack`]): a job with a pack is never offered to an
/// agent without it, which would boot the candidate without its pack.
pub const CAPABILITY_PACK_STORE: &str = "pack-store";

/// The receiver's answer to [`Hello`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloReply {
    /// The job the machine was running when it left, if any, now closed
    /// by this return.
    #[serde(default)]
    pub closed_job: Option<u64>,
}

/// A file of a job, as the agent is to check it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFile {
    /// Its sha256, lower-case hex.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The userland pack a job's candidate mounts from the machine's pack
/// store (fetched from `lab/jobs/{id}/pack` when the store lacks it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPack {
    /// The pack image's sha256 (lower-case hex) and size.
    #[serde(flatten)]
    pub file: JobFile,
    /// The volume label of the machine's pack store.
    pub label: String,
}

/// A job for the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOffer {
    /// The job's id at the receiver.
    pub id: u64,
    /// The candidate kernel (fetched from `lab/jobs/{id}/kernel`).
    pub kernel: JobFile,
    /// The candidate's initramfs (`lab/jobs/{id}/initrd`).
    pub initrd: JobFile,
    /// The candidate's whole cmdline.
    pub cmdline: String,
    /// The userland pack, when the candidate needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<JobPack>,
}

/// The answer to `next`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum NextAnswer {
    /// Boot this job.
    Run {
        /// The job.
        job: JobOffer,
    },
    /// Nothing queued: ask again after this many seconds (at most
    /// [`MAX_POLL_S`]).
    Wait {
        /// Seconds.
        seconds: u64,
    },
    /// Nothing queued and the lab wants the machine off.
    PowerOff,
}

/// What the agent reports about a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobEvent {
    /// Both files are here and checked; the kexec comes next. The job's
    /// time starts now.
    Kexec,
    /// The job cannot be booted here: a file failed its check or could not
    /// be fetched, or the kernel refused `kexec_file_load` (no such call
    /// on this arch, lockdown, an unsigned kernel under Secure Boot). The
    /// agent goes on with the next job.
    Failed {
        /// Why, for people.
        reason: String,
    },
}

/// The path of a machine's hello, relative to the base URL.
pub fn hello_path(machine: &str) -> String {
    format!("lab/machines/{machine}/hello")
}

/// The path of a machine's next job.
pub fn next_path(machine: &str) -> String {
    format!("lab/machines/{machine}/next")
}

/// Which file of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// The kernel image.
    Kernel,
    /// The initramfs.
    Initrd,
    /// The userland pack's image.
    Pack,
}

impl FileKind {
    /// Its name in paths and messages.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Kernel => "kernel",
            FileKind::Initrd => "initrd",
            FileKind::Pack => "pack",
        }
    }
}

/// The path of a job's file.
pub fn file_path(job: u64, kind: FileKind) -> String {
    format!("lab/jobs/{job}/{}", kind.name())
}

/// The path of a job's events.
pub fn events_path(job: u64) -> String {
    format!("lab/jobs/{job}/events")
}

/// The upload base URL a job's candidate gets in `bootbench.upload`.
pub fn job_upload_base(base_url: &str, job: u64) -> String {
    format!("{}/lab/jobs/{job}", base_url.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_names_are_checked() {
        assert!(valid_machine_name("box-1.lab_a"));
        for bad in ["", ".hidden", "a/b", "a b", "ä", &"x".repeat(MAX_MACHINE_NAME + 1), "a?b"] {
            assert!(!valid_machine_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn answers_round_trip_with_their_tags() {
        let a = NextAnswer::Run {
            job: JobOffer {
                id: 7,
                kernel: JobFile { sha256: "ab".into(), bytes: 3 },
                initrd: JobFile { sha256: "cd".into(), bytes: 4 },
                cmdline: "console=ttyS0".into(),
                pack: None,
            },
        };
        let s = serde_json::to_string(&a).unwrap();
        assert!(s.contains("\"action\":\"run\""), "{s}");
        assert_eq!(serde_json::from_str::<NextAnswer>(&s).unwrap(), a);
        let w: NextAnswer = serde_json::from_str(r#"{"action":"wait","seconds":5}"#).unwrap();
        assert_eq!(w, NextAnswer::Wait { seconds: 5 });
        let p: NextAnswer = serde_json::from_str(r#"{"action":"power_off"}"#).unwrap();
        assert_eq!(p, NextAnswer::PowerOff);
        let e: JobEvent = serde_json::from_str(r#"{"kind":"failed","reason":"x"}"#).unwrap();
        assert_eq!(e, JobEvent::Failed { reason: "x".into() });
        assert_eq!(job_upload_base("http://h:1/", 3), "http://h:1/lab/jobs/3");
    }

    #[test]
    fn a_job_with_a_pack_round_trips_and_one_without_reads_as_before() {
        let sha = "ab".repeat(32);
        let json = format!(
            r#"{{"id":1,"kernel":{{"sha256":"aa","bytes":1}},"initrd":{{"sha256":"bb","bytes":2}},"cmdline":"x","pack":{{"sha256":"{sha}","bytes":9,"label":"bb-packs"}}}}"#
        );
        let job: JobOffer = serde_json::from_str(&json).unwrap();
        let pack = job.pack.clone().unwrap();
        assert_eq!((pack.file.sha256.as_str(), pack.file.bytes, pack.label.as_str()), (sha.as_str(), 9, "bb-packs"));
        assert_eq!(serde_json::from_str::<JobOffer>(&serde_json::to_string(&job).unwrap()).unwrap(), job);
        let old: JobOffer = serde_json::from_str(
            r#"{"id":1,"kernel":{"sha256":"aa","bytes":1},"initrd":{"sha256":"bb","bytes":2},"cmdline":"x"}"#,
        )
        .unwrap();
        assert_eq!(old.pack, None);
        assert_eq!(pack_store_file(&sha), format!("packs/{sha}.ext4"));
        assert!(valid_sha256(&sha));
        for bad in ["", "AB", &"A".repeat(64), &"a".repeat(63), &format!("{}/", "a".repeat(63))] {
            assert!(!valid_sha256(bad), "{bad}");
        }
    }
}
