//! Boots on a lab machine instead of QEMU (`--target lab:NAME`): each boot
//! is a job queued in the receiver's store for the machine's agent
//! ([`loads::lab_protocol`]), which kexecs the candidate; the candidate
//! uploads its document to the job and reboots into the agent. This module
//! queues the jobs, waits for each with bounds (the lab's power command
//! when the machine stops answering), reads its serial console when the
//! lab has a command for it, and judges the job with the same console
//! scan and verdict as a QEMU boot; the record is the same envelope, with
//! the lab job in place of QEMU's argv.

use crate::boot::kernels::{resolve_kernels, run_arch, KernelUnderTest};
use crate::boot::options::{group_label, parse_variants, RunOptions};
use crate::boot::prepared_image::{prepare_image, PreparedImage};
use crate::boot::secrets_segment::{self, GuestSecrets};
#[cfg(test)]
use crate::boot::target::{LabTargetArgs, Target};
use crate::pack::choice::PackChoice;
use crate::results::pack::PackRecord;
use crate::results::{BootInfo, BootRecord, ChannelReport, KeptWorkloads, LabJob, MachineShape, ResultsFile};
use crate::service::lab_queue::{Job, Machine, NewJob, RESULT_UPLOADED_LINE};
use crate::service::store::{RunKind, Store};
use anyhow::{bail, Context};
use loads::lab_protocol::{self, JobFile, JobPack};
use loads::schema::RunDocument;
use qemu::console_scan::ConsoleScan;
use qemu::outcome::{judge, Classification, HangKind, RunEnd, RunFacts};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How often the job's state is read.
const POLL: Duration = Duration::from_millis(500);
/// The time a job's pack may take to reach the machine's store (its size
/// at `lab_protocol::PACK_MIN_RATE`, the rate the agent's download is
/// given too), added to the boot bound while the agent has the job and
/// has not yet booted it.
fn pack_allowance(job: &Job) -> Duration {
    Duration::from_secs(job.pack.as_ref().map_or(0, |p| p.file.bytes / lab_protocol::PACK_MIN_RATE))
}

/// How long a power command may run.
const POWER_CYCLE_LIMIT: Duration = Duration::from_secs(60);
/// The system a lab record names.
pub const LAB_SYSTEM: &str = "bootbench-lab";

/// What a run on a lab machine boots, checked and ready to queue: the
/// machine, the kernels and their images, the job units.
struct LabPlan {
    store: Store,
    machine: Machine,
    base_url: String,
    arch: qemu::Arch,
    netconsole: Option<String>,
    /// The machine's scratch partition, by its label.
    scratch_label: Option<String>,
    /// The userland pack its jobs carry, in the store's job files, with
    /// the machine's pack store and what the records say of the pack.
    pack: Option<(JobPack, PackRecord)>,
    kernels: Vec<KernelUnderTest>,
    images: Vec<PreparedImage>,
    variants: Vec<crate::boot::options::Variant>,
    /// Where the images and each job's initramfs are built.
    work: tempfile::TempDir,
}

