//! The workload registry: every workload's module, their names in the
//! order suites list them, and [`prepare`], which makes one by name. A
//! workload is prepared from its parameters (defaults filled in, unknown
//! parameters refused), then runs one iteration at a time in the calling
//! process. The trait every workload implements is in `workload`, below
//! the workloads; a workload never uses this module. The suite parser
//! does not import it either: it is given [`NAMES`], here.

use crate::suite::{CmdlineConfig, Suite, SuiteError, WorkloadSpec};
use crate::workload::{
    params_without_version, parse_params, ImageFile, RunContext, Workload, WorkloadError, VERSION_PARAM,
};

pub mod contest;
pub mod dbench;
pub mod fork;
pub mod hackbench;
pub mod kbuild;
pub mod kernbench;
pub mod nbench;
pub mod sdet;
pub mod sdet_applets;
pub mod tbench;

/// Names of all workloads, in the order suites list them.
pub const NAMES: &[&str] =
    &["fork", "dbench", "tbench", "kbuild", "kernbench", "sdet", "sdet_applets", "hackbench", "contest"];

/// The workloads that always run inside the userland pack (a read-only
/// disk of Debian's build userland the host attaches and the init mounts
/// at `suite::PACK_MOUNT`): a suite with one of them needs the pack. Others
/// need it for some parameters: see [`needs_pack`].
pub const NEEDS_PACK: &[&str] = &["kernbench", "sdet"];

/// Whether the workload of `spec` runs inside the userland pack: one of
/// [`NEEDS_PACK`], or a contest whose foreground is the pack build
/// (`build: "pack"`). What `bootbench run --pack auto` decides by.
pub fn needs_pack(spec: &WorkloadSpec) -> bool {
    NEEDS_PACK.contains(&spec.name.as_str()) || contest::needs_pack(spec)
}

/// Whether the workload of `spec` compiles Linux in the pack (kernbench,
/// contest with `build: pack`), so it needs the scratch room of a kernel
/// build's objects; sdet and contest's pack loads need the pack but not
/// that.
pub fn builds_in_pack(spec: &WorkloadSpec) -> bool {
    spec.name == kernbench::NAME
        || (spec.name == contest::NAME && spec.params.get("build").and_then(|v| v.as_str()) == Some("pack"))
}

