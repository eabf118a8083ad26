//! `bootbench lava import`: a finished LAVA job's log back into a results
//! file, like `bootbench run` writes, so that `compare`, `report`,
//! `contest-report` and bisection read LAVA runs as they read QEMU boots.
//!
//! The console is rebuilt from the log's `target` lines and read by the
//! same scanner, decoder and verdict as a QEMU boot's
//! (`qemu::console_scan`, `qemu::outcome::judge`): the result document is
//! accepted only checksummed, and a panic is a `panic`. What QEMU's
//! runner would know comes from LAVA instead: the job's metadata (written
//! by `bootbench lava job`: the kernel's and initramfs's sha256 and URL,
//! label, cmdline, commit) and LAVA's own verdict on the job.
//!
//! A result stream that began but did not arrive whole is an error naming
//! the missing chunks, and nothing is written: a partial document must
//! not pass for a boot that produced none. A log that stops before LAVA's
//! end of job is cut, and refused the same way.

use super::job::metadata;
use super::log::JobLog;
use super::LavaError;
use crate::results::{
    BootInfo, BootRecord, ChannelReport, InitramfsRef, KeptWorkloads, KernelRef, LabJob, MachineShape, ResultsFile,
};
use loads::console_protocol::StreamError;
use loads::schema::RunDocument;
use qemu::console_scan::ConsoleScan;
use qemu::outcome::{judge, HangKind, RunEnd, RunFacts};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What `bootbench lava import` takes besides the log.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ImportArgs {
    /// The job definition (the YAML `bootbench lava job` wrote), for its
    /// metadata; not needed when the job comes from a server's URL.
    #[arg(long, value_name = "FILE")]
    pub job: Option<PathBuf>,
    /// The job's id on its server (recorded).
    #[arg(long, value_name = "ID")]
    pub job_id: Option<String>,
    /// The device that ran it (recorded).
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// The label for the boot, instead of the job's.
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
}

/// One job: its log and what else is known of it.
#[derive(Debug, Clone, Default)]
pub struct JobSource {
    /// What names the log in messages (a path or a URL).
    pub name: String,
    /// The log's text.
    pub log: String,
    /// The job definition's text (YAML), when known.
    pub definition: Option<String>,
    /// Where the definition came from, for messages.
    pub definition_name: String,
    /// The job's id.
    pub job_id: Option<String>,
    /// The job's page on its server.
    pub url: Option<String>,
    /// The device that ran it.
    pub device: Option<String>,
}

/// The definition's `metadata` and `device_type`.
fn read_definition(source: &JobSource) -> Result<(BTreeMap<String, String>, Option<String>), LavaError> {
    let Some(text) = &source.definition else { return Ok((BTreeMap::new(), None)) };
    let bad = |problem: String| LavaError::JobDefinition { path: source.definition_name.clone(), problem };
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| bad(e.to_string()))?;
    let mut meta = BTreeMap::new();
    if let Some(m) = value.get("metadata").and_then(|m| m.as_mapping()) {
        for (k, v) in m {
            let value = match v {
                serde_yaml_ng::Value::String(s) => s.clone(),
                serde_yaml_ng::Value::Number(n) => n.to_string(),
                serde_yaml_ng::Value::Bool(b) => b.to_string(),
                _ => continue,
            };
            if let Some(k) = k.as_str() {
                meta.insert(k.to_string(), value);
            }
        }
    }
    let device_type = value.get("device_type").and_then(|d| d.as_str()).map(str::to_string);
    Ok((meta, device_type))
}

