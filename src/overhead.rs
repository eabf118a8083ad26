//! Measures what the appliance itself costs and how
//! steady it measures: image sizes, the guest's time from kernel start to
//! init and from init to the first workload, PID 1's wake-ups and other
//! userspace tasks while measuring, the host's wall time for one
//! `bootbench run`, and the fork rate's spread in real-time and icount mode.
//! It prints figures and judges nothing, except bootbench's start-up against
//! a trivial init ([`startup`]), which has a goal. It drives the same
//! library code as `bootbench image` and `bootbench run`, never a
//! shelled-out CLI.

pub mod startup;

use crate::boot::image::{self as boot_image, ImageSpec, RESULT_PORT_MODULES};
use crate::boot::options::RunOptions;
use crate::boot::session::run_boots;
use crate::kernel::{self, DebianArch};
use crate::results::{BootRecord, ResultsFile};
use crate::suite_choice::{apply_overrides, load_suite};
use anyhow::{bail, Context};
use clap::Parser;
use image::Compression;
use qemu::Arch;
use statrs::statistics::Statistics;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `bootbench overhead`.
#[derive(Debug, Clone, clap::Args)]
pub struct OverheadOptions {
    /// Kernel image to boot (default: the cached Debian kernel for --arch).
    #[arg(long)]
    pub kernel: Option<PathBuf>,
    /// The kernel's lib/modules/RELEASE tree, for the image-size figures of
    /// a --kernel that is not from the cache.
    #[arg(long)]
    pub modules_dir: Option<PathBuf>,
    /// Guest arch: x86_64, i386, ppc64le or ppc64.
    #[arg(long, default_value = "x86_64")]
    pub arch: String,
    /// Boots per clock mode; each is one whole `bootbench run`.
    #[arg(long, default_value_t = 1)]
    pub boots: u32,
    /// real, icount[:SHIFT], or both (real, then icount with shift 0).
    #[arg(long, default_value = "real")]
    pub clock: String,
    /// Measured fork iterations per boot.
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// Warmup iterations per boot.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Forks per iteration (default: the quick suite's).
    #[arg(long)]
    pub fork_count: Option<u64>,
    /// Rounds of the start-up comparison against a trivial init (each
    /// boots bootbench's image and the trivial one, gzip and zstd, under
    /// icount with 1 vCPU); 0 skips it.
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// Keep each clock mode's results file in this directory.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The kernel cache the default kernel comes from. Not a flag: the
    /// command line fills it from `$BOOTBENCH_CACHE` or the config file's
    /// kernel.cache; `None` is [`kernel::default_cache_root`].
    #[arg(skip)]
    pub kernel_cache: Option<PathBuf>,
}

/// Lets clap fill every `bootbench run` option this command does not set
/// with the same defaults a user gets.
#[derive(Debug, Parser)]
struct RunOnly {
    #[command(flatten)]
    run: RunOptions,
}

/// Sizes of one image layout in every compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageSizes {
    /// Uncompressed newc archive.
    pub raw: u64,
    /// gzip-compressed.
    pub gzip: u64,
    /// zstd-compressed.
    pub zstd: u64,
    /// The init binary in it.
    pub init: u64,
}

/// Builds `spec` in every compression into `dir` and returns the sizes.
pub fn image_sizes(spec: &ImageSpec, dir: &Path, stem: &str) -> anyhow::Result<ImageSizes> {
    let mut sizes = ImageSizes { raw: 0, gzip: 0, zstd: 0, init: 0 };
    for (compression, slot) in [(Compression::None, 0), (Compression::Gzip, 1), (Compression::Zstd, 2)] {
        let spec = ImageSpec { compression, ..spec.clone() };
        let built = boot_image::build(&spec, &dir.join(format!("{stem}-{compression}.cpio")))?;
        sizes.init = built.init_bytes;
        match slot {
            0 => sizes.raw = built.bytes,
            1 => sizes.gzip = built.bytes,
            _ => sizes.zstd = built.bytes,
        }
    }
    Ok(sizes)
}

