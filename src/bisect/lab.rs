//! Where commits become measurements: check a commit out, build it with the
//! user's command, check that the kernel can run the appliance, copy it out
//! of the tree, and boot it in QEMU with the appliance. [`Lab`] is what the
//! driver needs; [`QemuLab`] is the real one (the simulation has its own).
//! This module owns the tree's checkout during a bisection and the
//! artifacts directory (kernels, build logs, results files); it decides no
//! verdicts.

use super::kernel_config::{missing_for_appliance, KernelConfig};
use super::lab_settings::{BootOptions, LabSettings};
use super::state::{short, BuildRecord, BuildStatus, Mode};
use super::tree_lease::{Running, TreeLease, TreeLeaseError};
use crate::boot::image::{self as boot_image, ImageSpec};
use crate::boot::options::RunOptions;
use crate::boot::session::run_boots;
use crate::results::{BootRecord, ResultsFile};
use crate::suite_choice::{apply_overrides, load_suite};
use clap::Parser;
use image::Compression;
use loads::schema::{RunDocument, Status};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Errors that stop a bisection (a failing build or boot is not one: it is
/// a skipped commit).
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// `git checkout` refused.
    #[error("cannot check out {commit} in {tree}: {stderr}")]
    Checkout {
        /// The tree.
        tree: PathBuf,
        /// The commit.
        commit: String,
        /// What git said.
        stderr: String,
    },
    /// A file or directory of the lab could not be read or written.
    #[error("cannot {what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The build command could not be started at all.
    #[error("cannot start the build command `{command}` in {tree}")]
    BuildSpawn {
        /// The command.
        command: String,
        /// The tree.
        tree: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// `--metric` is not `WORKLOAD.METRIC` or names a workload the suite
    /// does not run.
    #[error("bad --metric '{metric}': {why}")]
    BadMetric {
        /// The metric as given.
        metric: String,
        /// What is wrong.
        why: String,
    },
    /// The boot options do not parse (they are checked like `bootbench run`'s).
    #[error("bad boot options: {0}")]
    BadBootOptions(String),
    /// The appliance image could not be built.
    #[error("cannot build the appliance initramfs {path}")]
    Image {
        /// Where it was to go.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The initramfs changed between runs of one bisection.
    #[error("the bisection's initramfs {path} is missing or changed (sha256 {found}, recorded {recorded}); boots after the change would not be comparable with those before: start a new bisection")]
    ImageChanged {
        /// The image.
        path: PathBuf,
        /// What it hashes to now.
        found: String,
        /// What the state recorded.
        recorded: String,
    },
    /// QEMU could not be run at all (not a kernel failure).
    #[error("cannot boot {commit}")]
    Boot {
        /// The commit.
        commit: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A commit without a built kernel was asked to boot.
    #[error("commit {0} has no built kernel to boot")]
    NotBuilt(String),
    /// What runs in the tree could not be recorded.
    #[error(transparent)]
    Lease(#[from] TreeLeaseError),
}

/// What one boot gave.
#[derive(Debug, Clone, PartialEq)]
pub struct BootObservation {
    /// `ok`, or `init_panic` (the appliance's own init panicked: the
    /// driver boots again and never blames the commit), `panic`, `oops`,
    /// `hang`, `qemu_failure`, `incomplete`, `partial` (a workload failed),
    /// `no_metric`.
    pub classification: String,
    /// What failed.
    pub detail: Option<String>,
    /// The metric's iterations (perf mode, ok boots).
    pub iterations: Vec<f64>,
    /// Host wall time of the boot.
    pub wall_s: f64,
    /// The version of the metric's workload that ran (perf mode, ok
    /// boots; see `loads::workloads::VERSIONS`).
    pub workload_version: Option<u32>,
    /// The userland pack the metric's workload built in (its `pack_id`
    /// parameter; perf mode, ok boots of a build in the pack).
    pub pack_id: Option<String>,
    /// The machine the boot measured on ([`machine_identity`]), when its
    /// envelope recorded one.
    pub machine: Option<String>,
}

/// What decides a boot's figures besides its kernel: QEMU's version, the
/// versioned machine type and the CPU model and, for real-clock boots, the
/// host (its name, CPU and CPU count). `None` when the envelope lacks the
/// machine type (a QEMU that did not answer the query).
pub fn machine_identity(record: &BootRecord) -> Option<String> {
    let m = &record.machine;
    let machine_type = m.machine_type.as_deref()?;
    let mut id = format!(
        "{}; {machine_type}, CPU {}, {} vCPU, {} MiB, {}",
        record.qemu.version,
        m.cpu_model.as_deref().unwrap_or("default"),
        m.smp,
        m.mem_mib,
        m.accel
    );
    // An icount figure counts the guest's instructions: the host does not
    // enter it, so a bisection may move hosts.
    if m.accel != "icount" {
        if let Some(h) = &record.host {
            id.push_str(&format!("; host {}", h.describe()));
        }
    }
    Some(id)
}

/// What the driver needs from a lab.
pub trait Lab {
    /// Checks `commit` out (when the lab owns the checkout) and builds it.
    fn build(&mut self, commit: &str) -> Result<BuildRecord, LabError>;
    /// Boots `commit`'s kernel once; `index` numbers the boot in the
    /// bisection.
    fn boot(&mut self, commit: &str, build: &BuildRecord, index: usize) -> Result<BootObservation, LabError>;
}

/// `WORKLOAD.METRIC`, split.
pub fn split_metric(metric: &str) -> Result<(String, String), LabError> {
    match metric.split_once('.') {
        Some((w, m)) if !w.is_empty() && !m.is_empty() && !m.contains('.') => Ok((w.to_string(), m.to_string())),
        _ => Err(LabError::BadMetric {
            metric: metric.into(),
            why: "expected WORKLOAD.METRIC, e.g. fork.fork_rate".into(),
        }),
    }
}

/// The metric's values in a guest document: `Ok(iterations)`, or the
/// metric names the workload did report.
pub fn metric_values(doc: &RunDocument, workload: &str, metric: &str) -> Result<Vec<f64>, String> {
    let Some(w) = doc.workloads.iter().find(|w| w.name == workload) else {
        let ran: Vec<&str> = doc.workloads.iter().map(|w| w.name.as_str()).collect();
        return Err(format!("workload {workload} did not run (ran: {})", ran.join(", ")));
    };
    let values: Vec<f64> = w.iterations.iter().filter_map(|i| i.metrics.get(metric)).map(|m| m.value).collect();
    if values.is_empty() {
        let mut names: Vec<&str> = w.iterations.iter().flat_map(|i| i.metrics.keys()).map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        return Err(format!("workload {workload} reported no metric {metric} (it has: {})", names.join(", ")));
    }
    Ok(values)
}

/// Classifies a boot record for a bisection.
pub fn observe(record: &BootRecord, mode: Mode, metric: Option<(&str, &str)>) -> BootObservation {
    let mut obs = BootObservation {
        classification: record.boot.classification.clone(),
        detail: record.boot.detail.clone(),
        iterations: Vec::new(),
        wall_s: record.boot.wall_s,
        workload_version: None,
        pack_id: None,
        machine: machine_identity(record),
    };
    if obs.classification != "ok" {
        return obs;
    }
    // What failed after an intact result (it does not make the boot fail).
    obs.detail = record.boot.late_failure.clone();
    let Some(doc) = &record.result else {
        obs.classification = "incomplete".into();
        obs.detail = record.result_error.clone();
        return obs;
    };
    if mode == Mode::Boot {
        return obs;
    }
    if doc.status != Status::Complete {
        obs.classification = "partial".into();
        let errors: Vec<String> = doc.errors.iter().map(|e| format!("{}: {}", e.location, e.message)).collect();
        let failed: Vec<String> =
            doc.workloads.iter().filter_map(|w| w.error.as_ref().map(|e| format!("{}: {e}", w.name))).collect();
        obs.detail = Some([errors, failed].concat().join("; "));
        return obs;
    }
    if let Some((w, m)) = metric {
        let params = doc.workloads.iter().find(|x| x.name == w).map(|x| &x.params);
        obs.workload_version = params.and_then(loads::workload::version_in);
        obs.pack_id =
            params.and_then(|p| p.get(loads::pack_build::PACK_ID_PARAM)).and_then(|v| v.as_str()).map(str::to_string);
        match metric_values(doc, w, m) {
            Ok(v) => obs.iterations = v,
            Err(why) => {
                obs.classification = "no_metric".into();
                obs.detail = Some(why);
            }
        }
    }
    obs
}

fn sha256_file(path: &Path) -> Result<String, LabError> {
    let data = std::fs::read(path).map_err(|source| LabError::Io { what: "read", path: path.into(), source })?;
    Ok(hex::encode(Sha256::digest(&data)))
}

/// Parses `bootbench run`'s own options, so a bisection's boots are
/// configured and validated exactly like `bootbench run`'s.
#[derive(Debug, Parser)]
struct RunArgv {
    #[command(flatten)]
    args: RunOptions,
}

/// The real lab: a git tree, a build command, QEMU.
#[derive(Debug)]
pub struct QemuLab {
    settings: LabSettings,
    mode: Mode,
    metric: Option<(String, String)>,
    arch: qemu::Arch,
    initramfs: PathBuf,
    lease: TreeLease,
}

impl QemuLab {
    /// Opens the lab for `settings`, building the appliance initramfs the
    /// first time (it is kept in the artifacts directory and must not change
    /// for the rest of the bisection). `settings` gets the image's path and
    /// hash.
    pub fn open(settings: &mut LabSettings, mode: Mode, metric: &str) -> Result<QemuLab, LabError> {
        let arch: qemu::Arch =
            settings.boot.arch.parse().map_err(|e: qemu::arch::ArchError| LabError::BadBootOptions(e.to_string()))?;
        let metric = match mode {
            Mode::Perf => Some(split_metric(metric)?),
            Mode::Boot => None,
        };
        for dir in ["kernels", "builds", "results"] {
            let p = settings.artifacts.join(dir);
            std::fs::create_dir_all(&p).map_err(|source| LabError::Io { what: "create directory", path: p, source })?;
        }
        let initramfs = match (&settings.initramfs, &settings.initramfs_sha256) {
            (Some(p), Some(recorded)) => {
                let found = sha256_file(p).unwrap_or_else(|_| "none (file missing)".into());
                if &found != recorded {
                    return Err(LabError::ImageChanged { path: p.clone(), found, recorded: recorded.clone() });
                }
                p.clone()
            }
            _ => {
                let path = settings.artifacts.join("initramfs.cpio");
                let built = build_initramfs(&settings.boot, arch, metric.as_ref().map(|(w, _)| w.as_str()), &path)?;
                settings.initramfs = Some(path.clone());
                settings.initramfs_sha256 = Some(built);
                path
            }
        };
        let lease = TreeLease::new(&settings.artifacts, &settings.tree);
        Ok(QemuLab { settings: settings.clone(), mode, metric, arch, initramfs, lease })
    }

    /// The settings (with the initramfs filled in).
    pub fn settings(&self) -> &LabSettings {
        &self.settings
    }

    /// Adopts a prebuilt kernel (a `git bisect run` reference): checks and
    /// copies it like a build's output, under the name `label`.
    pub fn adopt(&self, label: &str, image: &Path, config: Option<&Path>) -> Result<BuildRecord, LabError> {
        let t0 = Instant::now();
        if !image.is_file() {
            return Err(LabError::Io {
                what: "read kernel image",
                path: image.into(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        self.check_and_copy(label, image, config, None, None, t0)
    }

    /// Checks a built kernel and copies it (and its config) into the
    /// artifacts directory; the record says why a kernel cannot be used.
    fn check_and_copy(
        &self,
        label: &str,
        image: &Path,
        config: Option<&Path>,
        cmdline: Option<String>,
        log: Option<PathBuf>,
        t0: Instant,
    ) -> Result<BuildRecord, LabError> {
        let mut rec = BuildRecord {
            status: BuildStatus::Built,
            reason: None,
            image: None,
            image_sha256: None,
            config: None,
            cmdline,
            results_port: false,
            log,
            seconds: 0.0,
        };
        let unsuitable = |mut rec: BuildRecord, why: String| {
            rec.status = BuildStatus::Unsuitable;
            rec.reason = Some(why);
            rec.seconds = t0.elapsed().as_secs_f64();
            Ok(rec)
        };
        if let Err(e) = qemu::kernel_image::check_kernel(image, self.arch) {
            return unsuitable(rec, e.to_string());
        }
        let dir = self.settings.artifacts.join("kernels").join(label);
        std::fs::create_dir_all(&dir).map_err(|source| LabError::Io {
            what: "create directory",
            path: dir.clone(),
            source,
        })?;
        if let Some(cfg) = config {
            let text = match std::fs::read_to_string(cfg) {
                Ok(t) => t,
                Err(e) => return unsuitable(rec, format!("cannot read the kernel config {}: {e}", cfg.display())),
            };
            let parsed = KernelConfig::parse(&text);
            let missing = missing_for_appliance(&parsed, self.arch);
            if !missing.is_empty() {
                let list: Vec<String> = missing.iter().map(|m| m.to_string()).collect();
                return unsuitable(rec, format!("the kernel cannot run the appliance: {}", list.join("; ")));
            }
            rec.results_port = parsed.has_results_port();
            let dest = dir.join(format!("config-{label}"));
            std::fs::write(&dest, text).map_err(|source| LabError::Io { what: "write", path: dest.clone(), source })?;
            rec.config = Some(dest);
        }
        let prefix = match self.arch {
            qemu::Arch::Ppc64 | qemu::Arch::Ppc64le => "vmlinux",
            _ => "vmlinuz",
        };
        let dest = dir.join(format!("{prefix}-{label}"));
        std::fs::copy(image, &dest).map_err(|source| LabError::Io {
            what: "copy kernel image to",
            path: dest.clone(),
            source,
        })?;
        rec.image_sha256 = Some(sha256_file(&dest)?);
        rec.image = Some(dest);
        rec.seconds = t0.elapsed().as_secs_f64();
        Ok(rec)
    }

    fn checkout(&self, commit: &str) -> Result<(), LabError> {
        // An interrupt waits for the checkout to end, so its hook's own
        // checkout of the original head neither races this one for the
        // index lock nor is undone by it.
        let git = || {
            Command::new("git")
                .arg("-C")
                .arg(&self.settings.tree)
                .args(["checkout", "--quiet", "--detach", commit])
                .output()
        };
        // Written before git starts: a kill at any moment of the checkout
        // leaves the lease, and the resume removes git's stale index lock.
        let held = self.lease.hold(Running::Checkout)?;
        let out = crate::interrupt::critical(git).map_err(|source| LabError::Io {
            what: "run git in",
            path: self.settings.tree.clone(),
            source,
        })?;
        held.end()?;
        if !out.status.success() {
            return Err(LabError::Checkout {
                tree: self.settings.tree.clone(),
                commit: commit.into(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// Runs the build command with its output in `log`; `Err` is a failure
    /// to even start it, `Ok(Some(why))` a failed build.
    fn run_build(&self, command: &str, commit: &str, log: &Path) -> Result<Option<String>, LabError> {
        let tree = &self.settings.tree;
        let out =
            std::fs::File::create(log).map_err(|source| LabError::Io { what: "create", path: log.into(), source })?;
        let err = out.try_clone().map_err(|source| LabError::Io { what: "open", path: log.into(), source })?;
        let mut child = {
            use std::os::unix::process::CommandExt;
            Command::new("sh")
                .arg("-c")
                .arg(command)
                .current_dir(tree)
                .env("BOOTBENCH_BISECT_COMMIT", commit)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                // Its own process group, so a timeout kills make's children too.
                .process_group(0)
                .spawn()
                .map_err(|source| LabError::BuildSpawn { command: command.into(), tree: tree.clone(), source })?
        };
        // Its own process group misses a terminal's Ctrl-C: an interrupt
        // kills it, so no build goes on in the tree after bootbench is gone.
        let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _kill_on_interrupt = crate::interrupt::on_interrupt(move || {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        });
        // Nor does a SIGKILL of bootbench reach it: the lease lets the
        // resume kill a build the stopped run left behind.
        let _lease = match self.lease.hold(Running::Build { pgid: pgid.as_raw() }) {
            Ok(held) => held,
            Err(e) => {
                let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                return Err(e.into());
            }
        };
        let limit = Duration::from_secs(self.settings.build_timeout_s);
        let t0 = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) if t0.elapsed() > limit => {
                    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
                    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
                    let _ = child.wait();
                    return Ok(Some(format!(
                        "the build took longer than {} s and was killed (log: {})",
                        self.settings.build_timeout_s,
                        log.display()
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(250)),
                Err(source) => return Err(LabError::Io { what: "wait for the build of", path: tree.clone(), source }),
            }
        };
        if status.success() {
            return Ok(None);
        }
        let tail: Vec<String> = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .rev()
            .take(5)
            .map(str::to_string)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let how = match status.code() {
            Some(125) => "asked to skip this commit (exit 125)".to_string(),
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_string(),
        };
        Ok(Some(format!("the build command {how} (log: {}); last lines: {}", log.display(), tail.join(" | "))))
    }
}

/// Builds the appliance initramfs once for the whole bisection: the suite
/// with its overrides, no modules (they would belong to one kernel), and no
/// compression (so no candidate needs a decompressor built in). Returns its
/// sha256.
fn build_initramfs(
    boot: &BootOptions,
    arch: qemu::Arch,
    workload: Option<&str>,
    out: &Path,
) -> Result<String, LabError> {
    let image_err = |e: anyhow::Error| LabError::Image { path: out.into(), source: e.into() };
    let workloads = boot.workloads.as_deref().or(workload);
    let suite = load_suite(&boot.suite, arch.name())
        .and_then(|s| apply_overrides(s, boot.iterations, boot.warmup, workloads))
        .map_err(image_err)?;
    if let Some(w) = workload {
        if !suite.workloads.iter().any(|s| s.name == w) {
            let names: Vec<&str> = suite.workloads.iter().map(|s| s.name.as_str()).collect();
            return Err(LabError::BadMetric {
                metric: w.into(),
                why: format!("the suite does not run workload {w} (it runs: {})", names.join(", ")),
            });
        }
    }
    let spec = ImageSpec {
        arch,
        suite,
        modules: Vec::new(),
        early_modules: Vec::new(),
        modules_dir: None,
        init: None,
        compression: Compression::None,
    };
    // What `run` decides from the suite (the pack, the scratch disk, the
    // memory) it decides from the suite the image holds.
    let suite_file = suite_file_of(out);
    std::fs::write(&suite_file, spec.suite.to_json())
        .map_err(|e| LabError::Image { path: suite_file.clone(), source: e.into() })?;
    let built = boot_image::build(&spec, out).map_err(image_err)?;
    Ok(built.sha256)
}

/// The suite file written beside an initramfs the lab built.
fn suite_file_of(initramfs: &Path) -> PathBuf {
    initramfs.with_extension("suite.json")
}

impl Lab for QemuLab {
    fn build(&mut self, commit: &str) -> Result<BuildRecord, LabError> {
        let t0 = Instant::now();
        let label = short(commit).to_string();
        if self.settings.checkout {
            self.checkout(commit)?;
        }
        let tree = self.settings.tree.clone();
        let image = tree.join(&self.settings.kernel_image);
        // A stale image from the previous commit must never pass for this
        // one's: remove it, so only this build can put one there. (Without
        // a build command the image in the tree is the one to use.)
        if self.settings.build.is_some() {
            match std::fs::remove_file(&image) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(LabError::Io { what: "remove the old kernel image", path: image, source }),
            }
        }
        let log = self.settings.artifacts.join("builds").join(format!("{label}.log"));
        let failed = |why: String| BuildRecord {
            status: BuildStatus::Failed,
            reason: Some(why),
            image: None,
            image_sha256: None,
            config: None,
            cmdline: None,
            results_port: false,
            log: Some(log.clone()),
            seconds: t0.elapsed().as_secs_f64(),
        };
        if let Some(cmd) = self.settings.build.clone() {
            if let Some(why) = self.run_build(&cmd, commit, &log)? {
                return Ok(failed(why));
            }
        }
        if !image.is_file() {
            return Ok(failed(format!(
                "the build left no kernel image at {} (see --kernel-image; log: {})",
                image.display(),
                log.display()
            )));
        }
        let cmdline = match &self.settings.append_file {
            None => None,
            Some(rel) => {
                let p = tree.join(rel);
                match std::fs::read_to_string(&p) {
                    Ok(t) => Some(t.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|s| !s.is_empty()),
                    Err(e) => return Ok(failed(format!("the build left no cmdline file {}: {e}", p.display()))),
                }
            }
        };
        let config = tree.join(&self.settings.kernel_config);
        if !config.is_file() {
            let mut rec = failed(format!(
                "the build left no kernel config at {} (see --kernel-config); cannot check the kernel can run the appliance",
                config.display()
            ));
            rec.status = BuildStatus::Unsuitable;
            return Ok(rec);
        }
        self.check_and_copy(&label, &image, Some(&config), cmdline, Some(log.clone()), t0)
    }

    fn boot(&mut self, commit: &str, build: &BuildRecord, index: usize) -> Result<BootObservation, LabError> {
        let image = build.image.as_ref().ok_or_else(|| LabError::NotBuilt(commit.into()))?;
        let b = &self.settings.boot;
        let append = [b.append.clone(), build.cmdline.clone()].into_iter().flatten().collect::<Vec<_>>().join(" ");
        let mut argv: Vec<String> = vec!["run".into(), "--kernel".into(), image.display().to_string()];
        let mut opt = |k: &str, v: String| {
            argv.push(format!("--{k}"));
            argv.push(v);
        };
        opt("arch", b.arch.clone());
        opt("smp", crate::boot::options::smp_for(b.smp, &b.clock, &b.accel).to_string());
        opt("mem", b.mem.clone());
        if let Some(c) = &b.cpu {
            opt("cpu", c.clone());
        }
        if !append.is_empty() {
            opt("append", append);
        }
        opt("label", short(commit).to_string());
        opt("accel", b.accel.clone());
        opt("clock", b.clock.clone());
        opt("timeout-boot", b.timeout_boot.to_string());
        opt("timeout-silence", b.timeout_silence.to_string());
        opt("timeout-total", b.timeout_total.to_string());
        // The suite the image holds (a state from before the file was
        // written: the suite's name).
        let suite_file = suite_file_of(&self.initramfs);
        opt("suite", if suite_file.is_file() { suite_file.display().to_string() } else { b.suite.clone() });
        if let Some(m) = &b.modules_dir {
            // Relative: in the tree, where this commit's build left them.
            opt("modules-dir", self.settings.tree.join(m).display().to_string());
        }
        if b.lab.target == "qemu" {
            opt("initramfs", self.initramfs.display().to_string());
        }
        opt("boots", "1".into());
        opt("retries", "0".into());
        if !build.results_port {
            argv.push("--no-port".into());
        }
        // On a lab machine each candidate gets an image built with the
        // modules its network needs (the one image here has none), and
        // the job's console and power flags.
        argv.extend(b.lab.to_argv());
        let args = RunArgv::try_parse_from(&argv).map_err(|e| LabError::BadBootOptions(e.to_string()))?.args;
        let file = run_boots(&args).map_err(|e| LabError::Boot { commit: commit.into(), source: e.into() })?;
        let Some(mut record) = file.boots.into_iter().next() else {
            return Err(LabError::Boot { commit: commit.into(), source: "bootbench run returned no boot".into() });
        };
        record.boot.index = index as u32;
        let obs = observe(&record, self.mode, self.metric.as_ref().map(|(w, m)| (w.as_str(), m.as_str())));
        // Every boot's full envelope (console log included) is kept, one
        // results file per commit, so `bootbench report`/`compare` read them.
        let path = self.settings.artifacts.join("results").join(format!("{}.json", short(commit)));
        let mut results = if path.is_file() {
            ResultsFile::read(&path).map_err(|e| LabError::Boot { commit: commit.into(), source: e.into() })?
        } else {
            ResultsFile::default()
        };
        results.boots.push(record);
        crate::interrupt::critical(|| results.write(&path))
            .map_err(|e| LabError::Boot { commit: commit.into(), source: e.into() })?;
        Ok(obs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::BootInfo;
    use loads::schema::{Iteration, Metric, Provenance, WorkloadResult, SCHEMA_VERSION};

    fn doc(values: &[f64]) -> RunDocument {
        let mut w = WorkloadResult { name: "fork".into(), ..Default::default() };
        for v in values {
            let mut it = Iteration::default();
            it.metrics.insert("fork_rate".into(), Metric::higher(*v, "forks/s"));
            w.iterations.push(it);
        }
        RunDocument {
            schema_version: SCHEMA_VERSION,
            run_id: "r".into(),
            status: Status::Complete,
            errors: vec![],
            provenance: Provenance::default(),
            timings: Default::default(),
            workloads: vec![w],
        }
    }

    fn record(class: &str, d: Option<RunDocument>) -> BootRecord {
        BootRecord {
            boot: BootInfo { classification: class.into(), wall_s: 3.0, ..Default::default() },
            result: d,
            ..Default::default()
        }
    }

    #[test]
    fn metrics_are_split_and_checked() {
        assert_eq!(split_metric("fork.fork_rate").unwrap(), ("fork".into(), "fork_rate".into()));
        for bad in ["fork", ".x", "x.", "a.b.c", ""] {
            let e = split_metric(bad).unwrap_err().to_string();
            assert!(e.contains("WORKLOAD.METRIC") && e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    #[test]
    fn the_machine_names_qemu_and_the_shape_and_the_host_only_for_real_clock_boots() {
        let mut r = record("ok", Some(doc(&[10.0])));
        assert_eq!(machine_identity(&r), None, "no machine type recorded: nothing to compare");
        r.qemu.version = "QEMU emulator version 10.0.2".into();
        r.machine = crate::results::MachineShape {
            arch: "x86_64".into(),
            smp: 1,
            mem_mib: 1024,
            accel: "icount".into(),
            machine_type: Some("pc-q35-10.0".into()),
            cpu_model: Some("max".into()),
            ..Default::default()
        };
        r.host = Some(crate::results::HostRef { name: "vm".into(), cpu: "Xeon".into(), cpus: 2, ..Default::default() });
        let icount = "QEMU emulator version 10.0.2; pc-q35-10.0, CPU max, 1 vCPU, 1024 MiB, icount";
        assert_eq!(machine_identity(&r).as_deref(), Some(icount));
        assert_eq!(observe(&r, Mode::Perf, Some(("fork", "fork_rate"))).machine.as_deref(), Some(icount));
        r.machine.accel = "tcg".into();
        assert_eq!(
            machine_identity(&r).as_deref(),
            Some("QEMU emulator version 10.0.2; pc-q35-10.0, CPU max, 1 vCPU, 1024 MiB, tcg; host vm [Xeon, 2 CPUs]")
        );
    }

    #[test]
    fn observations_classify_boots() {
        let m = Some(("fork", "fork_rate"));
        let ok = observe(&record("ok", Some(doc(&[10.0, 12.0]))), Mode::Perf, m);
        assert_eq!((ok.classification.as_str(), ok.iterations.clone()), ("ok", vec![10.0, 12.0]));
        assert_eq!(ok.pack_id, None, "fork builds in no pack");
        let mut in_pack = doc(&[10.0]);
        in_pack.workloads[0].params.insert(loads::pack_build::PACK_ID_PARAM.into(), "ab".repeat(32).into());
        let built = observe(&record("ok", Some(in_pack)), Mode::Perf, m);
        assert_eq!(built.pack_id, Some("ab".repeat(32)), "the pack the metric's workload built in");
        let hang = observe(&record("hang", None), Mode::Perf, m);
        assert_eq!(hang.classification, "hang");
        let lost = observe(&record("ok", None), Mode::Perf, m);
        assert_eq!(lost.classification, "incomplete");
        let none = observe(&record("ok", Some(doc(&[10.0]))), Mode::Perf, Some(("fork", "nope")));
        assert_eq!(none.classification, "no_metric");
        assert!(none.detail.unwrap().contains("it has: fork_rate"));
        let other = observe(&record("ok", Some(doc(&[10.0]))), Mode::Perf, Some(("dbench", "x")));
        assert!(other.detail.unwrap().contains("did not run (ran: fork)"));
        let mut partial = doc(&[1.0]);
        partial.status = Status::Partial;
        partial.workloads[0].error = Some("fork failed".into());
        let p = observe(&record("ok", Some(partial)), Mode::Perf, m);
        assert_eq!(p.classification, "partial");
        assert!(p.detail.unwrap().contains("fork failed"));
        // Boot mode only asks whether it booted.
        assert_eq!(observe(&record("ok", Some(doc(&[]))), Mode::Boot, None).classification, "ok");
    }

    #[test]
    fn build_options_parse_like_bootbench_run() {
        let args = RunArgv::try_parse_from(["run", "--kernel", "/k", "--boots", "1", "--no-port"]).unwrap().args;
        assert_eq!(args.boots, 1);
        assert!(args.no_port);
        assert!(RunArgv::try_parse_from(["run", "--smp", "lots"]).is_err());
    }
}
