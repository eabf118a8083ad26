//! bootbench's start-up against a trivial init: the same kernel boots the
//! appliance's image and an image whose /init only prints its boot time and
//! powers off, interleaved, in each compression, under icount with one vCPU
//! so guest time is deterministic. The figure is the ratio of guest time
//! from kernel start to the first workload's start against kernel start to
//! the trivial init's power-off. Both images boot through the same
//! `bootbench run` code (`--initramfs`), so their QEMU runs differ only in
//! the initramfs. It prints figures and a verdict against the goal; it
//! never shells out to the CLI.

use crate::boot::image::{self as boot_image, ImageSpec, RESULT_PORT_MODULES};
use crate::boot::init_build;
use crate::boot::kernels::{resolve_kernels, KernelUnderTest};
use crate::boot::options::RunOptions;
use crate::boot::session::run_boots;
use crate::results::{BootRecord, ResultsFile};
use anyhow::{bail, Context};
use image::{Compression, Initramfs};
use loads::console_protocol::{parse_line, Line};
use loads::suite::Suite;
use qemu::Arch;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The event the trivial init prints (`trivial-init/src/main.rs`), with
/// `boottime=SECONDS`.
pub const TRIVIAL_INIT_EVENT: &str = "trivial-init";
/// What the kernel prints when it powers off (`kernel/reboot.c`, at
/// KERN_EMERG, so `quiet` keeps it).
pub const POWER_DOWN_LINE: &str = "reboot: Power down";
/// The goal: bootbench's first workload starts at most this many times
/// later than a trivial init powers off.
pub const GOAL_RATIO: f64 = 1.05;
/// The compressions compared: a plain archive, gzip and zstd.
pub const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Gzip, Compression::Zstd];

/// One boot's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartupBoot {
    /// Guest CLOCK_BOOTTIME of the event measured, in s.
    pub guest_s: f64,
    /// Host wall time from QEMU's start to its exit, in s.
    pub wall_s: f64,
}

/// The boots of one compression.
#[derive(Debug, Clone, PartialEq)]
pub struct CompressionFigures {
    /// The compression of both images.
    pub compression: Compression,
    /// Size of the trivial image.
    pub trivial_bytes: u64,
    /// Size of bootbench's image.
    pub bootbench_bytes: u64,
    /// The trivial init's boots: guest time of its power-off line.
    pub trivial: Vec<StartupBoot>,
    /// bootbench's boots: guest time of the first workload's start.
    pub bootbench: Vec<StartupBoot>,
}

/// The median, NaN for no values.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

/// The minimum, NaN for no values.
pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::min)
}

fn guest(boots: &[StartupBoot]) -> Vec<f64> {
    boots.iter().map(|b| b.guest_s).collect()
}

fn wall(boots: &[StartupBoot]) -> Vec<f64> {
    boots.iter().map(|b| b.wall_s).collect()
}

impl CompressionFigures {
    /// Median first-workload time over median trivial power-off time; NaN
    /// when either side has no boot.
    pub fn ratio(&self) -> f64 {
        let (b, t) = (median(&guest(&self.bootbench)), median(&guest(&self.trivial)));
        if t > 0.0 {
            b / t
        } else {
            f64::NAN
        }
    }
}

/// The verdict on a ratio against [`GOAL_RATIO`].
pub fn verdict(ratio: f64) -> &'static str {
    if ratio.is_nan() {
        "no data"
    } else if ratio <= GOAL_RATIO {
        "meets goal"
    } else {
        "over goal"
    }
}

/// The compression with the lowest ratio (the faster start), if any has one.
pub fn faster(figures: &[CompressionFigures]) -> Option<Compression> {
    figures.iter().filter(|f| !f.ratio().is_nan()).min_by(|a, b| a.ratio().total_cmp(&b.ratio())).map(|f| f.compression)
}