/// The figures of one boot.
#[derive(Debug, Clone, PartialEq)]
pub struct BootFigures {
    /// Guest CLOCK_BOOTTIME when the init started, in s.
    pub init_start_s: f64,
    /// Init start to the first workload's start, in ms of guest time.
    pub init_to_workload_ms: f64,
    /// PID 1's context switches per second of measured time.
    pub pid1_switches_per_s: f64,
    /// The most other userspace tasks seen while measuring.
    pub other_tasks: u32,
    /// Host wall time from QEMU's start to its exit, in s.
    pub qemu_wall_s: f64,
    /// Host wall time of the whole `bootbench run` (image and boot), in s.
    pub run_wall_s: f64,
    /// fork_rate of each measured iteration, forks/s.
    pub fork_rates: Vec<f64>,
}

impl BootFigures {
    /// The figures of an `ok` boot with a complete result, else why not.
    pub fn from_record(b: &BootRecord, run_wall_s: f64) -> Result<BootFigures, String> {
        if b.boot.classification != "ok" {
            return Err(format!(
                "boot {} is {}: {}",
                b.boot.index,
                b.boot.classification,
                b.boot.detail.clone().unwrap_or_default()
            ));
        }
        let doc = b.result.as_ref().ok_or_else(|| format!("boot {} has no result", b.boot.index))?;
        let fork = doc
            .workloads
            .iter()
            .find(|w| w.name == "fork")
            .ok_or_else(|| format!("boot {}: no fork workload in the result", b.boot.index))?;
        let quiet = fork.quiet.as_ref().ok_or_else(|| format!("boot {}: no quiet observation", b.boot.index))?;
        let first =
            doc.timings.first_workload_s.ok_or_else(|| format!("boot {}: no workload started", b.boot.index))?;
        let switches = (quiet.pid1_voluntary_switches + quiet.pid1_involuntary_switches) as f64;
        Ok(BootFigures {
            init_start_s: doc.timings.init_start_s,
            init_to_workload_ms: (first - doc.timings.init_start_s) * 1e3,
            pid1_switches_per_s: if quiet.measured_s > 0.0 { switches / quiet.measured_s } else { f64::NAN },
            other_tasks: quiet.other_userspace_tasks,
            qemu_wall_s: b.boot.wall_s,
            run_wall_s,
            fork_rates: fork.iterations.iter().filter_map(|it| it.metrics.get("fork_rate")).map(|m| m.value).collect(),
        })
    }

    /// Coefficient of variation of the fork rate across iterations, in %.
    pub fn fork_cv_pct(&self) -> f64 {
        cv_pct(&self.fork_rates)
    }
}

/// Sample coefficient of variation in %, NaN below two values.
pub fn cv_pct(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return f64::NAN;
    }
    100.0 * values.std_dev() / values.mean().abs()
}

/// The clock modes `--clock` asks for.
fn clocks(arg: &str) -> anyhow::Result<Vec<String>> {
    let modes = match arg {
        "both" => vec!["real".to_string(), "icount".to_string()],
        other => vec![other.to_string()],
    };
    for m in &modes {
        m.parse::<qemu::Clock>().with_context(|| format!("bad --clock '{arg}' (real, icount[:SHIFT] or both)"))?;
    }
    Ok(modes)
}

/// The image spec `bootbench run` would build for this suite.
fn image_spec(arch: Arch, suite: loads::suite::Suite, modules_dir: Option<PathBuf>) -> ImageSpec {
    let modules = match modules_dir {
        Some(_) => RESULT_PORT_MODULES.iter().map(|s| s.to_string()).collect(),
        None => Vec::new(),
    };
    ImageSpec {
        arch,
        suite,
        modules,
        early_modules: Vec::new(),
        modules_dir,
        init: None,
        compression: Compression::Gzip,
    }
}