/// Checks `args` against lab machine `machine_name` and its store, and
/// builds each kernel's image.
fn plan(args: &RunOptions, machine_name: &str) -> anyhow::Result<LabPlan> {
    let db = args
        .lab
        .lab_db
        .as_deref()
        .with_context(|| format!("--target lab:{machine_name} needs --lab-db, the receiver's store"))?;
    if !db.exists() {
        bail!("--lab-db {}: no such store (the file `bootbench serve --db` was given)", db.display());
    }
    if args.boots == 0 {
        bail!("--boots must be at least 1");
    }
    if args.serve || args.upload_url.is_some() {
        bail!("--serve and --upload-url are for QEMU boots: a lab job's candidate uploads to the lab's receiver");
    }
    let store = Store::open(db)?;
    let machine = store.machine(machine_name)?;
    if machine.revoked {
        bail!("lab machine '{machine_name}' has a revoked token: it takes no jobs");
    }
    let arch = run_arch(args)?;
    if arch.to_string() != machine.spec.arch {
        bail!(
            "lab machine '{machine_name}' is {}, but this run boots {arch} (--arch or the kernels' configs)",
            machine.spec.arch
        );
    }
    let Some(base_url) = machine.base_url.clone() else {
        bail!(
            "lab machine '{machine_name}' has never said hello to the receiver of {}: is its agent up (bootbench bundle)?",
            db.display()
        );
    };
    let suite = crate::suite_choice::apply_overrides(
        crate::suite_choice::load_suite_for(&args.suite, arch.name(), false)?,
        args.iterations,
        args.warmup,
        args.workloads.as_deref(),
    )?;
    let choice: PackChoice = args.pack.parse()?;
    let chosen = match &machine.spec.pack_label {
        Some(_) => crate::pack::choice::resolve(&choice, &suite, arch.name())?,
        None => {
            if let Some(w) = suite.workloads.iter().find(|w| loads::workloads::needs_pack(w)) {
                bail!(
                    "workload {} runs the userland pack's programs, and lab machine '{machine_name}' has no pack store: give it a partition with an ext4 filesystem labelled for bootbench (mke2fs -t ext4 -L LABEL, a few GiB) and add the machine with --pack-label LABEL",
                    w.name
                );
            }
            if let PackChoice::Image(path) = &choice {
                bail!(
                    "--pack {}: lab machine '{machine_name}' has no pack store to put it in (lab machine add --pack-label)",
                    path.display()
                );
            }
            None
        }
    };
    // A machine with a scratch partition mounts it in every job, so every
    // job of the machine boots with the same storage.
    let scratch_label = machine.spec.scratch_label.clone();
    // QEMU's disks do not exist on a lab machine: its storage is its
    // scratch partition.
    use crate::boot::scratch_disk::SizeChoice;
    let sized = |flag, value: &str| SizeChoice::parse(flag, value).map(|c| matches!(c, SizeChoice::Bytes(_)));
    let qemu_disks = [
        ("--scratch-disk", sized("--scratch-disk", &args.scratch_disk)?, args.scratch_disk.as_str()),
        ("--swap", sized("--swap", &args.swap)?, args.swap.as_str()),
        ("--zram", SizeChoice::parse("--zram", &args.zram)? != SizeChoice::None, args.zram.as_str()),
        ("--disk-throttle", args.disk_throttle.is_some(), args.disk_throttle.as_deref().unwrap_or_default()),
    ];
    if let Some((flag, _, value)) = qemu_disks.iter().find(|(_, given, _)| *given) {
        bail!(
            "{flag} {value}: QEMU's disks do not exist on lab machine '{machine_name}'; its storage is the scratch partition its --scratch-label names"
        );
    }
    if args.iosched.is_some() && scratch_label.is_none() {
        bail!("--iosched: lab machine '{machine_name}' has no scratch partition (lab machine add --scratch-label) to schedule");
    }
    if let (Some(bytes), None) = (crate::suite_choice::scratch_room(&suite, args.smp())?, &scratch_label) {
        bail!(
            "suite {} needs a scratch disk ({} MiB), and lab machine '{machine_name}' has none: give it a partition with an ext4 filesystem labelled for bootbench (mke2fs -t ext4 -L LABEL) and add the machine with --scratch-label LABEL",
            args.suite,
            bytes >> 20
        );
    }
    let pack = match (chosen, &machine.spec.pack_label) {
        (Some(chosen), Some(label)) => {
            // bootbench's cache entries never change: linked. A user's
            // image may be edited in place: copied.
            let link = matches!(choice, PackChoice::Auto);
            let file = stash_pack(&store, &chosen.image, &chosen.record, link)?;
            Some((JobPack { file, label: label.clone() }, chosen.record))
        }
        _ => None,
    };
    let variants = parse_variants(&args.variants)?;
    let kernels = resolve_kernels(args, arch)?;
    let work = tempfile::Builder::new().prefix("bootbench-lab-").tempdir().context("cannot create a temp dir")?;
    let mut images = Vec::new();
    for k in &kernels {
        let disks: Vec<&str> =
            [scratch_label.as_deref(), pack.as_ref().map(|(p, _)| p.label.as_str())].into_iter().flatten().collect();
        let early = match (disks.is_empty(), &k.config) {
            (false, Some(config)) => {
                use crate::boot::scratch_disk::{lab_pack_modules, lab_scratch_modules, KernelConfig};
                let config = KernelConfig::read(config)?;
                let mut early = match &scratch_label {
                    Some(_) => lab_scratch_modules(&config, k.modules_known(), args.iosched.as_deref())?,
                    None => Vec::new(),
                };
                if pack.is_some() {
                    for m in lab_pack_modules(&config, k.modules_known())? {
                        if !early.contains(&m) {
                            early.push(m);
                        }
                    }
                }
                early
            }
            (false, None) => {
                log::warn!(
                    "{}: no kernel config found, so no disk, ext4 or loop module is packed for the partitions labelled {}: they must be built in",
                    k.image.display(),
                    disks.join(" and ")
                );
                Vec::new()
            }
            (true, _) => Vec::new(),
        };
        images.push(prepare_image(args, arch, &suite, k, &early, work.path())?);
    }
    let netconsole = netconsole_target(&machine);
    if netconsole.is_none() {
        log::warn!(
            "lab machine '{machine_name}': the receiver has no netconsole sink (serve --netconsole), so a panic is seen only on a serial console (--console-cmd)"
        );
    }
    Ok(LabPlan { store, machine, base_url, arch, netconsole, scratch_label, pack, kernels, images, variants, work })
}

impl LabPlan {
    /// The boots in the order `args` asks for: (round, kernel, variant).
    fn schedule(&self, args: &RunOptions) -> Vec<(u32, usize, usize)> {
        let nv = self.variants.len();
        let units = self.kernels.len() * nv;
        let order_seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        crate::boot::order::schedule(args.order, units, args.boots, order_seed)
            .into_iter()
            .map(|(round, ui)| (round, ui / nv, ui % nv))
            .collect()
    }