/// The results file of one finished job.
pub fn import(source: &JobSource, args: &ImportArgs) -> Result<ResultsFile, LavaError> {
    let log = JobLog::parse(&source.name, &source.log)?;
    let (meta, device_type) = read_definition(source)?;
    let console = log.console_text();
    let jobs = log.results().into_iter().filter(|r| r.definition == "lava" && r.case == "job").count();
    if jobs > 1 {
        return Err(LavaError::Log {
            path: source.name.clone(),
            problem: format!("it holds the ends of {jobs} LAVA jobs: import each job's log on its own"),
        });
    }
    let Some(job_result) = log.job_result() else {
        return Err(LavaError::Log {
            path: source.name.clone(),
            problem: "the log stops before LAVA's end of the job (no `lava`/`job` result): it is cut".into(),
        });
    };
    let downloads = log.downloads();
    let fetched = |label: &str| downloads.iter().find(|d| d.label == label);
    let kernel_sha256 = match (fetched("kernel"), meta.get(metadata::KERNEL_SHA256)) {
        (Some(d), Some(m)) if !d.sha256.eq_ignore_ascii_case(m) => {
            return Err(LavaError::Log {
                path: source.name.clone(),
                problem: format!(
                    "LAVA fetched a kernel with sha256 {}, but the job's metadata says {m}: the job booted another kernel than it names",
                    d.sha256
                ),
            })
        }
        (Some(d), _) => d.sha256.to_lowercase(),
        (None, Some(m)) => m.clone(),
        (None, None) => {
            return Err(LavaError::Log {
                path: source.name.clone(),
                problem: "neither the log (a `kernel` download with its sha256) nor a job definition (--job) says which kernel booted, so its results could not be grouped by kernel".into(),
            })
        }
    };
    if let (Some(d), Some(m)) = (fetched("ramdisk"), meta.get(metadata::INITRAMFS_SHA256)) {
        if !d.sha256.eq_ignore_ascii_case(m) {
            return Err(LavaError::Log {
                path: source.name.clone(),
                problem: format!(
                    "LAVA fetched an initramfs with sha256 {}, but the job's metadata says {m}: the definition is another job's",
                    d.sha256
                ),
            });
        }
    }
    let mut scan = ConsoleScan::new();
    scan.feed_bytes(console.as_bytes());
    scan.finish();
    let hellos = scan.events().iter().filter(|(name, _)| name == loads::console_protocol::EVENT_HELLO).count();
    if hellos > 1 {
        return Err(LavaError::Log {
            path: source.name.clone(),
            problem: format!(
                "the appliance started {hellos} times in one job (the device rebooted and ran the suite again): one boot per job, so nothing is written"
            ),
        });
    }
    if !scan.hello_seen() && scan.panic_line().is_none() && !console.contains("Linux version") {
        return Err(LavaError::Log {
            path: source.name.clone(),
            problem: format!(
                "no console output of a kernel or of bootbench's init in its {} console lines (LAVA's verdict: {}{})",
                log.entries.iter().filter(|e| super::log::is_console(&e.lvl)).count(),
                job_result.result,
                job_result.error_msg.as_deref().map(|m| format!(", {m}")).unwrap_or_default()
            ),
        });
    }
    let document = scan.decoder().last_document();
    if let Err(
        e @ (StreamError::Incomplete { .. } | StreamError::HashMismatch { .. } | StreamError::Unreadable { .. }),
    ) = &document
    {
        return Err(LavaError::TruncatedResult { path: source.name.clone(), problem: e.to_string() });
    }
    let (end, hang_detail, stderr) = lava_end(&log, &job_result);
    let facts = RunFacts::from_scan(&scan, end, hang_detail, stderr);
    let judgement = judge(&facts);

    let (result, result_error) = match &document {
        Ok(text) => match serde_json::from_str::<RunDocument>(text) {
            Ok(mut doc) => {
                doc.provenance.kernel.image_sha256 = Some(kernel_sha256.clone());
                (Some(doc), None)
            }
            Err(e) => (None, Some(format!("the guest's result is intact but not a valid result document: {e}"))),
        },
        Err(e) => (None, Some(e.to_string())),
    };
    let workloads_kept = match &result {
        Some(_) => None,
        None => KeptWorkloads::parse(&scan.workload_documents()),
    };
    let kernel_url = meta
        .get(metadata::KERNEL_URL)
        .cloned()
        .or_else(|| fetched("kernel").and_then(|d| d.url.clone()))
        .unwrap_or_default();
    let ramdisk = fetched("ramdisk");
    let package = (!kernel_url.is_empty()).then(|| format!("LAVA job's kernel {kernel_url}"));
    let guest_machine = result.as_ref().map(|d| &d.provenance.machine);
    let guest_cmdline = result.as_ref().map(|d| d.provenance.kernel.cmdline.clone());
    if let (Some(job), Some(guest)) = (meta.get(metadata::CMDLINE), &guest_cmdline) {
        // LAVA's board templates add their own words; the job's must all be there.
        let booted: std::collections::BTreeSet<&str> = guest.split_whitespace().collect();
        if let Some(w) = job.split_whitespace().find(|w| !booted.contains(w) && !w.starts_with("bootbench.token=")) {
            return Err(LavaError::Log {
                path: source.name.clone(),
                problem: format!(
                    "the job's cmdline has '{w}', which the kernel did not boot with ({guest}): the definition is another job's"
                ),
            });
        }
    }
    // The job's cmdline when known, so that a job's failed and good boots
    // are one group; else the one the guest reported.
    let cmdline = meta.get(metadata::CMDLINE).cloned().or(guest_cmdline).unwrap_or_default();
    let accel = guest_machine.and_then(|m| m.accel.clone()).unwrap_or_else(|| {
        cmdline.split_whitespace().find_map(|w| w.strip_prefix("bootbench.accel=")).unwrap_or("unknown").to_string()
    });
    let hello_dt = log.first_target_time(&format!("{} EVENT hello", loads::console_protocol::MARKER));
    let first_dt = log.entries.first().and_then(|e| e.dt.as_deref());
    let record = BootRecord {
        label: args.label.clone().or_else(|| meta.get(metadata::LABEL).cloned()).unwrap_or_else(|| "lava".into()),
        cmdline,
        kernel: KernelRef {
            path: PathBuf::from(&kernel_url),
            image_sha256: kernel_sha256.clone(),
            config_sha256: None,
            package,
            release: result.as_ref().map(|d| d.provenance.kernel.release.clone()),
            commit: meta.get(metadata::KERNEL_COMMIT).cloned(),
        },
        initramfs: InitramfsRef {
            path: PathBuf::from(
                meta.get(metadata::INITRAMFS_URL)
                    .cloned()
                    .or_else(|| ramdisk.and_then(|d| d.url.clone()))
                    .unwrap_or_default(),
            ),
            sha256: ramdisk
                .map(|d| d.sha256.to_lowercase())
                .or_else(|| meta.get(metadata::INITRAMFS_SHA256).cloned())
                .unwrap_or_default(),
            bytes: ramdisk.and_then(|d| d.bytes).unwrap_or(0),
        },
        qemu: Default::default(),
        machine: MachineShape {
            arch: meta
                .get(metadata::ARCH)
                .cloned()
                .or_else(|| guest_machine.map(|m| m.arch.clone()))
                .unwrap_or_default(),
            smp: guest_machine.map_or(0, |m| m.cpus),
            mem_mib: guest_machine.map_or(0, |m| m.mem_bytes >> 20),
            cpu: None,
            accel,
            accel_reason: "as the LAVA job's cmdline said".into(),
            machine_type: None,
            cpu_model: guest_machine.map(|m| m.cpu_model.clone()),
        },
        host: None,
        boot: BootInfo {
            index: 0,
            classification: judgement.classification.name().to_string(),
            detail: match &judgement.classification {
                qemu::Classification::Ok => None,
                other => Some(other.to_string()),
            },
            late_failure: judgement.late_failure,
            wall_s: log.span_s().unwrap_or(0.0),
            to_hello_s: first_dt.zip(hello_dt).and_then(|(a, b)| super::log::seconds_between(a, b)),
            qemu_status: None,
            // The same job imported twice is one run, so its id comes
            // from the log, not from chance.
            envelope_id: result.is_none().then(|| log_run_id(&source.log)),
        },
        channels: vec![ChannelReport {
            name: "console".into(),
            intact: document.is_ok(),
            detail: document.as_ref().err().map(|e| e.to_string()),
        }],
        result,
        result_error,
        workloads_kept,
        upload: None,
        storage: None,
        pack: None,
        lab: Some(LabJob {
            system: "lava".into(),
            job_id: args.job_id.clone().or_else(|| source.job_id.clone()),
            url: source.url.clone(),
            device: args.device.clone().or_else(|| source.device.clone()),
            device_type,
            boot_method: meta.get(metadata::BOOT_METHOD).cloned(),
            result: Some(job_result.result.clone()),
            error: job_result.error_msg.clone(),
            error_type: job_result.error_type.clone(),
            agent_kernel: None,
        }),
        console_log: console,
    };
    Ok(ResultsFile { boots: vec![record], ..Default::default() })
}

