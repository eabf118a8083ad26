//! Results files as KernelCI's KCIDB I/O data (schema 5.3, as the
//! `kcidb-io` package defines it): one checkout and one build per kernel
//! group, and per boot a `bootbench.boot` test, a test per workload and a
//! test per workload metric. Ids derive from what the files hold (the
//! guest's run id, the kernel group), so exporting the same file twice gives
//! the same ids. Owns the mapping and KCIDB's syntax rules; uses only
//! `results`, and never reads or writes a file itself.

pub mod objects;

#[cfg(test)]
mod tests;

use crate::results::{BootRecord, ResultsFile};
use loads::schema::{Better, Metric, RunDocument, WorkloadResult};
use objects::{
    Build, BuildMisc, Checkout, CheckoutMisc, Data, Environment, EnvironmentMisc, HostMisc, MetricMisc, Number, Status,
    Test, TestDetail, TestMisc, Version, WorkloadMisc,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The origin an export names unless told otherwise.
pub const DEFAULT_ORIGIN: &str = "bootbench";

/// The longest `log_excerpt` KCIDB takes, in characters.
const LOG_EXCERPT_MAX: usize = 16384;

/// Errors exporting to KCIDB.
#[derive(Debug, thiserror::Error)]
pub enum KcidbError {
    /// `--origin` is not a KCIDB origin.
    #[error("origin '{0}' is not a KCIDB origin: it must be one or more of a-z, 0-9 and _")]
    Origin(String),
    /// `--commit` is not a full git commit hash.
    #[error("commit '{0}' is not a full git commit hash (40 hex digits)")]
    Commit(String),
    /// `--commit` names one commit for several kernels.
    #[error("--commit names one commit, but the results hold {kernels} different kernel images; export each kernel's files on their own")]
    CommitForSeveralKernels {
        /// How many distinct kernel images.
        kernels: usize,
    },
    /// `--commit` disagrees with the commit the file records.
    #[error("{file}: --commit {commit} is not the commit the file records for kernel group '{group}' ({recorded})")]
    CommitDisagrees {
        /// The file.
        file: String,
        /// The group's label, or its image's hash when it has none.
        group: String,
        /// The commit given.
        commit: String,
        /// The (short) commit the file records.
        recorded: String,
    },
    /// `--git-url` is not a URL KCIDB takes.
    #[error("git URL '{0}' is not one KCIDB takes: it must start with https:// and hold no whitespace")]
    GitUrl(String),
    /// `--tree-name` holds a NUL.
    #[error("tree name {0:?} holds a NUL character")]
    TreeName(String),
    /// The results hold no boot.
    #[error("the results files hold no boot to export")]
    NoBoots,
}

/// What an export cannot learn from the results files, and whose data it
/// is. Library callers build it; `bootbench export` takes it as flags.
#[derive(Debug, Clone, clap::Args)]
pub struct KcidbOptions {
    /// KCIDB origin: the CI system the data comes from (a-z, 0-9, _); it
    /// starts every id.
    #[arg(long, default_value = DEFAULT_ORIGIN)]
    pub origin: String,
    /// The kernel's full git commit (40 hex digits), when the results do
    /// not record it (they hold at most a short one); only for results of
    /// one kernel image.
    #[arg(long)]
    pub commit: Option<String>,
    /// KCIDB tree name of the kernel's source (e.g. mainline, net-next).
    #[arg(long)]
    pub tree_name: Option<String>,
    /// The kernel's git repository, the shortest https:// URL.
    #[arg(long)]
    pub git_url: Option<String>,
}

impl Default for KcidbOptions {
    fn default() -> Self {
        KcidbOptions { origin: DEFAULT_ORIGIN.into(), commit: None, tree_name: None, git_url: None }
    }
}

/// An export: the KCIDB data, and what the caller should tell the user
/// (a group without a commit, a boot given twice).
#[derive(Debug, Clone)]
pub struct Export {
    /// The data, ready to serialise.
    pub data: Data,
    /// Warnings, each naming the file it is about.
    pub warnings: Vec<String>,
}

/// A results file and what to call it in warnings and in each test's
/// `misc` (its path as the user wrote it).
pub struct NamedResults<'a> {
    /// What to call the file.
    pub name: String,
    /// Its content.
    pub file: &'a ResultsFile,
}