    /// Queues one boot of kernel `ki` with variant `vi` (the job's own
    /// upload token in its initramfs' secrets segment): the job's id.
    fn queue(&mut self, args: &RunOptions, ki: usize, vi: usize, index: usize) -> anyhow::Result<u64> {
        let (k, img, variant) = (&self.kernels[ki], &self.images[ki], &self.variants[vi]);
        let job_token = crate::service::tokens::generate();
        let segment = secrets_segment::segment(&GuestSecrets { upload_token: job_token.clone(), upload_ca_pem: None })?;
        let initrd = self.work.path().join(format!("job-{index}.cpio"));
        secrets_segment::write_with_segment(&img.built.path, &segment, &initrd)?;
        let kernel_file = stash(&self.store, &k.image, Some(&k.image_sha256))?;
        let initrd_file = stash(&self.store, &initrd, None)?;
        std::fs::remove_file(&initrd).ok();
        let new = NewJob {
            machine: self.machine.name.clone(),
            kernel: kernel_file,
            initrd: initrd_file,
            pack: self.pack.as_ref().map(|(p, _)| p.clone()),
            token: crate::service::tokens::digest(&job_token),
        };
        let mut scratch =
            self.scratch_label.as_ref().map(|l| format!("bootbench.scratch_label={l}")).unwrap_or_default();
        if let Some(s) = &args.iosched {
            scratch.push_str(&format!(" bootbench.iosched={s}"));
        }
        if let Some((p, _)) = &self.pack {
            scratch.push_str(&format!(" bootbench.pack_label={} bootbench.pack_sha256={}", p.label, p.file.sha256));
        }
        let words = [scratch.as_str(), args.append.as_deref().unwrap_or(""), variant.words.as_str()].join(" ");
        let capacity = self.arch.profile().cmdline_capacity;
        let (machine, base_url, netconsole) = (&self.machine, &self.base_url, self.netconsole.as_deref());
        Ok(self.store.lab_submit(&new, |id| candidate_cmdline(machine, base_url, id, netconsole, &words, capacity))?)
    }
}

/// Runs `args`' boots on lab machine `machine`: the results file, written
/// after every boot as `run` does.
pub fn run_lab_boots(args: &RunOptions, machine_name: &str) -> anyhow::Result<ResultsFile> {
    let mut plan = plan(args, machine_name)?;
    let mut file = ResultsFile::default();
    let schedule = plan.schedule(args);
    let total = schedule.len();
    for (round, ki, vi) in schedule {
        let index = file.boots.len();
        let id = plan.queue(args, ki, vi, index)?;
        log::info!("boot {}/{total}: lab job {id} queued for machine {machine_name}", index + 1);
        let label = group_label(&args.label, &plan.variants[vi]);
        let work = plan.work.path().to_path_buf();
        let waited = wait_for_job(&mut plan.store, id, args, &plan.machine, &work)?;
        let (k, img) = (&plan.kernels[ki], &plan.images[ki]);
        let pack = plan.pack.as_ref().map(|(_, r)| r);
        let record = record_of(&plan.store, &waited, k, img, &label, index, &plan.machine, plan.arch, pack)?;
        log::info!(
            "boot {}/{total} (kernel {}, round {}): lab job {id}: {}{}",
            index + 1,
            ki + 1,
            round + 1,
            record.boot.classification,
            record.boot.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
        );
        file.boots.push(record);
        if let Some(out) = &args.output {
            file.write(out)?;
        }
    }
    Ok(file)
}

/// A job `lab submit` queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The job's id.
    pub id: u64,
    /// The kernel it boots.
    pub kernel: PathBuf,
    /// Its group label.
    pub label: String,
}

/// Queues `args`' boots on lab machine `machine` without waiting for them
/// (`bootbench lab submit`): the jobs, in the order the agent takes them.
/// Their candidates upload to the receiver as a waiting run's do; nobody
/// resets the machine if one hangs.
pub fn submit_lab_boots(
    args: &RunOptions,
    machine_name: &str,
    mut queued: impl FnMut(&Submitted),
) -> anyhow::Result<Vec<Submitted>> {
    if args.lab.power_cycle.is_some() || args.lab.console_cmd.is_some() || args.output.is_some() {
        bail!("--power-cycle, --console-cmd and -o are for a run that waits (run --target lab:{machine_name}); lab submit only queues");
    }
    let mut plan = plan(args, machine_name)?;
    let mut jobs = Vec::new();
    for (index, (_, ki, vi)) in plan.schedule(args).into_iter().enumerate() {
        let id = plan.queue(args, ki, vi, index)?;
        let job = Submitted {
            id,
            kernel: plan.kernels[ki].image.clone(),
            label: group_label(&args.label, &plan.variants[vi]),
        };
        // Said as soon as it is queued: a later job that cannot be queued
        // leaves the earlier ones known.
        queued(&job);
        jobs.push(job);
    }
    Ok(jobs)
}

/// A job's candidate cmdline: the machine's console, a reboot at once on
/// a panic (`panic=-1`, so the machine comes back to its agent; the user's
/// own `panic=` in `words` replaces it, e.g. `panic=0` to see a hang),
/// `quiet`, the machine's accel, the job, its upload base, a reboot after
/// the result, netconsole when the receiver has a sink; then `words`.
pub fn candidate_cmdline(
    machine: &Machine,
    base_url: &str,
    id: u64,
    netconsole: Option<&str>,
    words: &str,
    capacity: usize,
) -> Result<String, String> {
    let user_panic = words.split_whitespace().any(|w| w.starts_with("panic="));
    let mut all = vec![format!("console={}", machine.spec.console)];
    if !user_panic {
        all.push("panic=-1".into());
    }
    all.extend([
        "quiet".to_string(),
        format!("bootbench.accel={}", machine.spec.accel),
        format!("{}={id}", lab_protocol::JOB_KEY),
        format!("bootbench.upload={}", lab_protocol::job_upload_base(base_url, id)),
        format!("{}=reboot", lab_protocol::AFTER_KEY),
    ]);
    if let Some(n) = netconsole {
        all.push(format!("{}={n}", lab_protocol::NETCONSOLE_KEY));
    }
    all.push(words.trim().to_string());
    let mut checked = qemu::KernelCmdline::new(capacity).map_err(|e| e.to_string())?;
    checked.extend_raw(all.join(" ").trim()).map_err(|e| e.to_string())?;
    Ok(checked.as_str().to_string())
}