/// Renders the comparison table: `what` says how the boots were made.
pub fn render(what: &str, figures: &[CompressionFigures]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nstart-up against a trivial init: guest s from kernel start to bootbench's first workload / to a trivial init's power-off"
    );
    let _ = writeln!(out, "({what})");
    let _ = writeln!(
        out,
        "  {:<11} {:>12} {:>12}  {:>21}  {:>21}  {:>7}  {:>6}  verdict",
        "compression", "trivial B", "bootbench B", "trivial power-off s", "first workload s", "ratio", "goal"
    );
    let _ = writeln!(
        out,
        "  {:<11} {:>12} {:>12}  {:>10} {:>10}  {:>10} {:>10}",
        "", "", "", "min", "median", "min", "median"
    );
    for f in figures {
        let (t, b) = (guest(&f.trivial), guest(&f.bootbench));
        let ratio = f.ratio();
        let _ = writeln!(
            out,
            "  {:<11} {:>12} {:>12}  {:>10.6} {:>10.6}  {:>10.6} {:>10.6}  {:>6.3}x  {:>5.2}x  {}",
            f.compression.name(),
            f.trivial_bytes,
            f.bootbench_bytes,
            min(&t),
            median(&t),
            min(&b),
            median(&b),
            ratio,
            GOAL_RATIO,
            verdict(ratio)
        );
    }
    let _ = writeln!(out, "  host wall per boot, QEMU start to exit (s):");
    let _ = writeln!(
        out,
        "  {:<11} {:>6}  {:>10} {:>10}  {:>10} {:>10}",
        "compression", "boots", "trivial min", "median", "bootbench min", "median"
    );
    for f in figures {
        let (t, b) = (wall(&f.trivial), wall(&f.bootbench));
        let _ = writeln!(
            out,
            "  {:<11} {:>6}  {:>11.2} {:>10.2}  {:>13.2} {:>10.2}",
            f.compression.name(),
            format!("{}+{}", f.trivial.len(), f.bootbench.len()),
            min(&t),
            median(&t),
            min(&b),
            median(&b)
        );
    }
    match faster(figures) {
        Some(c) => {
            let default = boot_image::DEFAULT_COMPRESSION;
            let agrees = if c == default { "as the default" } else { "NOT the default" };
            let _ = writeln!(out, "  lower ratio (faster start): {c}, {agrees} ({default})");
        }
        None => {
            let _ = writeln!(out, "  lower ratio (faster start): no data");
        }
    }
    out
}

/// The trivial init's boot time from a boot's console text: its event's
/// `boottime=`, and only if the kernel then powered off cleanly.
pub fn trivial_boottime(console_log: &str) -> Result<f64, String> {
    let text = console_log
        .lines()
        .find_map(|l| match parse_line(l) {
            Some(Line::Event { name, text }) if name == TRIVIAL_INIT_EVENT => Some(text),
            _ => None,
        })
        .ok_or_else(|| format!("no '{TRIVIAL_INIT_EVENT}' event on the console"))?;
    let value = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("boottime="))
        .ok_or_else(|| format!("the '{TRIVIAL_INIT_EVENT}' event has no boottime= ('{text}')"))?;
    let s: f64 = value.parse().map_err(|_| format!("bad boottime '{value}' in the '{TRIVIAL_INIT_EVENT}' event"))?;
    if !(s > 0.0 && s.is_finite()) {
        return Err(format!("implausible boottime {value} in the '{TRIVIAL_INIT_EVENT}' event"));
    }
    if !console_log.lines().any(|l| l.contains(POWER_DOWN_LINE)) {
        return Err(format!("the trivial init printed its event, but the kernel never said '{POWER_DOWN_LINE}'"));
    }
    Ok(s)
}

/// The figures of a trivial-init boot, judged by its console text.
pub fn trivial_figures(b: &BootRecord) -> Result<StartupBoot, String> {
    // No result stream is expected, so `incomplete` is its normal verdict;
    // anything the kernel or a timeout caused is not.
    if matches!(
        b.boot.classification.as_str(),
        "panic" | "boot_failure" | "init_panic" | "oops" | "hang" | "qemu_failure"
    ) {
        return Err(format!(
            "trivial boot is {}: {}",
            b.boot.classification,
            b.boot.detail.clone().unwrap_or_default()
        ));
    }
    let guest_s = trivial_boottime(&b.console_log).map_err(|e| format!("trivial boot: {e}"))?;
    Ok(StartupBoot { guest_s, wall_s: b.boot.wall_s })
}

/// The figures of a bootbench boot: an `ok` boot's first workload start.
pub fn bootbench_figures(b: &BootRecord) -> Result<StartupBoot, String> {
    if b.boot.classification != "ok" {
        return Err(format!(
            "bootbench boot is {}: {}",
            b.boot.classification,
            b.boot.detail.clone().unwrap_or_default()
        ));
    }
    let doc = b.result.as_ref().ok_or("bootbench boot has no result")?;
    let guest_s = doc.timings.first_workload_s.ok_or("bootbench boot: no workload started")?;
    Ok(StartupBoot { guest_s, wall_s: b.boot.wall_s })
}

/// A trivial image written to disk.
#[derive(Debug, Clone)]
pub struct TrivialImage {
    /// Where it is.
    pub path: PathBuf,
    /// Size of the file.
    pub bytes: u64,
    /// Size of the trivial init binary.
    pub init_bytes: u64,
}