/// Each workload's version. It goes up whenever a change alters what the
/// workload's metrics mean (the calls it makes, what it counts), so that
/// results of different versions are never compared: `compare`,
/// `contest-report` and `bisect` refuse to mix them. Every result carries
/// its workload's version in its parameters ([`VERSION_PARAM`]); results
/// from before versions existed carry none and count as version 1.
///
/// History (version 1 is the state when versions were introduced):
/// - hackbench 2: receivers read one message per `read()` (`datasize -
///   done` bytes) and stop after `fds × loops` messages, as upstream does
///   (were: up to 4096 bytes per read, until end of file).
/// - tbench 2: the wire as tbench 4.0 sends it, measured against Debian's
///   (Mkdir sends a request and Deltree none, were swapped; a ReadX reply
///   carries and counts `ret_size` bytes, was `size`).
/// - contest 2: each row cleans the tree, syncs and drops the caches
///   before the load starts (was: the sync after the load's head start,
///   which wrote back what the load had dirtied before the build met it);
///   Loads and LCPU% count only the build's window (were: the load's
///   whole life, head start and stop included); the scratch and swap
///   disks are `cache=none` by default (were: the host's page cache).
/// - contest 3: dbench_load is dbench's `client.txt` replayed by 16 × CPUs
///   clients, each looping over it until the stop, every operation counted
///   as it completes (was: the built-in loadfile in 2 s rounds of client
///   set-up and tree removal, counted at each round's end); process_load
///   is contest's: N members forked and exec'd in a ring of pipes carrying
///   max(1, N/8) chunks, Loads counted in laps (was: N forked members and
///   one 4 KiB message each, counted in messages); dbench_load's client
///   makes dbench 2's calls.
/// - dbench 2: the calls dbench 4.0's `fileio.c` makes. NTCreateX opens
///   FILE_CREATE without `O_EXCL`, creates for FILE_OVERWRITE and not for
///   FILE_OPEN_IF, makes directories whatever the disposition, retries
///   `EISDIR` as a directory open and `fstat`s what it opened;
///   SET_FILE_INFORMATION is `fstat` plus a `utime` of the path at every
///   level (was `futimens` at level 1004 only); QUERY_FS_INFORMATION is
///   `statvfs` of the directory's path (was `fstatvfs`);
///   QUERY_PATH_INFORMATION is one lookup (was a second `stat`);
///   FIND_FIRST with wildcards first looks the pattern up; locks wait
///   (`F_SETLKW`); directories are read without `fdopendir`'s two
///   `fcntl` calls; Deltree removes files and leaves directories (was
///   everything). Loadfiles may no longer reach outside the client's own
///   directory.
/// - dbench 3, tbench 3: each client does per line what dbench 4.0's
///   `child.c` does around the operation: it reads the line from the
///   loadfile's text again on every pass (4 KiB reads, parsed as they
///   come; was: parsed once before the run) and checks the driver with
///   `kill(parent, 0)`; latency runs from the start of the operation (was:
///   from the end of the previous one). dbench's ReadX and WriteX each
///   allocate a buffer of their size and free it (`malloc`, `calloc`; was:
///   one buffer for the whole run).
/// - contest 4: dbench_load's clients are dbench 3's.
/// - kernbench 1 (new): Linux compiled by the pack's gcc and make; not
///   comparable with kbuild, which builds a synthetic tree.
/// - contest 5: the foreground is chosen by the `build` parameter, which
///   every result's params carry: `synthetic` (the seeded tree and the
///   init's applets, as in version 4) or `pack` (Linux compiled by the
///   pack's gcc and make, kernbench's build; Time and CPU% from make's
///   rusage). The two are never compared.
/// - contest 6: with `load_tools: pack` (the default with the pack build)
///   ctar_load, xtar_load and list_load run the userland pack's GNU tar,
///   rm and ls on a real tree (`tar_dirs` of the pack's Linux tree copied
///   to the scratch disk, 187 MB by default; the whole pack listed),
///   list_load's Loads counting whole listings as contest's did (were:
///   the `tar` crate on a synthetic tree of a few MB, and a walk of the
///   guest's root counted in entries); the parameters say which.
/// - sdet 2: real shell scripts of ordinary commands run by dash with the
///   userland pack's programs, the shell forking and exec'ing each command
///   found on the PATH (was: a fork of the workload for a shell and the
///   init's applets for commands, now `sdet_applets`).
/// - sdet_applets 1 (new): sdet version 1 under its own name, for arches
///   and suites without a pack; never compared with `sdet`.
pub const VERSIONS: [(&str, u32); 9] = [
    ("fork", 1),
    ("dbench", 3),
    ("tbench", 3),
    ("kbuild", 1),
    ("kernbench", 1),
    ("sdet", 2),
    ("sdet_applets", 1),
    ("hackbench", 2),
    ("contest", 6),
];

/// The version this build runs of workload `name`, if it is one.
pub fn version(name: &str) -> Option<u32> {
    VERSIONS.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
}

/// Prepares the workload `name` with `params`. A `version` among them must
/// be the one this build runs (a suite may pin it); it is not passed on.
pub fn prepare(
    name: &str,
    params: &serde_json::Map<String, serde_json::Value>,
    ctx: &RunContext,
) -> Result<Box<dyn Workload>, WorkloadError> {
    let runs = version(name).ok_or_else(|| WorkloadError::Unknown(name.to_string()))?;
    if let Some(asked) = params.get(VERSION_PARAM) {
        if asked.as_u64() != Some(u64::from(runs)) {
            return Err(WorkloadError::Version { workload: name.to_string(), asked: asked.clone(), runs });
        }
    }
    let params = &params_without_version(params);
    match name {
        "fork" => Ok(Box::new(fork::Fork::new(parse_params("fork", params)?, ctx))),
        "dbench" => Ok(Box::new(dbench::Dbench::new(parse_params("dbench", params)?, ctx)?)),
        "tbench" => Ok(Box::new(tbench::Tbench::new(parse_params("tbench", params)?, ctx)?)),
        "kbuild" => Ok(Box::new(kbuild::Kbuild::new(parse_params("kbuild", params)?, ctx)?)),
        "kernbench" => Ok(Box::new(kernbench::Kernbench::new(parse_params("kernbench", params)?, ctx)?)),
        "sdet" => Ok(Box::new(sdet::Sdet::new(parse_params("sdet", params)?, ctx)?)),
        "sdet_applets" => Ok(Box::new(sdet_applets::Sdet::new(parse_params("sdet_applets", params)?, ctx)?)),
        "hackbench" => Ok(Box::new(hackbench::Hackbench::new(parse_params("hackbench", params)?, ctx)?)),
        "contest" => Ok(Box::new(contest::Contest::new(parse_params("contest", params)?, ctx)?)),
        other => Err(WorkloadError::Unknown(other.to_string())),
    }
}