/// Checks an origin against KCIDB's syntax (`^[a-z0-9_]+$`).
pub fn check_origin(origin: &str) -> Result<(), KcidbError> {
    let ok = !origin.is_empty() && origin.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(KcidbError::Origin(origin.into()))
    }
}

/// The KCIDB data of the boots in `files`, in file and boot order.
pub fn export(files: &[NamedResults<'_>], options: &KcidbOptions) -> Result<Export, KcidbError> {
    check_origin(&options.origin)?;
    let commit = options.commit.as_deref().map(check_commit).transpose()?;
    if let Some(url) = &options.git_url {
        if !url.starts_with("https://") || url.chars().any(|c| c.is_whitespace() || c == '\0') {
            return Err(KcidbError::GitUrl(url.clone()));
        }
    }
    if let Some(t) = options.tree_name.as_deref().filter(|t| t.contains('\0')) {
        return Err(KcidbError::TreeName(t.into()));
    }
    let boots: Vec<(&str, &BootRecord)> =
        files.iter().flat_map(|f| f.file.boots.iter().map(move |b| (f.name.as_str(), b))).collect();
    if boots.is_empty() {
        return Err(KcidbError::NoBoots);
    }
    if commit.is_some() {
        let kernels: BTreeSet<&str> = boots.iter().map(|(_, b)| b.kernel.image_sha256.as_str()).collect();
        if kernels.len() > 1 {
            return Err(KcidbError::CommitForSeveralKernels { kernels: kernels.len() });
        }
    }
    let origin = options.origin.as_str();
    let mut data = Data {
        version: Version { major: objects::SCHEMA_MAJOR, minor: objects::SCHEMA_MINOR },
        checkouts: Vec::new(),
        builds: Vec::new(),
        tests: Vec::new(),
    };
    let mut warnings = Vec::new();
    let mut groups: BTreeMap<(String, String, String), String> = BTreeMap::new();
    let mut boots_seen: BTreeMap<String, &str> = BTreeMap::new();
    for (file, record) in boots {
        let key = record.group_key();
        let build_id = match groups.get(&key) {
            Some(id) => id.clone(),
            None => {
                let group = group_id(&key);
                let (checkout, warning) = checkout_of(origin, &group, file, record, options, commit.as_deref())?;
                warnings.extend(warning);
                let build = build_of(origin, &group, &checkout.id, record);
                groups.insert(key, build.id.clone());
                let id = build.id.clone();
                data.checkouts.push(checkout);
                data.builds.push(build);
                id
            }
        };
        let boot_key = boot_key(record);
        if let Some(first) = boots_seen.get(&boot_key) {
            warnings.push(format!(
                "{file}: boot #{} (run {boot_key}) was already exported from {first}; left out",
                record.boot.index
            ));
            continue;
        }
        boots_seen.insert(boot_key.clone(), file);
        data.tests.extend(tests_of(origin, &build_id, &boot_key, file, record));
    }
    Ok(Export { data, warnings })
}

/// A full commit hash, lowercased, or why it is not one.
fn check_commit(commit: &str) -> Result<String, KcidbError> {
    let c = commit.to_ascii_lowercase();
    if c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(c)
    } else {
        Err(KcidbError::Commit(commit.into()))
    }
}

/// A kernel group's part of its checkout's and build's ids: the image's
/// hash and a hash of the whole key (cmdline and label too), short.
fn group_id((image, cmdline, label): &(String, String, String)) -> String {
    let mut h = Sha256::new();
    for part in [image, cmdline, label] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let key = hex::encode(h.finalize());
    let image: String = image.chars().filter(char::is_ascii_alphanumeric).take(16).collect();
    format!("{image}-{}", &key[..16])
}

/// What names a boot in its tests' ids: the guest's run id, else the id
/// the host made for a boot without a document, else (files from before
/// that was recorded) a hash of the whole boot record, which is the same
/// every time the same file is read.
fn boot_key(record: &BootRecord) -> String {
    if let Some(doc) = &record.result {
        return doc.run_id.clone();
    }
    if let Some(id) = &record.boot.envelope_id {
        return id.clone();
    }
    let json = serde_json::to_vec(record).unwrap_or_default();
    format!("boot-{}", &hex::encode(Sha256::digest(&json))[..24])
}