/// Packs `init` (a static trivial init) as /init, with /dev/console, into
/// `output`.
pub fn pack_trivial_image(init: &Path, compression: Compression, output: &Path) -> anyhow::Result<TrivialImage> {
    init_build::check_static(init)?;
    let init_bytes = std::fs::metadata(init).with_context(|| format!("cannot read {}", init.display()))?.len();
    let mut img = Initramfs::new();
    img.add_file_from("init", 0o755, init)?;
    img.add_dir("dev", 0o755)?;
    // As in bootbench's image: the kernel then opens fds 0-2 on the console
    // before /init runs.
    img.add_char_device("dev/console", 0o600, 5, 1)?;
    let bytes = img.write_file(output, compression)?;
    Ok(TrivialImage { path: output.to_path_buf(), bytes, init_bytes })
}

/// Builds the trivial init for `arch` and packs it into `output`.
pub fn build_trivial_image(arch: Arch, compression: Compression, output: &Path) -> anyhow::Result<TrivialImage> {
    let init = init_build::build_trivial(arch.profile().init_target)?;
    pack_trivial_image(&init, compression, output)
}

/// What the comparison boots.
#[derive(Debug, Clone)]
pub struct StartupInputs {
    /// Guest arch.
    pub arch: Arch,
    /// The run options every boot starts from: icount, one vCPU, the
    /// kernel (`--kernel`, or none for the cached default) and any
    /// `--append`; the comparison sets the kernel and `--initramfs`.
    pub run: RunOptions,
    /// The suite packed in bootbench's image.
    pub suite: Suite,
    /// Rounds; each boots both images in every compression.
    pub rounds: u32,
    /// Where the images go.
    pub work_dir: PathBuf,
    /// Keep every boot's record here, when given.
    pub output: Option<PathBuf>,
}

/// The one kernel of `run`, resolved once so every boot uses the same file.
fn the_kernel(run: &RunOptions, arch: Arch) -> anyhow::Result<KernelUnderTest> {
    let mut kernels = resolve_kernels(run, arch)?;
    if kernels.len() != 1 {
        bail!("the start-up comparison boots one kernel; {} were given", kernels.len());
    }
    Ok(kernels.remove(0))
}

/// The modules `bootbench run` packs for its results port, and whether a
/// port is there (as `bootbench run` decides it for its own image).
fn port_modules(k: &KernelUnderTest) -> (Vec<String>, bool) {
    match (k.virtio_console(), &k.modules_dir) {
        (Some('y'), _) => (Vec::new(), true),
        (Some('m'), Some(_)) => (RESULT_PORT_MODULES.iter().map(|s| s.to_string()).collect(), true),
        _ => (Vec::new(), false),
    }
}

/// Boots `image` once with `run` and returns its record.
fn boot_once(run: &RunOptions, image: &Path) -> anyhow::Result<BootRecord> {
    let mut opts = run.clone();
    opts.initramfs = Some(image.to_path_buf());
    opts.boots = 1;
    opts.output = None;
    let mut file = run_boots(&opts)?;
    file.boots.pop().with_context(|| format!("no boot of {} was recorded", image.display()))
}

