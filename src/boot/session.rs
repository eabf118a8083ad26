//! A run of boots: for each planned boot, the image, the QEMU run, the
//! envelope around the guest's document, and the results file written after
//! every boot so an interrupted run keeps what it finished: on Ctrl-C the
//! file holds exactly the finished boots, the boot in progress is dropped
//! (said on stderr), the run's scratch files are removed, and the process
//! exits 130 (see [`crate::interrupt`]).

use crate::boot::kernels::{resolve_kernels, run_arch, KernelUnderTest};
use crate::boot::options::{group_label, parse_variants, MemChoice, RunOptions, Variant, BASE_MEM_MIB};
use crate::boot::prepared_image::{prepare_image, PreparedImage};
use crate::boot::run_upload::{RunUpload, TokenSource};
use crate::results::{BootInfo, BootRecord, ChannelReport, KeptWorkloads, MachineShape, QemuRef, ResultsFile};
use crate::suite_choice::apply_overrides;
use crate::terminal::progress::boot_status;
use anyhow::{bail, Context};
use loads::console_protocol::{ALIVE_CMDLINE_KEY, ICOUNT_ALIVE_INTERVAL_S};
use loads::schema::RunDocument;
use loads::suite::PACK_SERIAL;
use qemu::accel::{choose, Accel, AccelRequest};
use qemu::{Arch, BootSpec, Clock, Timeouts};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The cmdline key that names the userland pack's disk serial.
const PACK_CMDLINE_KEY: &str = "bootbench.pack";

/// The `-append` value QEMU was given.
fn appended(argv: &[String]) -> String {
    argv.iter().position(|a| a == "-append").and_then(|i| argv.get(i + 1)).cloned().unwrap_or_default()
}

/// The words of `words` that choose what the guest runs: `bootbench.`
/// keys of the suite (`suite`, `workloads`, `iterations`, `warmup`,
/// `seed`) and of workloads' parameters (`bootbench.W.P`). The others
/// (upload, storage, network) are checked with the keys the host adds.
fn suite_words(words: &str) -> Vec<String> {
    loads::suite::split_cmdline(words)
        .into_iter()
        .filter(|w| {
            let key = w.strip_prefix("bootbench.").map(|r| r.split_once('=').map_or(r, |(k, _)| k));
            key.is_some_and(|k| k.contains('.') || ["suite", "workloads", "iterations", "warmup", "seed"].contains(&k))
        })
        .collect()
}

/// The suite each boot's guest runs, one per variant (one when there are
/// none): `suite` after the `bootbench.` keys of `--append` and the
/// variant's words that choose the suite, its workloads and their
/// parameters ([`suite_words`]), a `bootbench.suite=NAME` among them being
/// the built-in suite as built for the guest's `arch` (`real_builds`:
/// whether it builds in the pack where it can). What the host decides from
/// the suite (the pack, the scratch room, the memory) it decides from these.
/// Words the guest will refuse leave `suite` as it is: the guest reports
/// them, with the whole cmdline in view.
fn guest_suites(
    args: &RunOptions,
    suite: &loads::suite::Suite,
    variants: &[Variant],
    arch: &str,
    real_builds: bool,
) -> anyhow::Result<Vec<loads::suite::Suite>> {
    let base = [Variant { label: String::new(), words: String::new() }];
    let mut suites = Vec::new();
    for v in if variants.is_empty() { &base[..] } else { variants } {
        let words = suite_words(&format!("{} {}", args.append.as_deref().unwrap_or(""), v.words));
        let (named, rest): (Vec<&String>, Vec<&String>) = words.iter().partition(|w| w.starts_with("bootbench.suite="));
        let rest: Vec<&str> = rest.iter().map(|w| w.as_str()).collect();
        let start = match named.last().and_then(|w| w.split_once('=')) {
            Some((_, name)) => crate::suite_choice::builtin_suite(name, arch, real_builds).ok(),
            None => Some(suite.clone()),
        };
        // A bad key or value is the guest's to report (it fails the run
        // with the whole cmdline in view); the host goes on with `suite`.
        let seen =
            start.and_then(|s| loads::suite::CmdlineConfig::parse(&rest.join(" ")).and_then(|c| c.apply(s)).ok());
        suites.push(seen.unwrap_or_else(|| suite.clone()));
    }
    Ok(suites)
}