/// `IP:PORT` of the receiver's netconsole sink as the machine reaches it:
/// the host of the base URL its agent used (resolved here when it is a
/// name) and the sink's port.
fn netconsole_target(machine: &Machine) -> Option<String> {
    let port = machine.netconsole_port?;
    let url = reqwest::Url::parse(machine.base_url.as_deref()?).ok()?;
    let host = url.host_str()?;
    let ip = match host.parse::<std::net::Ipv4Addr>() {
        Ok(ip) => ip,
        Err(_) => {
            use std::net::ToSocketAddrs;
            (host, port).to_socket_addrs().ok()?.find_map(|a| match a.ip() {
                std::net::IpAddr::V4(v4) => Some(v4),
                std::net::IpAddr::V6(_) => None,
            })?
        }
    };
    Some(format!("{ip}:{port}"))
}

/// Copies `path` into the store's job files under its sha256 (once);
/// with `known` (its sha256, checked when the kernel was resolved) a file
/// already stashed is not read again.
fn stash(store: &Store, path: &Path, known: Option<&str>) -> anyhow::Result<JobFile> {
    if let Some(sha256) = known {
        if let Ok(meta) = std::fs::metadata(store.lab_file(sha256)) {
            return Ok(JobFile { sha256: sha256.to_string(), bytes: meta.len() });
        }
    }
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let sha256 = hex::encode(Sha256::digest(&data));
    if !store.lab_file(&sha256).exists() {
        place(store, &sha256, |tmp| {
            std::fs::write(tmp, &data).with_context(|| format!("cannot write {}", tmp.display()))
        })?;
    }
    Ok(JobFile { sha256, bytes: data.len() as u64 })
}

/// Writes the job file `sha256` into the store's job files: `write` makes
/// it under a temporary name, which is renamed into place only when
/// `write` succeeded (a failure leaves no temporary file).
fn place(store: &Store, sha256: &str, write: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let dir = store.lab_files_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(".{sha256}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    if let Err(e) = write(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let dest = store.lab_file(sha256);
    std::fs::rename(&tmp, &dest).with_context(|| format!("cannot write {}", dest.display()))
}

/// Puts the pack image into the store's job files under its sha256 (from
/// `record`, which the pack's cache or `--pack PATH` computed): with
/// `link`, a hard link when the store is on the same filesystem, else a
/// copy; nothing when it is there already.
fn stash_pack(store: &Store, image: &Path, record: &PackRecord, link: bool) -> anyhow::Result<JobFile> {
    let file = JobFile { sha256: record.image_sha256.clone(), bytes: record.image_bytes };
    if !lab_protocol::valid_sha256(&file.sha256) {
        bail!("the pack {}: '{}' is not a sha256", image.display(), file.sha256);
    }
    let dest = store.lab_file(&file.sha256);
    if std::fs::metadata(&dest).is_ok_and(|m| m.len() == file.bytes) {
        return Ok(file);
    }
    place(store, &file.sha256, |tmp| {
        if !link || std::fs::hard_link(image, tmp).is_err() {
            log::info!("copying the userland pack {} into the lab's job files", image.display());
            std::fs::copy(image, tmp)
                .with_context(|| format!("cannot copy the pack {} to {}", image.display(), tmp.display()))?;
        }
        let len = std::fs::metadata(tmp).with_context(|| format!("cannot read {}", tmp.display()))?.len();
        if len != file.bytes {
            bail!("the pack {} has {len} bytes, its record says {}", image.display(), file.bytes);
        }
        Ok(())
    })?;
    Ok(file)
}

/// A job as it ended, with what the host saw of it.
#[derive(Debug)]
struct Waited {
    job: Job,
    /// The serial console (--console-cmd), when there is one.
    serial: Option<String>,
    /// The bound that fired, and what the host did then.
    timed_out: Option<(HangKind, String)>,
    /// The machine did not come back to its agent after a good job.
    not_back: Option<String>,
    /// Wall time from the agent's kexec report to the end.
    wall: Duration,
    /// Everything the power command did.
    notes: Vec<String>,
}

/// Runs the lab's power command, bounded; what happened, for the record.
fn power_cycle(cmd: Option<&str>, why: &str) -> String {
    let Some(cmd) = cmd else {
        return format!("{why}; no --power-cycle command to reset the machine");
    };
    log::warn!("{why}: running the power command");
    let child = Command::new("sh").arg("-c").arg(cmd).stdin(Stdio::null()).stdout(Stdio::null()).spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return format!("{why}; the power command could not start: {e}"),
    };
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return format!("{why}; power-cycled"),
            Ok(Some(s)) => return format!("{why}; the power command failed ({s})"),
            Ok(None) if t0.elapsed() > POWER_CYCLE_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return format!("{why}; the power command did not end within {} s", POWER_CYCLE_LIMIT.as_secs());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return format!("{why}; the power command: {e}"),
        }
    }
}

/// The serial console reader: `--console-cmd` with its stdout in a file.
struct SerialConsole {
    child: Child,
    file: PathBuf,
}

impl SerialConsole {
    fn start(cmd: &str, file: PathBuf) -> anyhow::Result<SerialConsole> {
        let out = std::fs::File::create(&file).with_context(|| format!("cannot create {}", file.display()))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("--console-cmd '{cmd}' could not start"))?;
        Ok(SerialConsole { child, file })
    }

    /// Stops the command; its output.
    fn finish(mut self) -> String {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
        let mut text = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&self.file) {
            let _ = f.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}

use std::os::unix::process::CommandExt as _;