/// The host files the guest reads when it runs `suite` (the loadfiles of
/// dbench, tbench and contest's dbench_load that are not the built-in
/// one), each once: what the host packs into the image at the same path.
/// Parameters are read as [`prepare`] reads them; pins of one file must
/// agree, and a file pinned anywhere is pinned.
pub fn image_files(suite: &Suite) -> Result<Vec<ImageFile>, WorkloadError> {
    let mut files: Vec<ImageFile> = Vec::new();
    for spec in &suite.workloads {
        let params = &params_without_version(&spec.params);
        let wanted = match spec.name.as_str() {
            "dbench" | "tbench" => parse_params::<nbench::params::NbenchParams>(&spec.name, params)?
                .image_file(&spec.name)
                .into_iter()
                .collect(),
            "contest" => parse_params::<contest::ContestParams>(&spec.name, params)?.image_files(),
            _ => Vec::new(),
        };
        for f in wanted {
            match files.iter_mut().find(|g| g.path == f.path) {
                None => files.push(f),
                Some(g) => match (&g.sha256, &f.sha256) {
                    (Some(a), Some(b)) if !a.eq_ignore_ascii_case(b) => {
                        return Err(WorkloadError::ImageFileConflict {
                            path: f.path,
                            first_reader: g.reader.clone(),
                            first: a.clone(),
                            second_reader: f.reader,
                            second: b.clone(),
                        })
                    }
                    (None, Some(b)) => g.sha256 = Some(b.clone()),
                    _ => {}
                },
            }
        }
    }
    Ok(files)
}

/// The suite checks workload names against the names it is given; these
/// give it this registry's.
// PID 1 runs these: no panics (see ARCHITECTURE.md, "PID 1").
#[deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
impl Suite {
    /// Parses a suite file's JSON ([`Suite::from_json_for`] with [`NAMES`]).
    pub fn from_json(name: &str, json: &str) -> Result<Suite, SuiteError> {
        Suite::from_json_for(name, json, NAMES)
    }

    /// Checks that the suite names only known workloads and is not empty
    /// ([`Suite::validate_for`] with [`NAMES`]).
    pub fn validate(&self) -> Result<(), SuiteError> {
        self.validate_for(NAMES)
    }
}

/// Cmdline overrides, checked against this registry's workload names.
// PID 1 runs these: no panics (see ARCHITECTURE.md, "PID 1").
#[deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
impl CmdlineConfig {
    /// Reads every `bootbench.*` word of `cmdline`
    /// ([`CmdlineConfig::parse_for`] with [`NAMES`]).
    pub fn parse(cmdline: &str) -> Result<CmdlineConfig, SuiteError> {
        CmdlineConfig::parse_for(cmdline, NAMES)
    }