/// A run id for a boot without a guest document, made from the log: the
/// host-made form (`host-` and 32 hex digits), the same for the same log.
fn log_run_id(log: &str) -> String {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(log.as_bytes()));
    format!("{}{}", crate::results::HOST_ID_PREFIX, &digest[..32])
}

/// How the device's run ended, as LAVA's log says, in the terms QEMU's
/// runner uses (`RunEnd`, the timeout's words, a harness failure's text):
/// - LAVA's monitor waited in vain (its warning `lava test monitoring has
///   timed out`, or a job failed with `... timed out ...`): the device went
///   silent, a hang;
/// - a job that failed for LAVA's own reasons (`error_type`
///   `Infrastructure`, `Canceled`, `Configuration`, `Bug`): the harness
///   failed, as when QEMU itself fails;
/// - otherwise the device stopped printing and the job ended.
fn lava_end(log: &JobLog, job: &super::log::CaseResult) -> (RunEnd, String, String) {
    let monitor_timed_out = log
        .entries
        .iter()
        .any(|e| e.lvl == "warning" && e.msg.as_str().is_some_and(|m| m.contains("monitoring has timed out")));
    let message = job.error_msg.clone().unwrap_or_default();
    let failed = job.result != "pass";
    if monitor_timed_out || (failed && message.to_lowercase().contains("timed out")) {
        let detail = if message.is_empty() { "LAVA's test monitor timed out".to_string() } else { message };
        return (RunEnd::TimedOut(HangKind::Silence), format!("{detail} (LAVA)"), String::new());
    }
    let harness = matches!(job.error_type.as_deref(), Some("Infrastructure" | "Canceled" | "Configuration" | "Bug"));
    if failed && harness {
        let what = format!("LAVA: {} error: {message}", job.error_type.as_deref().unwrap_or_default());
        return (RunEnd::Exited { code: Some(1), signal: None }, String::new(), what);
    }
    (RunEnd::Exited { code: Some(0), signal: None }, String::new(), String::new())
}