/// Runs the comparison: the report, and whether every boot gave its figure.
pub fn compare(inputs: &StartupInputs) -> anyhow::Result<(String, bool)> {
    if inputs.rounds == 0 {
        bail!("the start-up comparison needs at least one round");
    }
    let arch = inputs.arch;
    let k = the_kernel(&inputs.run, arch)?;
    let (modules, port) = port_modules(&k);
    let mut run = inputs.run.clone();
    run.kernels = vec![k.image.clone()];
    run.no_port = !port;

    let trivial_init = init_build::build_trivial(arch.profile().init_target)?;
    let (compressions, skipped) = compressions_for(k.config.as_deref());
    let mut figures = Vec::new();
    let mut images = Vec::new();
    for compression in compressions {
        let spec = ImageSpec {
            arch,
            suite: inputs.suite.clone(),
            modules: modules.clone(),
            early_modules: Vec::new(),
            modules_dir: k.modules_dir.clone(),
            init: None,
            compression,
        };
        let bb = boot_image::build(&spec, &inputs.work_dir.join(format!("bootbench.cpio{}", compression.extension())))?;
        let tr = pack_trivial_image(
            &trivial_init,
            compression,
            &inputs.work_dir.join(format!("trivial.cpio{}", compression.extension())),
        )?;
        log::info!(
            "{compression} images: bootbench {} bytes (init {}), trivial {} bytes (init {})",
            bb.bytes,
            bb.init_bytes,
            tr.bytes,
            tr.init_bytes
        );
        figures.push(CompressionFigures {
            compression,
            trivial_bytes: tr.bytes,
            bootbench_bytes: bb.bytes,
            trivial: Vec::new(),
            bootbench: Vec::new(),
        });
        images.push((bb.path, tr.path));
    }

    let mut all_ok = true;
    let mut file = ResultsFile::default();
    for round in 0..inputs.rounds {
        for (f, (bb, tr)) in figures.iter_mut().zip(&images) {
            // A B A B ...: bootbench, then the trivial init, each compression.
            for trivial in [false, true] {
                let which = if trivial { "trivial" } else { "bootbench" };
                log::info!("start-up round {} of {}, {} {which}", round + 1, inputs.rounds, f.compression);
                let record = boot_once(&run, if trivial { tr } else { bb })?;
                let got = if trivial { trivial_figures(&record) } else { bootbench_figures(&record) };
                match got {
                    Ok(b) if trivial => {
                        log::info!(
                            "trivial init at {:.6} s, then a clean power-off (no result stream is expected)",
                            b.guest_s
                        );
                        f.trivial.push(b);
                    }
                    Ok(b) => f.bootbench.push(b),
                    Err(why) => {
                        all_ok = false;
                        log::info!("{} {why}", f.compression);
                    }
                }
                file.boots.push(record);
            }
        }
    }
    if let Some(dir) = &inputs.output {
        let path = dir.join("overhead-startup.json");
        file.write(&path)?;
        log::info!("wrote {}", path.display());
    }
    let what = format!(
        "clock {}, {} vCPU, {} round(s) interleaved, kernel {}",
        inputs.run.clock,
        inputs.run.smp(),
        inputs.rounds,
        k.image.display()
    );
    let mut report = render(&what, &figures);
    if let Some(note) = skipped {
        let _ = writeln!(report, "  {note}");
    }
    Ok((report, all_ok))
}