    /// Applies the overrides to `packed` ([`CmdlineConfig::apply_for`] with
    /// [`NAMES`]).
    pub fn apply(&self, packed: Suite) -> Result<Suite, SuiteError> {
        self.apply_for(packed, NAMES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> RunContext {
        RunContext::new(1, std::env::temp_dir())
    }

    #[test]
    fn every_workload_has_a_version_and_a_suite_may_pin_only_the_one_that_runs() {
        assert_eq!(VERSIONS.map(|(n, _)| n), NAMES, "a version per workload, in the registry's order");
        let runs = version("fork").unwrap();
        let mut p = serde_json::Map::new();
        p.insert("count".into(), 5.into());
        p.insert(VERSION_PARAM.into(), runs.into());
        let w = prepare("fork", &p, &ctx()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.params().get("count"), Some(&5.into()));
        p.insert(VERSION_PARAM.into(), (runs + 1).into());
        let e = prepare("fork", &p, &ctx()).err().unwrap().to_string();
        assert!(
            e.contains(&format!("version {runs} in this bootbench, but the suite asks for version {}", runs + 1)),
            "{e}"
        );
        p.insert(VERSION_PARAM.into(), "latest".into());
        assert!(matches!(prepare("fork", &p, &ctx()), Err(WorkloadError::Version { .. })));
    }

    #[test]
    fn unknown_workload_and_params_are_refused() {
        assert!(matches!(prepare("nope", &Default::default(), &ctx()), Err(WorkloadError::Unknown(_))));
        let mut p = serde_json::Map::new();
        p.insert("cuont".into(), 5.into());
        let e = prepare("fork", &p, &ctx()).err().unwrap();
        let chain = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(chain.contains("cuont"), "{chain}");
    }

    #[test]
    fn builtin_suites_run_every_workload_with_parameters_it_accepts() {
        for n in ["quick", "standard", "full"] {
            let s = Suite::builtin(n).unwrap();
            let names: Vec<&str> = s.workloads.iter().map(|w| w.name.as_str()).collect();
            assert_eq!(names, ["fork", "dbench", "tbench", "kbuild", "sdet_applets", "hackbench"], "{n}: fork first");
            for w in &s.workloads {
                let ok = match w.name.as_str() {
                    "kbuild" => parse_params::<kbuild::KbuildParams>("kbuild", &w.params).map(|_| ()),
                    "sdet_applets" => parse_params::<sdet_applets::SdetParams>("sdet_applets", &w.params).map(|_| ()),
                    "hackbench" => parse_params::<hackbench::HackbenchParams>("hackbench", &w.params).map(|_| ()),
                    _ => Ok(()),
                };
                assert!(ok.is_ok(), "{n}: {}: {:?}", w.name, ok.err());
            }
        }
        let quick = Suite::builtin("quick").unwrap();
        let kb = quick.workloads.iter().find(|w| w.name == "kbuild").unwrap();
        assert_eq!((kb.params["files"].as_u64(), kb.params["warmup_build"].as_bool()), (Some(16), Some(false)));
        assert_eq!(quick.iterations_for(kb), 3);
    }

    #[test]
    fn builtin_suites_build_linux_for_real_where_there_is_a_pack() {
        for arch in ["x86_64", "i386", "ppc64le", "ppc64"] {
            for &n in crate::suite::BUILTIN_SUITES {
                let s = Suite::builtin_for(n, arch).unwrap();
                s.validate().unwrap();
                let names: Vec<&str> = s.workloads.iter().map(|w| w.name.as_str()).collect();
                let real = arch != "ppc64" && n != "quick";
                assert_eq!(
                    s.workloads.iter().any(needs_pack),
                    real,
                    "{arch} {n}: {names:?} needs the pack exactly when it builds for real"
                );
                if n == "contest" {
                    let build = s.workloads[0].params.get("build").and_then(|b| b.as_str());
                    assert_eq!(build, (arch != "ppc64").then_some("pack"), "{arch}: contest's foreground");
                    continue;
                }
                let (build, sdet) = if real { ("kernbench", "sdet") } else { ("kbuild", "sdet_applets") };
                assert_eq!(names, ["fork", "dbench", "tbench", build, sdet, "hackbench"], "{arch} {n}");
                if real {
                    // SDET's real scripts: every kind of command once in
                    // standard, twice in full.
                    let p: sdet::SdetParams = parse_params("sdet", &s.workloads[4].params).unwrap();
                    let kinds = sdet::script::UNIT_KINDS;
                    assert_eq!(p.units, if n == "full" { 2 * kinds } else { kinds }, "{n}");
                    let levels: &[u32] = if arch == "i386" { &[1, 4, 16, 64] } else { &[1, 4, 16, 64, 128] };
                    assert_eq!(p.levels, levels, "{arch} {n}");
                    let spec = &s.workloads[3];
                    let p: kernbench::KernbenchParams = parse_params("kernbench", &spec.params).unwrap();
                    assert_eq!(p.target.name(), n, "{arch} {n}: the suite's size is the target's");
                    assert_eq!(p.jobs, [kernbench::JobLevel::Half, kernbench::JobLevel::Optimal]);
                    assert_eq!((s.iterations_for(spec), spec.warmup), (5, Some(1)), "kernbench's five runs and warmup");
                }
            }
        }
    }

    #[test]
    fn builtin_suites_prepare_dbench_and_tbench_on_their_loadfiles() {
        let ctx = RunContext::new(1, std::env::temp_dir());
        // The sized suites; `contest` is contest alone.
        for size in ["quick", "standard", "full"] {
            let suite = Suite::builtin(size).unwrap();
            let mut seen = 0;
            for spec in suite.workloads.iter().filter(|w| w.name == "dbench" || w.name == "tbench") {
                let w = prepare(&spec.name, &spec.params, &ctx).unwrap();
                let (loadfile, sha) = if size == "quick" {
                    ("builtin", nbench::builtin_loadfile::BUILTIN_SHA256)
                } else {
                    (crate::known_loadfiles::CLIENT_TXT, crate::known_loadfiles::CLIENT_TXT_SHA256)
                };
                assert_eq!((&w.params()["loadfile"], &w.params()["loadfile_sha256"]), (&loadfile.into(), &sha.into()));
                seen += 1;
            }
            assert_eq!(seen, 2, "{size}");
        }
    }

    #[test]
    fn the_image_carries_each_named_loadfile_once_and_pins_must_agree() {
        use crate::known_loadfiles::{CLIENT_TXT, CLIENT_TXT_SHA256};
        assert_eq!(image_files(&Suite::builtin("quick").unwrap()).unwrap(), [], "quick replays the built-in loadfile");
        for size in ["standard", "full"] {
            let files = image_files(&Suite::builtin(size).unwrap()).unwrap();
            assert_eq!(files.len(), 1, "{size}: dbench and tbench share one file: {files:?}");
            assert_eq!(files[0].path, CLIENT_TXT, "{size}");
            assert_eq!(files[0].sha256.as_deref(), Some(CLIENT_TXT_SHA256), "{size}: pinned");
        }
        let contest = image_files(&Suite::builtin("contest").unwrap()).unwrap();
        assert_eq!(contest.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), [CLIENT_TXT], "dbench_load's");
        assert_eq!(contest[0].sha256.as_deref(), Some(CLIENT_TXT_SHA256), "pinned");
        assert_eq!(contest[0].reader, "contest's dbench_load");

        let suite = |workloads: serde_json::Value| {
            Suite::from_json("t", &serde_json::json!({ "name": "t", "workloads": workloads }).to_string()).unwrap()
        };
        let no_dbench_row = suite(serde_json::json!([{ "name": "contest", "params": { "rows": "no_load,io_load" } }]));
        assert_eq!(image_files(&no_dbench_row).unwrap(), [], "without dbench_load contest reads no loadfile");
        // One workload pins, one does not: the file is packed once, pinned.
        let one_pin = suite(serde_json::json!([
            { "name": "dbench", "params": { "loadfile": "/x/client.txt" } },
            { "name": "tbench", "params": { "loadfile": "/x/client.txt", "loadfile_sha256": "ab" } },
            { "name": "hackbench" },
        ]));
        let files = image_files(&one_pin).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!((files[0].path.as_str(), files[0].sha256.as_deref()), ("/x/client.txt", Some("ab")));
        let conflict = suite(serde_json::json!([
            { "name": "dbench", "params": { "loadfile": "/x/client.txt", "loadfile_sha256": "ab" } },
            { "name": "contest", "params": { "dbench_loadfile": "/x/client.txt", "dbench_loadfile_sha256": "cd" } },
        ]));
        let e = image_files(&conflict).unwrap_err().to_string();
        assert!(e.contains("/x/client.txt") && e.contains("ab") && e.contains("cd"), "{e}");
        let bad = suite(serde_json::json!([{ "name": "dbench", "params": { "loadfile": 3 } }]));
        assert!(matches!(image_files(&bad), Err(WorkloadError::BadParams { .. })));
    }
}