/// Waits for job `id` to end, within the run's bounds: the agent must take
/// it and report its kexec within `--timeout-boot` (each), the candidate
/// end within `--timeout-total`, and the machine come back to its agent
/// within `--timeout-boot` after that.
fn wait_for_job(
    store: &mut Store,
    id: u64,
    args: &RunOptions,
    machine: &Machine,
    work: &Path,
) -> anyhow::Result<Waited> {
    let boot_limit = Duration::from_secs(args.timeout_boot);
    let total_limit = Duration::from_secs(args.timeout_total);
    let power = args.lab.power_cycle.as_deref();
    let serial = match &args.lab.console_cmd {
        Some(cmd) => Some(SerialConsole::start(cmd, work.join(format!("serial-{id}.log")))?),
        None => None,
    };
    let mut notes = Vec::new();
    let end = |serial: Option<SerialConsole>| serial.map(SerialConsole::finish);
    let mut phase_start = Instant::now();
    let mut kexec_at: Option<Instant> = None;
    let mut last_state = String::new();
    loop {
        crate::interrupt::hold_if_interrupted();
        let job = store.lab_job(id)?;
        if job.state != last_state {
            log::info!("lab job {id}: {}", job.state);
            last_state = job.state.clone();
            phase_start = Instant::now();
            if job.state == "kexec" {
                kexec_at = Some(Instant::now());
            }
        }
        let (limit, what) = match job.state.as_str() {
            "queued" => (total_limit, "take the job (is its agent up, or is it busy with another job?)"),
            "sent" => (boot_limit + pack_allowance(&job), "fetch the job's files and kexec"),
            "kexec" => (total_limit, "finish the job"),
            "done" if job.returned_at.is_some() => break,
            "done" => (boot_limit, "come back to its agent after the job"),
            _ => break,
        };
        if phase_start.elapsed() > limit {
            let why = format!(
                "machine {} did not {what} within {} s (last hello {})",
                machine.name,
                limit.as_secs(),
                store.machine(&machine.name)?.last_hello_at.as_deref().unwrap_or("never")
            );
            if job.state == "done" {
                let note = power_cycle(power, &why);
                notes.push(note.clone());
                let job = store.lab_job(id)?;
                let wall = kexec_at.map(|t| t.elapsed()).unwrap_or_default();
                return Ok(Waited { job, serial: end(serial), timed_out: None, not_back: Some(note), wall, notes });
            }
            let which = if job.state == "kexec" { HangKind::Total } else { HangKind::Boot };
            // Only a booted candidate's machine needs resetting; before the
            // kexec the agent is alive and will simply not get the job.
            let note = if job.state == "kexec" { power_cycle(power, &why) } else { why };
            notes.push(note.clone());
            let job = store.lab_time_out(id, &note)?;
            let wall = kexec_at.map(|t| t.elapsed()).unwrap_or_default();
            let timed_out = (!job.ended() || job.state == "timed_out").then_some((which, note));
            return Ok(Waited { job, serial: end(serial), timed_out, not_back: None, wall, notes });
        }
        std::thread::sleep(POLL);
    }
    let job = store.lab_job(id)?;
    let wall = kexec_at.map(|t| t.elapsed()).unwrap_or_default();
    Ok(Waited { job, serial: end(serial), timed_out: None, not_back: None, wall, notes })
}

/// Where a lab job's document came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DocumentSource {
    /// The candidate's upload to the job.
    Upload,
    /// The serial console, when nothing was uploaded.
    Console,
}

/// The verdict and what it rests on.
struct Judged {
    classification: Classification,
    /// Where the document came from.
    source: Option<DocumentSource>,
    late_failure: Option<String>,
    console: String,
    document: Option<RunDocument>,
    result_error: Option<String>,
    workloads_kept: Option<KeptWorkloads>,
}