fn row(out: &mut String, name: &str, values: &[f64], unit: &str, goal: &str) {
    let (mean, min, max) = if values.is_empty() {
        (f64::NAN, f64::NAN, f64::NAN)
    } else {
        (
            values.iter().mean(),
            values.iter().copied().fold(f64::INFINITY, f64::min),
            values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    };
    let _ = writeln!(out, "  {name:<38} {mean:>11.3} {min:>11.3} {max:>11.3}  {unit:<14} {goal}");
}

/// Renders the figures of one clock mode's boots.
pub fn render_mode(clock: &str, accel: &str, boots: &[BootFigures]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nclock {clock} (accel {accel}), {} boot(s):", boots.len());
    let _ = writeln!(out, "  {:<38} {:>11} {:>11} {:>11}  {:<14} goal", "figure", "mean", "min", "max", "unit");
    let col = |f: fn(&BootFigures) -> f64| boots.iter().map(f).collect::<Vec<f64>>();
    row(&mut out, "kernel start to init start (guest)", &col(|b| b.init_start_s), "s", "");
    row(&mut out, "init start to first workload (guest)", &col(|b| b.init_to_workload_ms), "ms", "<= 20 ms");
    row(&mut out, "PID 1 context switches, measured phase", &col(|b| b.pid1_switches_per_s), "per s", "<= 1/s");
    row(&mut out, "other userspace tasks, measured phase", &col(|b| f64::from(b.other_tasks)), "tasks", "0");
    row(&mut out, "host wall, QEMU start to exit", &col(|b| b.qemu_wall_s), "s", "");
    row(&mut out, "host wall, one `bootbench run`", &col(|b| b.run_wall_s), "s", "");
    row(&mut out, "fork_rate, mean of iterations", &col(|b| b.fork_rates.iter().mean()), "forks/s", "");
    row(&mut out, "fork_rate CV across iterations", &col(BootFigures::fork_cv_pct), "%", "");
    if boots.len() > 1 {
        let means = col(|b| b.fork_rates.iter().mean());
        let _ = writeln!(
            out,
            "  {:<38} {:>11.3} {:>11} {:>11}  {:<14}",
            "fork_rate CV across boots",
            cv_pct(&means),
            "",
            "",
            "%"
        );
    }
    out
}

/// The `bootbench run` flags every boot of `args` shares: the kernel, its
/// modules and the fork count.
fn shared_run_argv(args: &OverheadOptions) -> Vec<String> {
    let mut argv = Vec::new();
    if let Some(k) = &args.kernel {
        argv.push("--kernel".into());
        argv.push(k.display().to_string());
    }
    if let Some(d) = &args.modules_dir {
        argv.push("--modules-dir".into());
        argv.push(d.display().to_string());
    }
    if let Some(n) = args.fork_count {
        argv.push("--append".into());
        argv.push(format!("bootbench.fork.count={n}"));
    }
    argv
}

/// Measures the appliance's overhead as `args` asks: the report, and
/// whether every boot gave its figures.
pub fn measure(args: &OverheadOptions) -> anyhow::Result<(String, bool)> {
    let arch: Arch = args.arch.parse()?;
    if args.boots == 0 || args.iterations < 2 {
        bail!("--boots must be at least 1 and --iterations at least 2 (a CV needs two values)");
    }
    let modes = clocks(&args.clock)?;
    if let Some(k) = &args.kernel {
        // Before any image is built: a bad --kernel fails at once, named.
        qemu::kernel_image::check_kernel(k, arch).context("bad --kernel")?;
    }
    let suite = apply_overrides(
        load_suite("quick", std::env::consts::ARCH)?,
        Some(args.iterations),
        Some(args.warmup),
        Some("fork"),
    )?;
    let modules_dir = match (&args.modules_dir, &args.kernel) {
        (Some(d), _) => Some(d.clone()),
        (None, Some(_)) => None,
        (None, None) => {
            let debian = DebianArch::for_target(arch)?;
            let root = args.kernel_cache.clone().unwrap_or_else(kernel::default_cache_root);
            let k = match kernel::cached(debian, &root)? {
                Some(k) => k,
                None => kernel::fetch(debian, false, &root)?,
            };
            Some(k.modules_dir())
        }
    };
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let scratch =
        tempfile::Builder::new().prefix("bootbench-overhead-").tempdir().context("cannot create a temp dir")?;

    let mut report = String::new();
    let bare = image_sizes(&image_spec(arch, suite.clone(), None), scratch.path(), "bare")?;
    let _ = writeln!(
        report,
        "bootbench overhead: arch {arch}, quick suite with fork only, {} iterations + {} warmup",
        args.iterations, args.warmup
    );
    let _ = writeln!(report, "\nimage sizes (bytes):       {:>10} {:>10} {:>10}", "raw", "gzip", "zstd");
    let _ = writeln!(report, "  init + suite              {:>10} {:>10} {:>10}", bare.raw, bare.gzip, bare.zstd);
    if modules_dir.is_some() {
        let full = image_sizes(&image_spec(arch, suite.clone(), modules_dir.clone()), scratch.path(), "port")?;
        let _ = writeln!(
            report,
            "  + results-port modules    {:>10} {:>10} {:>10}   (what `bootbench run` boots: {})",
            full.raw,
            full.gzip,
            full.zstd,
            RESULT_PORT_MODULES.join(", ")
        );
    }
    let _ = writeln!(report, "  init binary               {:>10}", bare.init);

    let mut all_ok = true;
    if args.repeats > 0 {
        let mut argv: Vec<String> = vec!["run".into(), "--clock".into(), "icount".into(), "--smp".into(), "1".into()];
        argv.extend(["--arch".into(), args.arch.clone()]);
        argv.extend(shared_run_argv(args));
        let inputs = startup::StartupInputs {
            arch,
            run: RunOptions {
                kernel_cache: args.kernel_cache.clone(),
                ..RunOnly::try_parse_from(&argv).context("internal: run options")?.run
            },
            suite: suite.clone(),
            rounds: args.repeats,
            work_dir: scratch.path().to_path_buf(),
            output: args.output.clone(),
        };
        let (text, ok) = startup::compare(&inputs)?;
        all_ok &= ok;
        report.push_str(&text);
    }
    for mode in &modes {
        let mut argv: Vec<String> =
            vec!["run".into(), "--clock".into(), mode.clone(), "--arch".into(), args.arch.clone()];
        argv.extend(["--iterations".into(), args.iterations.to_string(), "--warmup".into(), args.warmup.to_string()]);
        argv.extend(["--workloads".into(), "fork".into()]);
        argv.extend(shared_run_argv(args));
        let run_args = RunOptions {
            kernel_cache: args.kernel_cache.clone(),
            ..RunOnly::try_parse_from(&argv).context("internal: run options")?.run
        };
        let mut figures = Vec::new();
        let mut file = ResultsFile::default();
        let mut accel = String::new();
        for i in 0..args.boots {
            log::info!("clock {mode}, boot {} of {}", i + 1, args.boots);
            let t0 = Instant::now();
            let one = run_boots(&run_args)?;
            let wall = t0.elapsed().as_secs_f64();
            for b in one.boots {
                accel = b.machine.accel.clone();
                match BootFigures::from_record(&b, wall) {
                    Ok(f) => figures.push(f),
                    Err(why) => {
                        all_ok = false;
                        log::info!("clock {mode}: {why}");
                    }
                }
                file.boots.push(b);
            }
        }
        if let Some(dir) = &args.output {
            let path = dir.join(format!("overhead-{}.json", mode.replace(':', "-")));
            file.write(&path)?;
            log::info!("wrote {}", path.display());
        }
        report.push_str(&render_mode(mode, &accel, &figures));
    }
    Ok((report, all_ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_modes_and_cv() {
        assert_eq!(clocks("both").unwrap(), ["real", "icount"]);
        assert_eq!(clocks("icount:3").unwrap(), ["icount:3"]);
        let e = clocks("fast").unwrap_err();
        assert!(format!("{e:#}").contains("bad --clock 'fast'"), "{e:#}");
        assert!(cv_pct(&[1.0]).is_nan());
        assert!((cv_pct(&[9.0, 11.0]) - 100.0 * 2f64.sqrt() / 10.0).abs() < 1e-9);
    }

    #[test]
    fn run_options_get_the_cli_defaults() {
        let r = RunOnly::try_parse_from(["run", "--clock", "icount", "--iterations", "3"]).unwrap().run;
        assert_eq!((r.clock.as_str(), r.iterations, r.smp), ("icount", Some(3), None));
        assert_eq!(r.smp(), crate::boot::options::ICOUNT_SMP, "one vCPU by default under icount");
        let real = RunOnly::try_parse_from(["run"]).unwrap().run;
        assert_eq!(real.smp(), crate::boot::options::DEFAULT_SMP);
        let accel = RunOnly::try_parse_from(["run", "--accel", "icount:3"]).unwrap().run;
        assert_eq!(accel.smp(), crate::boot::options::ICOUNT_SMP, "icount asked through --accel");
        let given = RunOnly::try_parse_from(["run", "--clock", "icount", "--smp", "2"]).unwrap().run;
        assert_eq!(given.smp(), 2, "a given --smp wins");
    }

    #[test]
    fn a_failed_boot_has_no_figures() {
        let mut b = BootRecord::default();
        b.boot.classification = "hang".into();
        b.boot.detail = Some("no hello".into());
        assert!(BootFigures::from_record(&b, 1.0).unwrap_err().contains("hang: no hello"));
        b.boot.classification = "ok".into();
        assert!(BootFigures::from_record(&b, 1.0).unwrap_err().contains("no result"));
    }
}