/// The `--mem` to boot with: `choice`'s size, or for `auto` the base
/// size or, when the guests' builds in the pack need more, the least that
/// holds them (up to this host's available memory). A size they do not
/// fit in is refused with the guest's own check and the size that fits.
fn guest_memory(
    choice: MemChoice,
    guests: &[loads::suite::Suite],
    smp: u32,
    profile: &qemu::ArchProfile,
    host_available_mib: u64,
    storage_at: impl Fn(u64) -> anyhow::Result<crate::boot::scratch_disk::StoragePlan>,
) -> anyhow::Result<u64> {
    use crate::suite_choice::{check_pack_builds, least_mem_that_fits, GuestMemory};
    // Ok(Err(why)) when a guest's build would refuse `mem`; a storage plan
    // that cannot be made at `mem` (zram above 4 × --mem) does not fit.
    let check = |mem: u64| -> anyhow::Result<Result<(), String>> {
        let plan = match storage_at(mem) {
            Ok(p) => p,
            Err(e) => return Ok(Err(format!("{e:#}"))),
        };
        // What the guest's kernel can use of `mem` (all of it, but on i386).
        let guest = GuestMemory {
            mem_mib: mem.min(profile.max_usable_mem_mib.unwrap_or(u64::MAX)),
            swap_mib: (plan.swap_bytes.unwrap_or(0) + plan.zram_bytes.unwrap_or(0)) >> 20,
            smp,
            tree_in_memory: plan.scratch_bytes.is_none(),
        };
        for g in guests {
            if let Err(why) = check_pack_builds(g, guest)? {
                return Ok(Err(format!("{why} (the guest's MemTotal estimated at {} MiB)", guest.mem_total_mib())));
            }
        }
        Ok(Ok(()))
    };
    let available = host_available_mib.min(profile.max_usable_mem_mib.unwrap_or(u64::MAX));
    let step = profile.mem_step_mib.max(1);
    let start = match choice {
        MemChoice::Mib(m) if m % step != 0 => bail!(
            "--mem {m} MiB: {}'s {} machine takes guest memory in multiples of {step} MiB (try --mem {}M)",
            profile.arch,
            profile.machine,
            m.div_ceil(step) * step
        ),
        MemChoice::Mib(m) => {
            if let Some(cap) = profile.max_usable_mem_mib.filter(|cap| m > *cap) {
                log::warn!(
                    "--mem {m} MiB: {}'s default kernel can use only {cap} MiB of it (a 32-bit kernel without PAE); the memory checks count {cap}",
                    profile.arch
                );
            }
            m
        }
        MemChoice::Auto => BASE_MEM_MIB.div_ceil(step) * step,
    };
    // Storage options that are bad at the size asked for (or the base
    // size) are the user's error, never a reason to grow --mem.
    storage_at(start)?;
    let Err(why) = check(start)? else { return Ok(start) };
    let fits = least_mem_that_fits(start, available.max(start), step, |m| Ok(check(m)?.is_ok()))?;
    let limit = if available < host_available_mib {
        format!("{}'s kernel can use ({available} MiB)", profile.arch)
    } else {
        format!("this host's available memory ({available} MiB)")
    };
    match (choice, fits) {
        (MemChoice::Auto, Some(m)) => {
            log::info!("--mem auto: {m} MiB, what the suite's builds in the pack need");
            Ok(m)
        }
        (MemChoice::Auto, None) => {
            bail!("--mem auto: no size up to what {limit} holds the suite's builds in the pack: {why}")
        }
        (MemChoice::Mib(m), Some(n)) => bail!("--mem {m} MiB is too small: {why}; it needs --mem {n}M or more"),
        (MemChoice::Mib(m), None) => bail!("--mem {m} MiB is too small: {why}; no size up to what {limit} is enough"),
    }
}