/// Judges a job like a QEMU boot: the console (the serial console, then
/// what netconsole carried, with the receiver's line where the result
/// arrived) through the same scan and verdict; the document is the one
/// the candidate uploaded. What only a lab has: a job the agent could not
/// boot is the lab's failure (`qemu_failure`, never the kernel's), a
/// machine back without a result is a boot failure, a watchdog reset a
/// hang (watchdog).
fn judge_job(store: &Store, w: &Waited) -> anyhow::Result<Judged> {
    let net = String::from_utf8_lossy(&w.job.console).into_owned();
    let console = match &w.serial {
        Some(s) if !s.is_empty() => format!("{s}\n{net}"),
        _ => net,
    };
    let uploaded = match &w.job.run_id {
        Some(run) => store.body(run, Some(RunKind::Document))?.map(|(_, body)| body),
        None => None,
    };
    let mut scan = ConsoleScan::new();
    scan.feed_bytes(console.as_bytes());
    scan.finish();
    // Without an upload (a candidate whose cmdline was refused never read
    // its upload key), the serial console may still hold the document.
    let this_job = format!("{}={}", lab_protocol::JOB_KEY, w.job.id);
    let from_console = || {
        scan.decoder()
            .last_document()
            .ok()
            .and_then(|j| serde_json::from_str::<RunDocument>(&j).ok())
            .filter(|d| d.provenance.kernel.cmdline.split_whitespace().any(|word| word == this_job))
    };
    let (document, result_error, source) = match &uploaded {
        Some(body) => match serde_json::from_slice::<RunDocument>(body) {
            Ok(d) => (Some(d), None, Some(DocumentSource::Upload)),
            Err(e) => (None, Some(format!("the uploaded result is not a valid result document: {e}")), None),
        },
        None => match from_console() {
            Some(d) => (Some(d), None, Some(DocumentSource::Console)),
            None => (None, Some(w.job.failure.clone().unwrap_or_else(|| "no result was uploaded".into())), None),
        },
    };
    let (end, detail) = match &w.timed_out {
        Some((which, why)) => (RunEnd::TimedOut(*which), why.clone()),
        None => (RunEnd::Exited { code: Some(0), signal: None }, String::new()),
    };
    let mut facts = RunFacts::from_scan(&scan, end, detail, String::new());
    if document.is_some() {
        facts.stream = Ok(());
        if facts.order.result_end.is_none() {
            facts.order.result_end = scan.log_text().lines().position(|l| l.starts_with(RESULT_UPLOADED_LINE));
        }
    }
    let mut judgement = judge(&facts);
    if w.job.state == "failed" && document.is_none() {
        judgement.classification = Classification::QemuFailure {
            status: None,
            detail: format!("lab: {}", w.job.failure.as_deref().unwrap_or("the agent could not boot the job")),
        };
    } else if w.job.state == "timed_out" && w.job.kexec_at.is_none() {
        judgement.classification = Classification::QemuFailure {
            status: None,
            detail: format!("lab: {}", w.job.failure.as_deref().unwrap_or("the job was not booted")),
        };
    } else if w.job.watchdog_reset == Some(true) && document.is_none() && facts.panic_line.is_none() {
        judgement.classification = Classification::Hang {
            which: HangKind::Watchdog,
            detail: w.job.failure.clone().unwrap_or_else(|| "a hardware watchdog reset the machine".into()),
        };
    } else if w.job.state == "returned" && matches!(judgement.classification, Classification::Incomplete { .. }) {
        judgement.classification = Classification::BootFailure {
            line: w.job.failure.clone().unwrap_or_else(|| "the machine came back without a result".into()),
        };
    }
    if let Some(n) = &w.not_back {
        let late = format!("after the result was complete: {n}");
        judgement.late_failure =
            Some(judgement.late_failure.map_or(late.clone(), |l| format!("{l}; then {}", n.trim_start())));
    }
    let workloads_kept = match &document {
        Some(_) => None,
        None => KeptWorkloads::parse(&scan.workload_documents()),
    };
    Ok(Judged {
        classification: judgement.classification,
        source,
        late_failure: judgement.late_failure,
        console,
        document,
        result_error,
        workloads_kept,
    })
}