/// The compressions to compare for a kernel with the config at `config`,
/// and why any was left out: one the config does not build a decompressor
/// for (an unknown config is tried, and a failed boot says so).
fn compressions_for(config: Option<&Path>) -> (Vec<Compression>, Option<String>) {
    let text = config.and_then(|p| std::fs::read_to_string(p).ok());
    let (kept, left): (Vec<Compression>, Vec<Compression>) =
        COMPRESSIONS.into_iter().partition(|c| boot_image::config_unpacks(text.as_deref(), *c));
    if left.is_empty() {
        return (kept, None);
    }
    let names: Vec<&str> = left.iter().map(|c| c.name()).collect();
    let path = config.map(|p| p.display().to_string()).unwrap_or_default();
    (kept, Some(format!("{} left out: {path} does not build its decompressor in (CONFIG_RD_*)", names.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boots(guest: &[f64]) -> Vec<StartupBoot> {
        guest.iter().map(|&g| StartupBoot { guest_s: g, wall_s: 10.0 + g }).collect()
    }

    fn canned() -> Vec<CompressionFigures> {
        vec![
            CompressionFigures {
                compression: Compression::Gzip,
                trivial_bytes: 600_000,
                bootbench_bytes: 3_400_000,
                trivial: boots(&[1.7432, 1.7432, 1.7440]),
                bootbench: boots(&[1.9224, 1.9230, 1.9224]),
            },
            CompressionFigures {
                compression: Compression::Zstd,
                trivial_bytes: 500_000,
                bootbench_bytes: 2_900_000,
                trivial: boots(&[1.7400, 1.7410]),
                bootbench: boots(&[1.8000, 1.8100]),
            },
        ]
    }

    #[test]
    fn zstd_is_compared_unless_the_kernel_config_leaves_it_out() {
        let dir = tempfile::tempdir().unwrap();
        let (with, without) = (dir.path().join("config-a"), dir.path().join("config-b"));
        std::fs::write(&with, "CONFIG_RD_GZIP=y\nCONFIG_RD_ZSTD=y\n").unwrap();
        std::fs::write(&without, "CONFIG_RD_GZIP=y\n# CONFIG_RD_ZSTD is not set\n").unwrap();
        assert_eq!(compressions_for(Some(&with)), (COMPRESSIONS.to_vec(), None));
        assert_eq!(compressions_for(None), (COMPRESSIONS.to_vec(), None), "unknown config: tried");
        let (kept, note) = compressions_for(Some(&without));
        assert_eq!(kept, [Compression::None, Compression::Gzip]);
        let note = note.unwrap();
        assert!(note.starts_with("zstd left out: ") && note.contains("config-b"), "{note}");
    }

    #[test]
    fn median_and_min() {
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(min(&[3.0, 1.0, 2.0]), 1.0);
        assert!(min(&[]).is_nan());
    }

    #[test]
    fn the_ratio_is_of_medians_and_judged_against_the_goal() {
        let f = canned();
        assert!((f[0].ratio() - 1.9224 / 1.7432).abs() < 1e-12, "{}", f[0].ratio());
        assert!((f[1].ratio() - 1.805 / 1.7405).abs() < 1e-12, "{}", f[1].ratio());
        assert_eq!(verdict(f[0].ratio()), "over goal");
        assert_eq!(verdict(1.05), "meets goal");
        assert_eq!(verdict(1.0501), "over goal");
        assert_eq!(verdict(f64::NAN), "no data");
        assert_eq!(faster(&f), Some(Compression::Zstd));
        let mut empty = f[1].clone();
        empty.trivial.clear();
        assert!(empty.ratio().is_nan(), "no trivial boot: no ratio");
        assert_eq!(faster(&[f[0].clone(), empty]), Some(Compression::Gzip), "a compression without data never wins");
    }

    #[test]
    fn the_table_shows_each_compression_with_its_figures() {
        let out = render("clock icount, 1 vCPU", &canned());
        let gzip = out.lines().find(|l| l.trim_start().starts_with("gzip ")).expect(&out);
        for want in ["600000", "3400000", "1.743200", "1.922400", "1.103x", "1.05x", "over goal"] {
            assert!(gzip.contains(want), "'{want}' missing from: {gzip}\n{out}");
        }
        let zstd = out.lines().find(|l| l.trim_start().starts_with("zstd ")).expect(&out);
        assert!(zstd.contains("1.037x") && zstd.contains("meets goal"), "{zstd}");
        assert!(out.contains("lower ratio (faster start): zstd, NOT the default (none)"), "{out}");
        assert!(out.contains("3+3") && out.contains("2+2"), "boot counts per compression: {out}");
        assert!(out.contains("11.74"), "host wall of the trivial boots: {out}");
    }

    const TRIVIAL_CONSOLE: &str = "[    1.2] Run /init as init process\r\n\
        @@BOOTBENCH EVENT trivial-init boottime=1.743200\r\n\
        [    1.8] reboot: Power down\r\n";

    #[test]
    fn the_trivial_boot_time_comes_from_its_event_and_needs_a_clean_power_off() {
        assert_eq!(trivial_boottime(TRIVIAL_CONSOLE), Ok(1.7432));
        let no_power_off = TRIVIAL_CONSOLE.replace("reboot: Power down", "reboot: Restarting system");
        assert!(trivial_boottime(&no_power_off).unwrap_err().contains("Power down"));
        let no_event = TRIVIAL_CONSOLE.replace("trivial-init", "hello");
        assert!(trivial_boottime(&no_event).unwrap_err().contains("no 'trivial-init' event"));
        let bad = TRIVIAL_CONSOLE.replace("1.743200", "x");
        assert!(trivial_boottime(&bad).unwrap_err().contains("bad boottime 'x'"));
        let zero = TRIVIAL_CONSOLE.replace("1.743200", "0.000000");
        assert!(trivial_boottime(&zero).unwrap_err().contains("implausible"));
    }

    #[test]
    fn boot_records_give_figures_only_when_they_should() {
        let mut t = BootRecord::default();
        t.boot.classification = "incomplete".into();
        t.boot.wall_s = 5.0;
        t.console_log = TRIVIAL_CONSOLE.into();
        assert_eq!(trivial_figures(&t), Ok(StartupBoot { guest_s: 1.7432, wall_s: 5.0 }));
        t.boot.classification = "panic".into();
        assert!(trivial_figures(&t).unwrap_err().contains("trivial boot is panic"));

        let mut b = BootRecord::default();
        b.boot.classification = "ok".into();
        assert!(bootbench_figures(&b).unwrap_err().contains("no result"));
        let mut doc = loads::runner::begin_document("t", None, None);
        b.result = Some(doc.clone());
        assert!(bootbench_figures(&b).unwrap_err().contains("no workload started"));
        doc.timings.first_workload_s = Some(1.9224);
        b.result = Some(doc);
        b.boot.wall_s = 20.0;
        assert_eq!(bootbench_figures(&b), Ok(StartupBoot { guest_s: 1.9224, wall_s: 20.0 }));
        b.boot.classification = "hang".into();
        assert!(bootbench_figures(&b).unwrap_err().contains("bootbench boot is hang"));
    }
}