/// The boots of `bootbench run`, without printing the table: the results
/// (also written to `args.output` after every boot, when given).
pub fn run_boots(args: &RunOptions) -> anyhow::Result<ResultsFile> {
    if let crate::boot::target::Target::Lab(machine) = args.lab.target()? {
        return crate::boot::lab_target::run_lab_boots(args, &machine);
    }
    let arch = run_arch(args)?;
    if args.boots == 0 {
        bail!("--boots must be at least 1");
    }
    check_upload_flags(args)?;
    let mem_choice = MemChoice::parse(&args.mem).context("--mem")?;
    let clock: Clock = args.clock.parse()?;
    let request: AccelRequest = args.accel.parse()?;
    let choice = choose(request, clock, arch)?;
    if let (Some(p), true) =
        (&args.initramfs, args.iterations.is_some() || args.warmup.is_some() || args.workloads.is_some())
    {
        bail!(
            "--iterations, --warmup and --workloads change the suite of an image bootbench builds; the suite packed in --initramfs {} stays as it is: give them as --append bootbench.iterations=N etc. instead",
            p.display()
        );
    }
    let pack_choice: crate::pack::choice::PackChoice = args.pack.parse()?;
    // --pack none: the built-in suites build synthetically.
    let real_builds = pack_choice != crate::pack::choice::PackChoice::None;
    let suite = apply_overrides(
        crate::suite_choice::load_suite_for(&args.suite, arch.name(), real_builds)?,
        args.iterations,
        args.warmup,
        args.workloads.as_deref(),
    )?;
    let variants = parse_variants(&args.variants)?;
    let guests = guest_suites(args, &suite, &variants, arch.name(), real_builds)?;
    let mut scratch_room = None;
    for g in &guests {
        if let Some(room) = crate::suite_choice::scratch_room(g, args.smp())? {
            scratch_room = Some(scratch_room.map_or(room, |r: u64| r.max(room)));
        }
    }
    let decide_storage = |mem_mib| -> anyhow::Result<crate::boot::scratch_disk::StoragePlan> {
        Ok(crate::boot::scratch_disk::StoragePlan::decide(
            crate::boot::scratch_disk::SizeChoice::parse("--scratch-disk", &args.scratch_disk)?,
            crate::boot::scratch_disk::SizeChoice::parse("--swap", &args.swap)?,
            crate::boot::scratch_disk::SizeChoice::parse("--zram", &args.zram)?,
            args.iosched.as_deref(),
            scratch_room,
            mem_mib,
        )?)
    };
    let mem_mib = guest_memory(
        mem_choice,
        &guests,
        args.smp(),
        &arch.profile(),
        crate::suite_choice::mem_available_bytes().map_or(u64::MAX, |b| b >> 20),
        decide_storage,
    )?;
    let storage =
        decide_storage(mem_mib)?.with_throttle(args.disk_throttle.as_deref(), icount_option(choice.accel, clock))?;
    // The pack goes to every boot when any guest's suite needs it.
    let pack_suite = guests.iter().find(|g| g.workloads.iter().any(loads::workloads::needs_pack)).unwrap_or(&suite);
    // Attached as a read-only disk the guest finds by its serial.
    let pack = crate::pack::choice::resolve(&pack_choice, pack_suite, arch.name())?.map(|mut p| {
        p.record.serial = PACK_SERIAL.to_string();
        p
    });
    if let Some(p) = &pack {
        log::info!(
            "userland pack {} ({} bytes, sha256 {}), read-only, serial {}",
            p.image.display(),
            p.record.image_bytes,
            p.record.image_sha256,
            p.record.serial
        );
    }
    let storage = storage.with_pack(pack.is_some());
    let kernels = resolve_kernels(args, arch)?;
    let kernel_storage = kernels
        .iter()
        .map(|k| {
            let config = k.config.as_deref().map(crate::boot::scratch_disk::KernelConfig::read).transpose()?;
            // A user's --initramfs carries its own modules: only the
            // scheduler and page size are taken from the config then.
            crate::boot::scratch_disk::for_kernel(
                &storage,
                config.as_ref(),
                k.modules_known() || args.initramfs.is_some(),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let profile = arch.profile();
    let qemu_version = qemu::qemu_version(&profile.qemu_binary)?;
    // What decides an icount figure besides the images: recorded so that
    // figures from two hosts can be checked for having run the same machine.
    let machine_facts = match qemu::machine_facts(&profile.qemu_binary, &profile.machine) {
        Ok(f) => Some(f),
        Err(e) => {
            log::warn!("{e}; the results will not record the machine type and CPU model");
            None
        }
    };
    let host = crate::boot::host_facts::this_host();
    crate::interrupt::install()?;
    let work = tempfile::Builder::new().prefix("bootbench-run-").tempdir().context("cannot create a temp dir")?;
    // Probed once: where the images go and how QEMU does their I/O.
    let disk_io = storage
        .any()
        .then(|| crate::boot::scratch_disk::DiskIoSetup::probe(&storage, &profile.qemu_binary, work.path()));
    if let Some(d) = &disk_io {
        log::info!("{}", d.describe());
    }
    // What an interrupt says, kept current boot by boot; it also removes the
    // run's scratch files (initramfs, disk images), which exit would leave.
    let on_interrupt = Arc::new(Mutex::new("run: interrupted before the first boot; nothing was recorded".to_string()));
    let _interrupt = {
        let (say, work) = (on_interrupt.clone(), work.path().to_path_buf());
        let disks = disk_io.as_ref().and_then(|d| d.own_dir()).map(Path::to_path_buf);
        crate::interrupt::on_interrupt(move || {
            log::warn!("{}", say.lock().unwrap_or_else(PoisonError::into_inner));
            let patience = Duration::from_secs(10);
            if !crate::interrupt::remove_dir_until_gone(&work, patience) {
                log::warn!("could not remove the run's scratch directory {}", work.display());
            }
            if let Some(d) = &disks {
                if !crate::interrupt::remove_dir_until_gone(d, patience) {
                    log::warn!("could not remove the run's disk images in {}", d.display());
                }
            }
        })
    };
    let mut uploads = upload_arrangement(args, work.path())?;
    // Values no record may hold: the run's token, and those of secret keys
    // given through --append or --variant (which QEMU's argv shows).
    let mut secrets = uploads.as_ref().map(RunUpload::secret_values).unwrap_or_default();
    for words in args.append.iter().chain(variants.iter().map(|v| &v.words)) {
        let found = loads::suite::secret_values(words);
        if !found.is_empty() {
            log::warn!(
                "a secret key in the cmdline words '{}' is visible in QEMU's argv to every user of this host and in /proc/cmdline to every process of the guest; the upload token belongs in --upload-token-file",
                loads::suite::redact_secrets(words)
            );
        }
        secrets.extend(found);
    }
    let mut images = Vec::new();
    for (k, ks) in kernels.iter().zip(&kernel_storage) {
        let img = prepare_image(args, arch, &suite, k, &ks.early_modules, work.path())?;
        log::info!(
            "initramfs {} ({} bytes, modules: {}{})",
            img.built.path.display(),
            img.built.bytes,
            if img.built.modules.is_empty() { "none".to_string() } else { img.built.modules.join(",") },
            if img.built.early_modules.is_empty() {
                String::new()
            } else {
                format!("; early: {}", img.built.early_modules.join(","))
            }
        );
        for (path, sha256) in &img.built.files {
            log::info!("packed {path} (sha256 {sha256})");
        }
        images.push(img);
    }
    let why_smp = if args.smp.is_none() && args.smp() == crate::boot::options::ICOUNT_SMP {
        " (the default under icount: a second vCPU makes boots differ; --smp to choose)"
    } else {
        ""
    };
    log::info!("accel {} ({}); {} vCPU{why_smp}, {} MiB", choice.accel, choice.reason, args.smp(), mem_mib);

    // With an upload, each image boots with the secrets segment appended:
    // a copy in the run's private scratch directory; the image itself (and
    // the hash the envelope records) stays as built.
    let boot_images = match &uploads {
        None => images.iter().map(|i| i.built.path.clone()).collect::<Vec<_>>(),
        Some(u) => {
            let segment = crate::boot::secrets_segment::segment(u.guest_secrets())?;
            let mut paths = Vec::new();
            for (i, img) in images.iter().enumerate() {
                let out = work.path().join(format!("initramfs-{i}-with-secrets.cpio"));
                crate::boot::secrets_segment::write_with_segment(&img.built.path, &segment, &out)?;
                paths.push(out);
            }
            paths
        }
    };
    let mut file = ResultsFile::default();
    let total = args.boots as usize * kernels.len() * variants.len();
    // Interleaved by default (A B A B ...), so host drift cannot pass for a
    // kernel difference; see `crate::boot::order`.
    let order_seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let variants = &variants;
    let units: Vec<(usize, &Variant)> =
        (0..kernels.len()).flat_map(|ki| variants.iter().map(move |v| (ki, v))).collect();
    if args.order == crate::boot::order::BootOrder::Random && units.len() > 1 {
        log::info!("random boot order, seed {order_seed}");
    }
    // Progress on a terminal: the boots done of all, and what the boot
    // now running does (from the guest's events), with the time the last
    // boot of the same kernel took.
    let overall = (total > 1).then(|| crate::terminal::steps(total as u64, "boots"));
    let mut last_wall: Vec<Option<Duration>> = vec![None; kernels.len()];
    for (round, ui) in crate::boot::order::schedule(args.order, units.len(), args.boots, order_seed) {
        let (ki, variant) = units[ui];
        let workload_names: Vec<String> = variants
            .iter()
            .position(|v| std::ptr::eq(v, variant))
            .and_then(|vi| guests.get(vi))
            .map(|g| g.workloads.iter().map(|w| w.name.clone()).collect())
            .unwrap_or_default();
        let (k, img) = (&kernels[ki], &images[ki]);
        let label = group_label(&args.label, variant);
        {
            let index = file.boots.len();
            *on_interrupt.lock().unwrap_or_else(PoisonError::into_inner) =
                interrupted_message(index, total, args.output.as_deref(), true);
            let mut attempt = 0;
            let record = loop {
                let port_file = work.path().join(format!("port-{index}-{attempt}.out"));
                let tag = format!("{index}-{attempt}");
                let disks = match &disk_io {
                    Some(d) => d.make_disks(&storage, kernel_storage[ki].page_size, &tag)?,
                    None => crate::boot::scratch_disk::make_disks(
                        &storage,
                        kernel_storage[ki].page_size,
                        work.path(),
                        &tag,
                    )?,
                };
                if storage.any() {
                    log::info!("{}", crate::boot::scratch_disk::describe(&disks.record));
                }
                let mut spec = BootSpec::new(profile.clone(), &k.image, &boot_images[ki])?;
                spec.disks = disks.files.iter().map(|f| (f.clone(), qemu::argv::DiskFormat::Raw)).collect();
                if let Some(d) = &disk_io {
                    spec.disk_io = d.io;
                }
                for (key, value) in storage.cmdline_keys() {
                    spec.cmdline.push(key, &value)?;
                }
                if let Some(p) = &pack {
                    spec.read_only_disks.push((p.image.clone(), p.record.serial.clone()));
                    spec.cmdline.push(PACK_CMDLINE_KEY, &p.record.serial)?;
                }
                spec.accel = choice.accel;
                spec.smp = args.smp();
                spec.mem_mib = mem_mib;
                spec.cpu = args.cpu.clone();
                spec.cmdline.push_flag("quiet")?;
                spec.cmdline.push("bootbench.accel", &choice.accel.to_string())?;
                if let Some(extra) = &args.append {
                    spec.cmdline.extend_raw(extra)?;
                }
                if !variant.words.is_empty() {
                    spec.cmdline.extend_raw(&variant.words)?;
                }
                if icount_needs_alive_key(choice.accel, &spec.cmdline) {
                    spec.cmdline.push(ALIVE_CMDLINE_KEY, &ICOUNT_ALIVE_INTERVAL_S.to_string())?;
                }
                if img.port {
                    spec.results_port = Some(port_file.clone());
                }
                if let Some(u) = &uploads {
                    spec.user_net = true;
                    for (key, value) in u.cmdline_keys() {
                        spec.cmdline.push(key, value)?;
                    }
                }
                spec.timeouts = Timeouts {
                    boot: Duration::from_secs(args.timeout_boot),
                    silence: Duration::from_secs(args.timeout_silence),
                    total: Duration::from_secs(args.timeout_total),
                    ..Timeouts::default()
                };
                let what = format!("boot {}/{total} (kernel {})", index + 1, ki + 1);
                let bar = crate::terminal::spinner(format!("{what}: booting the kernel"));
                let outcome = qemu::boot_observed(&spec, &mut |p| {
                    bar.set_message(format!("{what}: {}", boot_status(p, &workload_names, last_wall[ki])));
                });
                bar.finish_and_clear();
                // A Ctrl-C also reaches QEMU (same process group) and ends
                // this boot: start no retry and no next boot; the watcher
                // ends the process.
                crate::interrupt::hold_if_interrupted();
                // The images hold what the guest wrote (up to GBs): gone
                // after each boot, and made fresh for the next.
                disks.remove();
                let outcome = outcome?;
                let upload_seen = uploads.as_ref().map(|_| (outcome.events.clone(), outcome.document.clone()));
                let qemu = QemuFacts { version: &qemu_version, machine: machine_facts.as_ref() };
                let mut record = envelope(args, &label, k, img, qemu, &choice, mem_mib, arch, index, outcome);
                record.host = Some(host.clone());
                record.storage = storage.any().then(|| disks.record.clone());
                record.pack = pack.as_ref().map(|p| p.record.clone());
                record.channels = channel_reports(&record.console_log, img.port.then_some(port_file.as_path()));
                crate::boot::redaction::redact_boot(&mut record, &secrets);
                let retry = retried(&record.boot.classification) && attempt < args.retries;
                // Only the attempt the results file keeps reaches the store:
                // a retried one would be a run no file holds.
                if let (false, Some(u), Some((events, doc))) = (retry, &mut uploads, &upload_seen) {
                    u.attach(&mut record, events, doc.as_deref());
                }
                log::info!(
                    "boot {}/{total} (kernel {}{}, round {}): {}",
                    index + 1,
                    ki + 1,
                    if variant.label.is_empty() { String::new() } else { format!(" variant {}", variant.label) },
                    round + 1,
                    boot_summary(&record)
                );
                if retry {
                    attempt += 1;
                    log::info!("retrying (attempt {} of {})", attempt + 1, args.retries + 1);
                    continue;
                }
                break record;
            };
            last_wall[ki] = Some(Duration::from_secs_f64(record.boot.wall_s));
            if let Some(o) = &overall {
                o.inc(1);
            }
            file.boots.push(record);
            crate::interrupt::critical(|| {
                let written = args.output.as_ref().map(|out| file.write(out)).transpose();
                *on_interrupt.lock().unwrap_or_else(PoisonError::into_inner) =
                    interrupted_message(file.boots.len(), total, args.output.as_deref(), false);
                written
            })?;
        }
    }
    if let Some(o) = overall {
        o.finish_and_clear();
    }
    if let Some(u) = uploads {
        u.finish()?;
    }
    Ok(file)
}

/// Refuses an upload flag without a receiver to go with: the rule clap's
/// `requires` kept before the URL could come from the config file.
fn check_upload_flags(args: &RunOptions) -> anyhow::Result<()> {
    let lone = [
        ("--upload-token", args.upload_token.is_some()),
        ("--upload-token-file", args.upload_token_file.is_some()),
        ("--upload-ca-file", args.upload_ca_file.is_some()),
    ];
    match lone.iter().find(|(_, given)| *given) {
        Some((flag, _)) if args.upload_url.is_none() => {
            bail!("{flag} needs a receiver: give --upload-url, or set upload.url in the config file")
        }
        _ => Ok(()),
    }
}

/// The run's upload arrangement: a receiver of its own (`--serve`), one
/// elsewhere (`--upload-url` with its token), or none.
fn upload_arrangement(args: &RunOptions, work: &Path) -> anyhow::Result<Option<RunUpload>> {
    let ca = args.upload_ca_file.as_deref();
    if args.serve {
        return Ok(Some(RunUpload::serve(args.serve_db.as_deref(), work, ca)?));
    }
    let Some(url) = &args.upload_url else { return Ok(None) };
    let token = match (&args.upload_token, &args.upload_token_file) {
        (Some(t), _) => TokenSource::Given(t),
        (None, Some(f)) => TokenSource::File(f),
        (None, None) => bail!("--upload-url {url} needs the receiver's token: give --upload-token-file FILE (or set upload.token_file in the config file)"),
    };
    Ok(Some(RunUpload::elsewhere(url, token, ca)?))
}

/// The option that put the guest on an instruction-counted clock, for
/// errors about what cannot go with it: `--clock icount`, or `--accel
/// icount` when the clock was left real.
fn icount_option(accel: Accel, clock: Clock) -> Option<&'static str> {
    match (accel, clock) {
        (_, Clock::Icount { .. }) => Some("--clock icount"),
        (Accel::Icount { .. }, Clock::Real) => Some("--accel icount"),
        _ => None,
    }
}

/// What an interrupt says once `finished` boots of `total` are done, and
/// (`booting`) while the next one runs: that boot is not recorded; the
/// results file, if any, holds the finished ones.
fn interrupted_message(finished: usize, total: usize, output: Option<&Path>, booting: bool) -> String {
    let kept = output.map(|out| format!("; {} holds the {finished} finished boot(s)", out.display()));
    let kept = kept.unwrap_or_default();
    if booting {
        format!("run: interrupted during boot {}/{total}: that boot is not recorded{kept}", finished + 1)
    } else {
        format!("run: interrupted after boot {finished}/{total}{kept}")
    }
}

/// Whether a boot that ended this way is booted again (up to
/// `--retries`): the kernel's failures, which may be flaky, and the
/// appliance's own init panic, which may be a transient bug of ours.
fn retried(classification: &str) -> bool {
    matches!(classification, "hang" | "panic" | "boot_failure" | "oops" | "init_panic")
}

/// How a boot ended, for its line on stderr: the verdict, the wall time,
/// what failed, and who is to blame when it is not the kernel.
fn boot_summary(record: &BootRecord) -> String {
    let b = &record.boot;
    let mut line = format!("{} in {:.1} s", b.classification, b.wall_s);
    if let Some(d) = &b.detail {
        line.push_str(&format!(": {d}"));
    }
    if b.classification == "init_panic" {
        line.push_str(
            " [appliance failure: bootbench's own init crashed; the kernel is not to blame; please report it]",
        );
    }
    if let Some(late) = &b.late_failure {
        line.push_str(&format!(" (result kept; late failure {late})"));
    }
    if let Some(kept) = &record.workloads_kept {
        let names: Vec<&str> = kept.workloads.iter().map(|w| w.name.as_str()).collect();
        line.push_str(&format!(
            " (finished before the failure, kept beside it: {}{})",
            if names.is_empty() { "none".to_string() } else { names.join(", ") },
            if kept.errors.is_empty() { String::new() } else { format!("; {} unreadable", kept.errors.len()) }
        ));
    }
    line
}

/// Whether an icount boot's cmdline needs the shorter `alive` interval:
/// under icount, guest seconds pass several times slower than the host's,
/// and the default interval would outlast the host's silence timeout. A
/// value the user set wins.
fn icount_needs_alive_key(accel: Accel, cmdline: &qemu::KernelCmdline) -> bool {
    matches!(accel, Accel::Icount { .. }) && !cmdline.contains(ALIVE_CMDLINE_KEY)
}

/// Decodes each channel on its own, so the envelope says which one
/// delivered the stream (the runner merges them into one verdict).
fn channel_reports(console_log: &str, port_file: Option<&Path>) -> Vec<ChannelReport> {
    let report = |name: &str, text: &str| {
        let mut d = loads::console_protocol::Decoder::new();
        d.feed_text(text);
        let verdict = d.last_document();
        ChannelReport { name: name.to_string(), intact: verdict.is_ok(), detail: verdict.err().map(|e| e.to_string()) }
    };
    let mut out = vec![report("console", console_log)];
    if let Some(p) = port_file {
        out.push(match std::fs::read(p) {
            Ok(bytes) => report("port", &String::from_utf8_lossy(&bytes)),
            Err(e) => ChannelReport {
                name: "port".to_string(),
                intact: false,
                detail: Some(format!("no data from the results port file {}: {e}", p.display())),
            },
        });
    }
    out
}

/// What a boot keeps of its workloads' own result streams: all of them
/// when the boot's document is missing (it failed mid-suite), none when
/// the document arrived (they are in it already).
fn kept_workloads(result: Option<&RunDocument>, streams: &[String]) -> Option<KeptWorkloads> {
    match result {
        Some(_) => None,
        None => KeptWorkloads::parse(streams),
    }
}

/// What the run learned of its QEMU once, before the first boot.
#[derive(Clone, Copy)]
struct QemuFacts<'a> {
    /// `--version`'s first line.
    version: &'a str,
    /// What the profile's `-machine` stands for, when QEMU said.
    machine: Option<&'a qemu::MachineFacts>,
}

impl QemuFacts<'_> {
    /// The CPU model a boot ran: its argv's `-cpu`, else the machine type's
    /// default.
    fn cpu_model(&self, qemu: &QemuRef) -> Option<String> {
        qemu.option("-cpu").map(str::to_string).or_else(|| self.machine.and_then(|m| m.default_cpu.clone()))
    }
}