#[allow(clippy::too_many_arguments)]
fn record_of(
    store: &Store,
    w: &Waited,
    k: &KernelUnderTest,
    img: &PreparedImage,
    label: &str,
    index: usize,
    machine: &Machine,
    arch: qemu::Arch,
    pack: Option<&PackRecord>,
) -> anyhow::Result<BootRecord> {
    let j = judge_job(store, w)?;
    let mut document = j.document;
    if let Some(d) = &mut document {
        k.stamp(d);
    }
    let guest = document.as_ref().map(|d| &d.provenance.machine);
    let hello = store.machine(&machine.name)?.last_hello;
    Ok(BootRecord {
        label: label.to_string(),
        cmdline: w.job.cmdline.clone(),
        kernel: k.kernel_ref(),
        initramfs: img.initramfs_ref(),
        qemu: Default::default(),
        machine: MachineShape {
            machine_type: None,
            cpu_model: guest.map(|m| m.cpu_model.clone()),
            arch: arch.to_string(),
            smp: guest.map_or(0, |m| m.cpus),
            mem_mib: guest.map_or(0, |m| m.mem_bytes >> 20),
            cpu: None,
            accel: machine.spec.accel.clone(),
            accel_reason: format!("lab machine {}", machine.name),
        },
        boot: BootInfo {
            index: index as u32,
            classification: j.classification.name().to_string(),
            detail: match &j.classification {
                Classification::Ok => None,
                other => Some(other.to_string()),
            },
            late_failure: j.late_failure,
            wall_s: w.wall.as_secs_f64(),
            // The agent cannot time the candidate's start from power-on.
            to_hello_s: None,
            qemu_status: None,
            envelope_id: document.is_none().then(crate::results::host_run_id),
        },
        channels: {
            let mut c = vec![ChannelReport {
                name: "upload".into(),
                intact: j.source == Some(DocumentSource::Upload),
                detail: match j.source {
                    Some(DocumentSource::Console) => {
                        Some(w.job.failure.clone().unwrap_or_else(|| "no result was uploaded".into()))
                    }
                    _ => j.result_error.clone(),
                },
            }];
            if j.source == Some(DocumentSource::Console) {
                c.push(ChannelReport { name: "console".into(), intact: true, detail: None });
            }
            c
        },
        result: document,
        result_error: j.result_error,
        workloads_kept: j.workloads_kept,
        upload: None,
        storage: None,
        pack: pack.cloned(),
        host: Some(crate::boot::host_facts::this_host()),
        lab: Some(LabJob {
            system: LAB_SYSTEM.into(),
            job_id: Some(w.job.id.to_string()),
            url: None,
            device: Some(machine.name.clone()),
            device_type: None,
            boot_method: Some("kexec".into()),
            result: Some(w.job.state.clone()),
            error: w.job.failure.clone().or_else(|| (!w.notes.is_empty()).then(|| w.notes.join("; "))),
            error_type: None,
            agent_kernel: w.job.agent_kernel.clone().or_else(|| hello.map(|h| h.agent_kernel)),
        }),
        console_log: j.console,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::lab_queue::MachineSpec;

    fn pack_record(image: &Path, sha256: &str, bytes: u64) -> PackRecord {
        PackRecord {
            image: image.to_path_buf(),
            image_sha256: sha256.into(),
            image_bytes: bytes,
            serial: String::new(),
            key: None,
            lockfile_sha256: None,
            builder_version: None,
            linux_config: None,
            linux_config_sha256: None,
            packages: vec![],
        }
    }

    #[test]
    fn a_pack_goes_into_the_job_files_once_under_its_sha256_and_a_wrong_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        let image = dir.path().join("pack.ext4");
        std::fs::write(&image, b"a pack image").unwrap();
        let sha = hex::encode(Sha256::digest(b"a pack image"));
        let f = stash_pack(&store, &image, &pack_record(&image, &sha, 12), true).unwrap();
        assert_eq!((f.sha256.as_str(), f.bytes), (sha.as_str(), 12));
        assert_eq!(std::fs::read(store.lab_file(&sha)).unwrap(), b"a pack image");
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(ino(&store.lab_file(&sha)), ino(&image), "a cache entry is linked");
        // A user's image is copied: editing it later changes nothing served.
        let user = dir.path().join("user.ext4");
        std::fs::write(&user, b"a user's pack").unwrap();
        let user_sha = hex::encode(Sha256::digest(b"a user's pack"));
        stash_pack(&store, &user, &pack_record(&user, &user_sha, 13), false).unwrap();
        assert_ne!(ino(&store.lab_file(&user_sha)), ino(&user));
        assert_eq!(std::fs::read(store.lab_file(&user_sha)).unwrap(), b"a user's pack");
        // There already: nothing is read (the image may be gone).
        std::fs::remove_file(&image).unwrap();
        stash_pack(&store, &image, &pack_record(&image, &sha, 12), true).unwrap();
        // A record whose size is not the file's: refused, nothing left.
        std::fs::write(&image, b"short").unwrap();
        let other = "c".repeat(64);
        let e = stash_pack(&store, &image, &pack_record(&image, &other, 12), false).unwrap_err().to_string();
        assert!(e.contains("has 5 bytes, its record says 12"), "{e}");
        assert!(!store.lab_file(&other).exists());
        let names: Vec<_> = std::fs::read_dir(store.lab_files_dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
        let e = stash_pack(&store, &image, &pack_record(&image, "../x", 5), true).unwrap_err().to_string();
        assert!(e.contains("not a sha256"), "{e}");
    }

    fn machine() -> Machine {
        Machine {
            name: "box1".into(),
            spec: MachineSpec {
                arch: "x86_64".into(),
                console: "ttyS0,115200n8".into(),
                accel: "tcg".into(),
                poll_s: 5,
                scratch_label: None,
                pack_label: None,
            },
            revoked: false,
            last_hello_at: None,
            last_hello: None,
            agent_addr: None,
            base_url: Some("http://10.0.2.2:8080".into()),
            netconsole_port: Some(6666),
        }
    }

    #[test]
    fn the_candidate_cmdline_names_the_job_its_upload_and_a_reboot_and_the_users_panic_wins() {
        let c = candidate_cmdline(
            &machine(),
            "http://10.0.2.2:8080",
            7,
            Some("10.0.2.2:6666"),
            " bootbench.workloads=fork ",
            2048,
        )
        .unwrap();
        assert_eq!(
            c,
            "console=ttyS0,115200n8 panic=-1 quiet bootbench.accel=tcg bootbench.lab_job=7 \
             bootbench.upload=http://10.0.2.2:8080/lab/jobs/7 bootbench.after=reboot bootbench.netconsole=10.0.2.2:6666 \
             bootbench.workloads=fork"
        );
        let c = candidate_cmdline(&machine(), "http://h:1", 7, None, "rdinit=/nonexistent panic=0", 2048).unwrap();
        assert!(c.contains(" panic=0") && !c.contains("panic=-1") && !c.contains("netconsole"), "{c}");
        // The guest reads it as a candidate's cmdline.
        let parsed = loads::suite::CmdlineConfig::parse(
            &candidate_cmdline(&machine(), "http://h:1", 7, None, "", 2048).unwrap(),
        );
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn a_key_given_twice_or_a_cmdline_too_long_is_refused() {
        let e = candidate_cmdline(&machine(), "http://h:1", 7, None, "bootbench.after=poweroff", 2048).unwrap_err();
        assert!(e.contains("bootbench.after"), "{e}");
        assert!(candidate_cmdline(&machine(), "http://h:1", 7, None, "", 64).is_err());
    }

    #[test]
    fn the_power_command_says_what_it_did_and_each_way_it_can_fail() {
        assert_eq!(power_cycle(None, "stuck"), "stuck; no --power-cycle command to reset the machine");
        assert_eq!(power_cycle(Some("true"), "stuck"), "stuck; power-cycled");
        let failed = power_cycle(Some("exit 3"), "stuck");
        assert!(failed.starts_with("stuck; the power command failed (") && failed.contains('3'), "{failed}");
    }

    fn job(state: &str) -> Job {
        Job {
            id: 3,
            machine: "box1".into(),
            state: state.into(),
            created_at: "t0".into(),
            sent_at: Some("t1".into()),
            kexec_at: Some("t2".into()),
            ended_at: None,
            returned_at: None,
            kernel: JobFile { sha256: "a".repeat(64), bytes: 1 },
            initrd: JobFile { sha256: "b".repeat(64), bytes: 1 },
            pack: None,
            cmdline: "console=ttyS0".into(),
            run_id: None,
            agent_kernel: None,
            failure: None,
            watchdog_reset: None,
            console: Vec::new(),
        }
    }

    fn waited(job: Job) -> Waited {
        Waited { job, serial: None, timed_out: None, not_back: None, wall: Duration::ZERO, notes: vec![] }
    }

    fn verdict(w: &Waited) -> Classification {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        judge_job(&store, w).unwrap().classification
    }

    #[test]
    fn a_machine_back_without_a_result_is_a_boot_failure_and_with_a_watchdog_reset_a_hang() {
        let mut j = job("returned");
        j.failure = Some("the machine came back to its agent without a result".into());
        let c = verdict(&waited(j.clone()));
        assert!(matches!(&c, Classification::BootFailure { line } if line.contains("without a result")), "{c:?}");
        j.watchdog_reset = Some(true);
        let c = verdict(&waited(j.clone()));
        assert!(matches!(c, Classification::Hang { which: HangKind::Watchdog, .. }), "{c:?}");
        // A panic the consoles saw is the panic, whatever reset the machine.
        j.console = b"[ 3.2] Kernel panic - not syncing: Fatal exception in interrupt\n".to_vec();
        let c = verdict(&waited(j));
        assert_eq!(c.name(), "panic", "{c:?}");
    }

    #[test]
    fn a_panic_on_the_serial_console_alone_is_a_panic() {
        let mut w = waited(job("returned"));
        w.serial = Some("Linux version 6.1\nKernel panic - not syncing: Fatal exception\n".into());
        assert_eq!(verdict(&w).name(), "panic");
        // One with no init to run is named apart, as on QEMU.
        w.serial = Some("Linux version 6.1\nKernel panic - not syncing: No working init found.\n".into());
        assert_eq!(verdict(&w).name(), "boot_failure");
    }

    #[test]
    fn a_job_the_agent_could_not_boot_is_the_labs_failure_never_the_kernels() {
        let mut j = job("failed");
        j.kexec_at = None;
        j.failure = Some("the kernel's sha256 is 00…, not aa…".into());
        let c = verdict(&waited(j));
        assert!(
            matches!(&c, Classification::QemuFailure { detail, .. } if detail.starts_with("lab: ") && detail.contains("sha256")),
            "{c:?}"
        );
        // Timed out before the agent booted it: the machine never ran it.
        let mut j = job("timed_out");
        j.kexec_at = None;
        j.failure = Some("machine box1 did not fetch the job's files and kexec within 120 s".into());
        let mut w = waited(j);
        w.timed_out = Some((HangKind::Boot, "x".into()));
        assert_eq!(verdict(&w).name(), "qemu_failure");
    }

    #[test]
    fn without_an_upload_the_document_the_serial_console_carried_is_the_result() {
        let mut doc = loads::runner::begin_document("run-c", None, None);
        doc.provenance.kernel.cmdline = "console=ttyS0 bootbench.lab_job=3 bootbench.hw_watchdog=30".into();
        loads::runner::push_error(
            &mut doc,
            "config",
            "bad value '30' for kernel cmdline key 'bootbench.hw_watchdog'".into(),
        );
        doc.status = doc.derive_status();
        let json = serde_json::to_string(&doc).unwrap();
        let lines = loads::console_protocol::encode(loads::console_protocol::StreamKind::Result, "run-c", &json);
        let mut j = job("returned");
        j.failure = Some("the machine came back to its agent without a result".into());
        let mut w = waited(j);
        w.serial = Some(format!("Linux version 6.1\n{}\n", lines.join("\n")));
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        let judged = judge_job(&store, &w).unwrap();
        assert_eq!(judged.source, Some(DocumentSource::Console));
        assert_eq!(judged.document.as_ref().map(|d| d.run_id.as_str()), Some("run-c"));
        assert_eq!(judged.result_error, None);
        assert_eq!(judged.classification.name(), "ok", "the boot was fine; the document carries the error");
        // Another job's document (a console that kept an earlier one) is not this one's.
        let mut other = doc.clone();
        other.provenance.kernel.cmdline = "console=ttyS0 bootbench.lab_job=31".into();
        let other_lines = loads::console_protocol::encode(
            loads::console_protocol::StreamKind::Result,
            "run-o",
            &serde_json::to_string(&other).unwrap(),
        );
        let mut w2 = waited(w.job.clone());
        w2.serial = Some(format!("{}\n", other_lines.join("\n")));
        assert!(judge_job(&store, &w2).unwrap().document.is_none());
        // A damaged stream is no document.
        w.serial = Some(format!("{}\n", lines[0]));
        let judged = judge_job(&store, &w).unwrap();
        assert!(judged.document.is_none() && judged.source.is_none());
    }

    #[test]
    fn a_candidate_that_outlives_its_job_is_a_hang() {
        let mut w = waited(job("timed_out"));
        w.timed_out = Some((HangKind::Total, "machine box1 did not finish the job within 60 s; power-cycled".into()));
        let c = verdict(&w);
        assert!(matches!(c, Classification::Hang { which: HangKind::Total, .. }), "{c:?}");
    }

    #[test]
    fn targets_are_qemu_or_a_named_lab_machine() {
        let t = |s: &str| LabTargetArgs { target: s.into(), ..Default::default() }.target();
        assert_eq!(t("qemu").unwrap(), Target::Qemu);
        assert_eq!(t("lab:box-1").unwrap(), Target::Lab("box-1".into()));
        assert!(t("lab:a b").unwrap_err().to_string().contains("not a machine name"));
        assert!(t("kvm").unwrap_err().to_string().contains("'qemu' or 'lab:NAME'"));
    }
}