/// A commit the results record for a boot's kernel: the short hash a
/// `--kernel` tree's record holds (`tree DIR (git COMMIT)`), or the label
/// bisect gives every boot of a commit (its first 12 hex digits). With
/// where it was found.
fn recorded_commit(record: &BootRecord) -> Option<(String, &'static str)> {
    let from_tree = record.kernel.package.as_deref().filter(|p| p.starts_with("tree ")).and_then(|p| {
        let inside = p.rsplit_once('(')?.1.strip_suffix(')')?;
        inside.split(", ").find_map(|part| part.strip_prefix("git ")).filter(|c| is_hex(c)).map(str::to_string)
    });
    if let Some(c) = from_tree {
        return Some((c, "the kernel tree's record (git rev-parse --short=12 HEAD)"));
    }
    (record.label.len() == 12 && is_hex(&record.label))
        .then(|| (record.label.clone(), "the boot's label, which bisect sets to the commit's first 12 hex digits"))
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The checkout of a kernel group, and the warning when it has no commit.
fn checkout_of(
    origin: &str,
    group: &str,
    file: &str,
    record: &BootRecord,
    options: &KcidbOptions,
    commit: Option<&str>,
) -> Result<(Checkout, Option<String>), KcidbError> {
    let recorded = recorded_commit(record);
    let group_name = if record.label.is_empty() {
        format!("image {}", short(&record.kernel.image_sha256))
    } else {
        record.label.clone()
    };
    if let (Some(c), Some((short_commit, _))) = (commit, &recorded) {
        if !c.starts_with(short_commit.as_str()) {
            return Err(KcidbError::CommitDisagrees {
                file: file.into(),
                group: group_name,
                commit: c.into(),
                recorded: short_commit.clone(),
            });
        }
    }
    let source = record.kernel.package.clone();
    // A full commit the results hold (a LAVA job's `--kernel-commit`).
    let full = record.kernel.commit.as_deref().filter(|c| c.len() == 40 && is_hex(c));
    if let (Some(c), Some(f)) = (commit, full) {
        if c != f {
            return Err(KcidbError::CommitDisagrees {
                file: file.into(),
                group: group_name,
                commit: c.into(),
                recorded: f.into(),
            });
        }
    }
    let commit = commit.or(full);
    let (commit_from, no_commit, warning) = match (commit, &recorded) {
        (Some(_), _) if full.is_some() => (Some("the results (the kernel's recorded commit)".to_string()), None, None),
        (Some(_), _) => (Some("--commit".to_string()), None, None),
        (None, recorded) => {
            let why = match (recorded, &source) {
                (Some((c, _)), _) => format!(
                    "the results record only the short commit {c}; KCIDB takes a full hash (give it with --commit)"
                ),
                (None, Some(s)) => format!("the results record no git commit for this kernel ({s})"),
                (None, None) => "the results record no git commit for this kernel (an image given as it is)".into(),
            };
            let warning = format!("{file}: kernel group '{group_name}': {why}; its checkout has no commit hash");
            (recorded.as_ref().map(|(_, from)| from.to_string()), Some(why), Some(warning))
        }
    };
    // Without a commit the reason names the source too.
    let comment = no_commit.clone().or_else(|| source.clone());
    let checkout = Checkout {
        id: format!("{origin}:checkout-{group}"),
        origin: origin.into(),
        tree_name: options.tree_name.clone(),
        git_repository_url: options.git_url.clone(),
        git_commit_hash: commit.map(str::to_string),
        git_commit_name: recorded.as_ref().map(|(c, _)| c.clone()),
        comment: comment.map(|c| no_nul(&c)),
        // The kernel image exists, so its source did come together.
        valid: Some(true),
        misc: CheckoutMisc { kernel_source: source, commit_from, no_commit },
    };
    Ok((checkout, warning))
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The build of a kernel group.
fn build_of(origin: &str, group: &str, checkout_id: &str, record: &BootRecord) -> Build {
    let k = &record.kernel;
    let arch = record.machine.arch.clone();
    let arch_ok = arch.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    let mut comment = k.package.clone().unwrap_or_else(|| format!("kernel image {}", k.path.display()));
    if let Some(r) = &k.release {
        comment.push_str(&format!(", release {r}"));
    }
    Build {
        checkout_id: checkout_id.into(),
        id: format!("{origin}:build-{group}"),
        origin: origin.into(),
        comment: Some(no_nul(&comment)),
        architecture: (arch_ok && !arch.is_empty()).then_some(arch),
        // KCIDB: PASS, "the test completed and reported the tested code as
        // correct". Read for a build: it produced its output. bootbench made
        // no build, but it booted the image the build produced, so the build
        // did succeed; its tests count only when their build is valid.
        status: Status::Pass,
        misc: BuildMisc {
            image_sha256: k.image_sha256.clone(),
            config_sha256: k.config_sha256.clone(),
            kernel_release: k.release.clone(),
            kernel_source: k.package.clone(),
            cmdline: record.cmdline.clone(),
            label: record.label.clone(),
            status_reason: "not built by bootbench: the status says its image exists and was booted".into(),
        },
    }
}

/// KCIDB's status of a boot, by its classification (see
/// [`crate::results::BootInfo::classification`]). KCIDB's definitions:
/// - FAIL: "the test completed and reported the tested code as faulty."
///   The kernel panicked (`panic`), oopsed and lost the result (`oops`),
///   hung until a timeout (`hang`), or started no init (`boot_failure`,
///   counted against the kernel like a panic: the same image boots on a
///   good kernel). The tested code is the kernel, and it failed.
/// - PASS: "the test completed and reported the tested code as correct."
///   `ok`: the kernel booted, ran the suite, and its result arrived intact.
///   A failure after the result (`late_failure`) is in the comment.
/// - ERROR: "the test didn't complete due to a failure in its code, and
///   the status of the tested code is unknown." The appliance's own init
///   panicked (`init_panic`: bootbench's bug, not the kernel's), or QEMU
///   exited normally without an intact result (`incomplete`): our stream
///   lost it, and nothing says the kernel failed.
/// - MISS: "the test didn't run due to a failure in the test harness, and
///   the status of both the test and the tested code is unknown." QEMU, the
///   harness, failed (`qemu_failure`).
///
/// A classification this bootbench does not know is ERROR too: it says
/// nothing the kernel can be blamed for.
pub fn boot_status(classification: &str) -> Status {
    match classification {
        "ok" => Status::Pass,
        "panic" | "oops" | "hang" | "boot_failure" => Status::Fail,
        "qemu_failure" => Status::Miss,
        _ => Status::Error,
    }
}

/// A workload's status in a complete boot. KCIDB's definitions:
/// - PASS: "the test completed and reported the tested code as correct":
///   the workload ran all its iterations and every part of them succeeded.
/// - ERROR: "the test didn't complete due to a failure in its code, and
///   the status of the tested code is unknown": the workload stopped early
///   (its `error`), a part of an iteration failed, or it measured nothing.
///   Not FAIL, which blames the kernel: a workload's error says what
///   failed (a missing scratch disk, a child killed by the watchdog), not
///   that the kernel is faulty. Never left out either: a failed workload
///   is a test with this status, so it cannot vanish from a report.
/// - MISS: "the test didn't run due to a failure in the test harness, and
///   the status of the tested code is unknown": a workload the suite did
///   not run (`not run: ...`: the watchdog ran out or a stop came first).
pub fn workload_status(w: &WorkloadResult) -> Status {
    if w.error.as_deref().is_some_and(|e| e.starts_with("not run:")) {
        return Status::Miss;
    }
    let failed = w.error.is_some() || w.iterations.is_empty() || w.iterations.iter().any(|i| !i.errors.is_empty());
    if failed {
        Status::Error
    } else {
        Status::Pass
    }
}

/// A metric's status. KCIDB's definitions:
/// - DONE: "the test completed and had not reported the status of the
///   tested code, but, for example, produced a performance measurement
///   result"; its `number` doc adds "Normally DONE should be used, when
///   it's the main and not an auxiliary output". A measurement says how
///   fast, not whether the kernel is right: a completed one is DONE.
/// - ERROR (as for the workload): its workload stopped early, so the
///   value is from fewer iterations than asked for, or a value is not a
///   number (NaN); the test did not complete, and the number (when there
///   is one) is what was measured before it stopped.
fn metric_status(workload_failed: bool, values: &[f64]) -> Status {
    if workload_failed || values.iter().any(|v| !v.is_finite()) {
        Status::Error
    } else {
        Status::Done
    }
}

/// Every test of one boot.
fn tests_of(origin: &str, build_id: &str, boot_key: &str, file: &str, record: &BootRecord) -> Vec<Test> {
    let environment = environment_of(record);
    let doc = record.result.as_ref();
    let start_time = doc.map(|d| d.provenance.started_at.clone()).filter(|t| humantime::parse_rfc3339(t).is_ok());
    let misc = |detail| TestMisc {
        results_file: file.into(),
        boot_index: record.boot.index,
        run_id: doc.map(|d| d.run_id.clone()).or_else(|| record.boot.envelope_id.clone()),
        classification: record.boot.classification.clone(),
        detail,
    };
    let test = |suffix: &str, path: String, status: Status, detail: TestDetail| Test {
        build_id: build_id.into(),
        id: format!("{origin}:{boot_key}.{suffix}"),
        origin: origin.into(),
        path,
        status,
        number: None,
        comment: None,
        log_excerpt: None,
        start_time: start_time.clone(),
        duration: None,
        environment: environment.clone(),
        misc: misc(detail),
    };
    let b = &record.boot;
    let mut boot =
        test("boot", "bootbench.boot".into(), boot_status(&b.classification), TestDetail::Boot(boot_misc(record)));
    boot.duration = b.wall_s.is_finite().then_some(b.wall_s);
    boot.comment = Some(no_nul(&boot_comment(record)));
    if boot.status != Status::Pass {
        boot.log_excerpt = Some(log_excerpt(b.detail.as_deref(), &record.console_log));
    }
    let mut tests = vec![boot];
    let Some(doc) = doc else { return tests };
    for (i, w) in doc.workloads.iter().enumerate() {
        let position = i + 1;
        let name = path_part(&w.name);
        let status = workload_status(w);
        let mut wt = test(
            &format!("{position}.{}", w.name),
            format!("bootbench.{name}"),
            status,
            TestDetail::Workload(WorkloadMisc {
                position,
                params: w.params.clone(),
                warmup: w.warmup,
                iterations: w.iterations.len(),
                error: w.error.clone(),
                iteration_errors: w.iterations.iter().flat_map(|i| i.errors.iter().cloned()).collect(),
            }),
        );
        wt.comment = Some(no_nul(&workload_comment(w)));
        tests.push(wt);
        for (metric, (values, unit, better)) in metric_values(w) {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let mut mt = test(
                &format!("{position}.{}.{metric}", w.name),
                format!("bootbench.{name}.{}", path_part(&metric)),
                metric_status(w.error.is_some(), &values),
                TestDetail::Metric(MetricMisc {
                    position,
                    metric: metric.clone(),
                    better: match better {
                        Better::Higher => "higher".into(),
                        Better::Lower => "lower".into(),
                    },
                    iterations: values
                        .iter()
                        .map(|v| serde_json::Number::from_f64(*v).map_or_else(|| v.to_string().into(), Into::into))
                        .collect(),
                }),
            );
            mt.number = mean.is_finite().then(|| Number { value: mean, unit: Some(unit).filter(|u| !u.is_empty()) });
            mt.comment = Some(no_nul(&metric_comment(w, &metric, values.len())));
            tests.push(mt);
        }
    }
    tests
}

/// Each metric of a workload, in name order: its value in every iteration
/// that has it, its unit and direction (from the first such iteration).
fn metric_values(w: &WorkloadResult) -> BTreeMap<String, (Vec<f64>, String, Better)> {
    let mut out: BTreeMap<String, (Vec<f64>, String, Better)> = BTreeMap::new();
    for it in &w.iterations {
        for (name, Metric { value, unit, better }) in &it.metrics {
            out.entry(name.clone()).or_insert_with(|| (Vec::new(), unit.clone(), *better)).0.push(*value);
        }
    }
    out
}

fn boot_misc(record: &BootRecord) -> objects::BootMisc {
    let doc: Option<&RunDocument> = record.result.as_ref();
    objects::BootMisc {
        detail: record.boot.detail.clone(),
        late_failure: record.boot.late_failure.clone(),
        result_error: record.result_error.clone(),
        guest_status: doc.map(|d| {
            serde_json::to_value(d.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
        }),
        guest_errors: doc
            .map_or_else(Vec::new, |d| d.errors.iter().map(|e| format!("{}: {}", e.location, e.message)).collect()),
        workloads_kept: record
            .workloads_kept
            .as_ref()
            .map_or_else(Vec::new, |k| k.workloads.iter().map(|w| w.name.clone()).collect()),
        qemu_status: record.boot.qemu_status,
    }
}

fn boot_comment(record: &BootRecord) -> String {
    let b = &record.boot;
    let mut s = match (b.classification.as_str(), &b.detail) {
        ("ok", _) => "ok: booted, ran the suite, and its result arrived intact".to_string(),
        (c, Some(d)) => format!("{c}: {d}"),
        (c, None) => c.to_string(),
    };
    if let Some(late) = &b.late_failure {
        s.push_str(&format!("; after the result: {late}"));
    }
    if let Some(e) = &record.result_error {
        s.push_str(&format!("; no result document: {e}"));
    }
    s
}

fn workload_comment(w: &WorkloadResult) -> String {
    let mut s = format!("{} measured iteration(s) after {} warmup", w.iterations.len(), w.warmup);
    if let Some(e) = &w.error {
        s.push_str(&format!("; stopped early: {e}"));
    }
    let part_errors: Vec<&str> = w.iterations.iter().flat_map(|i| i.errors.iter().map(String::as_str)).collect();
    if !part_errors.is_empty() {
        s.push_str(&format!("; failed parts: {}", part_errors.join("; ")));
    }
    s
}

fn metric_comment(w: &WorkloadResult, metric: &str, n: usize) -> String {
    let mut s = format!("{} {metric}: mean of {n} of {} measured iteration(s)", w.name, w.iterations.len());
    if let Some(e) = &w.error {
        s.push_str(&format!("; the workload stopped early: {e}"));
    }
    s
}

/// A name as one part of a KCIDB path (`[a-zA-Z0-9_-]+`): other
/// characters become `_`.
pub fn path_part(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

/// The machine a boot ran on, in words and as recorded.
fn environment_of(record: &BootRecord) -> Environment {
    let m = &record.machine;
    let cpu = m.cpu_model.clone().or_else(|| m.cpu.clone());
    let mut comment = format!("{} guest, {} vCPU(s), {} MiB, accel {}", m.arch, m.smp, m.mem_mib, m.accel);
    if let Some(c) = &cpu {
        comment.push_str(&format!(", CPU {c}"));
    }
    if let Some(h) = &record.host {
        comment.push_str(&format!(", on host {}", h.describe()));
    }
    Environment {
        comment: no_nul(&comment),
        misc: EnvironmentMisc {
            arch: m.arch.clone(),
            smp: m.smp,
            mem_mib: m.mem_mib,
            cpu_model: cpu,
            accel: m.accel.clone(),
            machine_type: m.machine_type.clone(),
            qemu_version: Some(record.qemu.version.clone()).filter(|v| !v.is_empty()),
            host: record.host.as_ref().map(|h| HostMisc {
                name: h.name.clone(),
                cpu: h.cpu.clone(),
                cpus: h.cpus,
                kernel: h.kernel.clone(),
            }),
        },
    }
}

/// What a failed boot's log excerpt holds: the classification's detail,
/// then as much of the console's end as fits KCIDB's limit.
fn log_excerpt(detail: Option<&str>, console: &str) -> String {
    let mut head = detail.map(|d| format!("{d}\n")).unwrap_or_default();
    if head.chars().count() > LOG_EXCERPT_MAX / 2 {
        head = head.chars().take(LOG_EXCERPT_MAX / 2).collect();
    }
    let room = LOG_EXCERPT_MAX - head.chars().count();
    let console = no_nul(console);
    let total = console.chars().count();
    let tail: String = console.chars().skip(total.saturating_sub(room)).collect();
    no_nul(&(head + &tail))
}

/// KCIDB's strings (outside `misc`) hold no NUL.
fn no_nul(s: &str) -> String {
    s.replace('\0', "")
}