#[allow(clippy::too_many_arguments)]
fn envelope(
    args: &RunOptions,
    label: &str,
    k: &KernelUnderTest,
    img: &PreparedImage,
    qemu_facts: QemuFacts,
    choice: &qemu::AccelChoice,
    mem_mib: u64,
    arch: Arch,
    index: usize,
    outcome: qemu::BootOutcome,
) -> BootRecord {
    let (result, result_error) = match (&outcome.document, &outcome.stream_error) {
        (Some(text), _) => match serde_json::from_str::<RunDocument>(text) {
            Ok(mut doc) => {
                k.stamp(&mut doc);
                (Some(doc), None)
            }
            Err(e) => (None, Some(format!("the guest's result is intact but not a valid result document: {e}"))),
        },
        (None, Some(e)) => (None, Some(e.clone())),
        (None, None) => (None, Some("no result stream".to_string())),
    };
    let detail = match &outcome.classification {
        qemu::Classification::Ok => None,
        other => Some(other.to_string()),
    };
    let workloads_kept = kept_workloads(result.as_ref(), &outcome.workload_results);
    let qemu_ref = QemuRef { version: qemu_facts.version.to_string(), argv: outcome.argv.clone() };
    let cpu_model = qemu_facts.cpu_model(&qemu_ref);
    BootRecord {
        label: label.to_string(),
        cmdline: appended(&outcome.argv),
        kernel: k.kernel_ref(),
        initramfs: img.initramfs_ref(),
        qemu: qemu_ref,
        machine: MachineShape {
            machine_type: qemu_facts.machine.map(|m| m.machine_type.clone()),
            cpu_model,
            arch: arch.to_string(),
            smp: args.smp(),
            mem_mib,
            cpu: args.cpu.clone(),
            accel: choice.accel.to_string(),
            accel_reason: choice.reason.clone(),
        },
        boot: BootInfo {
            index: index as u32,
            classification: outcome.classification.name().to_string(),
            detail,
            late_failure: outcome.late_failure.clone(),
            wall_s: outcome.timings.wall.as_secs_f64(),
            to_hello_s: outcome.timings.to_hello.map(|d| d.as_secs_f64()),
            qemu_status: outcome.qemu_status,
            envelope_id: result.is_none().then(crate::results::host_run_id),
        },
        result,
        result_error,
        workloads_kept,
        channels: Vec::new(),
        upload: None,
        storage: None,
        pack: None,
        host: None,
        lab: None,
        console_log: outcome.console_log,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_keys_that_choose_what_runs_decide_the_guests_suite() {
        let words =
            "quiet bootbench.upload=http://h/ bootbench.ip=dhcp bootbench.scratch_fs=ext4 bootbench.iterations=2 \
                     bootbench.kernbench.jobs=half bootbench.suite=standard bootbench.workloads=fork,kernbench";
        assert_eq!(
            suite_words(words),
            [
                "bootbench.iterations=2",
                "bootbench.kernbench.jobs=half",
                "bootbench.suite=standard",
                "bootbench.workloads=fork,kernbench"
            ]
        );
    }

    #[test]
    fn an_upload_flag_without_a_receiver_is_refused_before_booting() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Argv {
            #[command(flatten)]
            args: RunOptions,
        }
        let check = |extra: &[&str]| {
            let argv = ["run"].iter().chain(extra).copied();
            check_upload_flags(&Argv::try_parse_from(argv).unwrap().args).map_err(|e| e.to_string())
        };
        for flag in ["--upload-token", "--upload-token-file", "--upload-ca-file"] {
            let e = check(&[flag, "x"]).unwrap_err();
            assert!(e.starts_with(&format!("{flag} needs a receiver")) && e.contains("upload.url"), "{e}");
            let e = check(&["--serve", flag, "x"]).unwrap_err();
            assert!(e.starts_with(&format!("{flag} needs a receiver")), "--serve is no receiver for it: {e}");
            assert_eq!(check(&["--upload-url", "http://10.0.2.2:8080", flag, "x"]), Ok(()));
        }
        assert_eq!(check(&[]), Ok(()));
        // The run fails on it before anything is built or booted.
        let argv = ["run", "--kernel", "/nonexistent/vmlinuz", "--upload-token-file", "/t"];
        let e = run_boots(&Argv::try_parse_from(argv).unwrap().args).unwrap_err().to_string();
        assert!(e.contains("needs a receiver"), "{e}");
    }

    #[test]
    fn the_guests_suite_is_the_guest_arch_s_after_append_and_each_variant() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Argv {
            #[command(flatten)]
            args: RunOptions,
        }
        let args = |extra: &[&str]| {
            let mut argv = vec!["run"];
            argv.extend_from_slice(extra);
            Argv::try_parse_from(argv).unwrap().args
        };
        let quick = loads::suite::Suite::builtin("quick").unwrap();
        let names = |s: &loads::suite::Suite| s.workloads.iter().map(|w| w.name.clone()).collect::<Vec<_>>();
        // Upload and storage keys without the host's own are no error here.
        let a = args(&["--append", "bootbench.ip=dhcp bootbench.upload_attempts=5 bootbench.suite=standard"]);
        let got = guest_suites(&a, &quick, &[], "x86_64", true).unwrap();
        assert_eq!(got.len(), 1);
        assert!(names(&got[0]).contains(&"kernbench".to_string()), "x86_64's standard: {:?}", names(&got[0]));
        let got = guest_suites(&a, &quick, &[], "i386", true).unwrap();
        assert!(names(&got[0]).contains(&"kernbench".to_string()), "i386's standard: {:?}", names(&got[0]));
        let got = guest_suites(&a, &quick, &[], "ppc64", true).unwrap();
        assert!(names(&got[0]).contains(&"kbuild".to_string()), "ppc64's standard (no pack): {:?}", names(&got[0]));
        let got = guest_suites(&a, &quick, &[], "x86_64", false).unwrap();
        assert!(names(&got[0]).contains(&"kbuild".to_string()), "--pack none: {:?}", names(&got[0]));
        // One suite per variant, each with its own words.
        let variants = parse_variants(&["base=".into(), "kb=bootbench.workloads=kernbench".into()]).unwrap();
        let got = guest_suites(&args(&[]), &quick, &variants, "x86_64", true).unwrap();
        assert_eq!(names(&got[0]), names(&quick));
        assert_eq!(names(&got[1]), ["kernbench"]);
        // What the guest refuses it reports: the host keeps the suite.
        for bad in ["bootbench.suite=huge", "bootbench.iterations=zero", "bootbench.kernbench.jobs=lots"] {
            let got = guest_suites(&args(&["--append", bad]), &quick, &[], "x86_64", true).unwrap();
            assert_eq!(got.len(), 1, "{bad}");
            assert_eq!(got[0], quick, "{bad}");
        }
    }

    fn record(classification: &str) -> BootRecord {
        let mut r = BootRecord::default();
        r.boot.classification = classification.into();
        r.boot.wall_s = 5.25;
        r
    }

    #[test]
    fn init_panics_are_retried_and_said_to_be_ours() {
        for c in ["hang", "panic", "oops", "init_panic"] {
            assert!(retried(c), "{c}");
        }
        for c in ["ok", "qemu_failure", "incomplete"] {
            assert!(!retried(c), "{c}");
        }
        let mut r = record("init_panic");
        r.boot.detail = Some("init panic: ... at init/src/main.rs:1:2: boom".into());
        let line = boot_summary(&r);
        assert!(line.starts_with("init_panic in 5.2 s: init panic"), "{line}");
        assert!(line.contains("appliance failure") && line.contains("not to blame"), "{line}");
        let line = boot_summary(&record("panic"));
        assert!(!line.contains("appliance"), "{line}");
    }

    #[test]
    fn the_run_line_tells_late_failures_and_kept_workloads() {
        let mut r = record("ok");
        r.boot.late_failure = Some("after the result was complete: hang (silence): x".into());
        assert!(boot_summary(&r).contains("result kept; late failure after the result was complete: hang"));
        let mut r = record("panic");
        let fork = serde_json::to_string(&loads::schema::WorkloadResult { name: "fork".into(), ..Default::default() })
            .unwrap();
        r.workloads_kept = kept_workloads(None, &[fork.clone(), "{}".into()]);
        let line = boot_summary(&r);
        assert!(line.contains("kept beside it: fork; 1 unreadable"), "{line}");
        // With the document, the streams are in it already.
        let doc = RunDocument {
            schema_version: loads::schema::SCHEMA_VERSION,
            run_id: "r".into(),
            status: loads::schema::Status::Complete,
            errors: vec![],
            provenance: Default::default(),
            timings: Default::default(),
            workloads: vec![],
        };
        assert_eq!(kept_workloads(Some(&doc), &[fork]), None);
        assert_eq!(kept_workloads(None, &[]), None);
    }

    #[test]
    fn an_interrupt_says_which_boot_is_lost_and_what_the_file_holds() {
        let out = Path::new("/r/out.json");
        assert_eq!(
            interrupted_message(1, 3, Some(out), true),
            "run: interrupted during boot 2/3: that boot is not recorded; /r/out.json holds the 1 finished boot(s)"
        );
        assert_eq!(
            interrupted_message(3, 3, Some(out), false),
            "run: interrupted after boot 3/3; /r/out.json holds the 3 finished boot(s)"
        );
        assert_eq!(
            interrupted_message(0, 1, None, true),
            "run: interrupted during boot 1/1: that boot is not recorded"
        );
    }

    #[test]
    fn a_disk_throttle_is_refused_under_icount_naming_both_options() {
        assert_eq!(icount_option(Accel::Icount { shift: 0 }, Clock::Icount { shift: 0 }), Some("--clock icount"));
        assert_eq!(icount_option(Accel::Icount { shift: 2 }, Clock::Real), Some("--accel icount"));
        assert_eq!(icount_option(Accel::Tcg, Clock::Real), None);
        assert_eq!(icount_option(Accel::Kvm, Clock::Real), None);
        let plan = crate::boot::scratch_disk::StoragePlan { scratch_bytes: Some(64 << 20), ..Default::default() };
        let e = plan
            .clone()
            .with_throttle(Some("40M"), icount_option(Accel::Icount { shift: 0 }, Clock::Icount { shift: 0 }))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--disk-throttle 40M cannot be used with --clock icount"), "{e}");
        let ok = plan.with_throttle(Some("40M"), icount_option(Accel::Tcg, Clock::Real)).unwrap();
        assert_eq!(ok.throttle.map(|t| t.bps), Some(40 << 20));
    }

    #[test]
    fn icount_boots_ask_for_frequent_alive_events_unless_told_otherwise() {
        let mut c = qemu::KernelCmdline::new(2048).unwrap();
        c.push("console", "ttyS0").unwrap();
        assert!(icount_needs_alive_key(Accel::Icount { shift: 0 }, &c));
        assert!(!icount_needs_alive_key(Accel::Tcg, &c), "real-clock boots keep the 60 s default");
        c.extend_raw("bootbench.alive=30").unwrap();
        assert!(!icount_needs_alive_key(Accel::Icount { shift: 3 }, &c), "the user's value wins");
    }

    #[test]
    fn auto_memory_is_a_size_the_machine_takes_and_a_size_it_refuses_is_named() {
        use loads::suite::Suite;
        let kernbench = Suite::from_json(
            "t",
            r#"{"name":"t","workloads":[{"name":"kernbench","params":{"target":"quick","jobs":["optimal"]}}]}"#,
        )
        .unwrap();
        let plan =
            |_| Ok(crate::boot::scratch_disk::StoragePlan { scratch_bytes: Some(1 << 30), ..Default::default() });
        let mem = |choice, arch: qemu::Arch| {
            guest_memory(choice, std::slice::from_ref(&kernbench), 2, &arch.profile(), 24 << 10, plan)
        };
        // x86's machines take any size: the least in steps of 64 MiB.
        assert_eq!(mem(MemChoice::Auto, qemu::Arch::X86_64).unwrap(), 1088);
        // pseries takes whole 256 MiB blocks only (QEMU refuses 1088 MiB).
        assert_eq!(mem(MemChoice::Auto, qemu::Arch::Ppc64le).unwrap(), 1280);
        let e = mem(MemChoice::Mib(1088), qemu::Arch::Ppc64le).unwrap_err().to_string();
        assert_eq!(
            e,
            "--mem 1088 MiB: ppc64le's pseries machine takes guest memory in multiples of 256 MiB (try --mem 1280M)"
        );
        assert_eq!(mem(MemChoice::Mib(1536), qemu::Arch::Ppc64le).unwrap(), 1536);
        assert_eq!(mem(MemChoice::Mib(1088), qemu::Arch::I386).unwrap(), 1088);
        // 128 SDET scripts need more than a 32-bit guest's kernel can use:
        // refused before the boot, naming the limit.
        let sdet =
            Suite::from_json("t", r#"{"name":"t","workloads":[{"name":"sdet","params":{"levels":[1,128]}}]}"#).unwrap();
        let e = guest_memory(MemChoice::Auto, &[sdet], 2, &qemu::Arch::I386.profile(), 24 << 10, plan)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--mem auto: no size up to what i386's kernel can use (3583 MiB) holds"), "{e}");
        // Beyond it, a 4 GiB guest is checked as the 3583 MiB its kernel uses.
        let big =
            Suite::from_json("t", r#"{"name":"t","workloads":[{"name":"sdet","params":{"levels":[1,104]}}]}"#).unwrap();
        let e = guest_memory(MemChoice::Mib(4096), &[big], 2, &qemu::Arch::I386.profile(), 24 << 10, plan)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--mem 4096 MiB is too small"), "{e}");
    }
}
