//! The built-in suites (`quick`, `standard`, `full`, `contest`): which
//! workloads each runs, how often and at what size. It must not depend on
//! the cmdline keys.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use super::document::{default_seed, default_warmup, Suite, SuiteError, WorkloadSpec};
use crate::known_loadfiles::{CLIENT_TXT, CLIENT_TXT_SHA256};

/// Names of the built-in suites, smallest first.
pub const BUILTIN_SUITES: &[&str] = &["quick", "standard", "full", "contest"];

impl Suite {
    /// A built-in suite by name.
    pub fn builtin(name: &str) -> Result<Suite, SuiteError> {
        if name == "contest" {
            return Ok(contest_suite());
        }
        let (iterations, fork_count, watchdog_s) = match name {
            "quick" => (5, 1000, 600),
            "standard" => (10, 10_000, 2 * 3600),
            "full" => (20, 50_000, 4 * 3600),
            other => return Err(SuiteError::UnknownSuite(other.to_string())),
        };
        let mut fork_params = serde_json::Map::new();
        fork_params.insert("count".into(), fork_count.into());
        Ok(Suite {
            name: name.to_string(),
            seed: default_seed(),
            iterations,
            warmup: default_warmup(),
            watchdog_s,
            workloads: [
                vec![WorkloadSpec { name: "fork".into(), iterations: None, warmup: None, params: fork_params }],
                nbench_specs(name),
                kernbench_era_specs(name),
            ]
            .concat(),
        })
    }
}

/// The arches whose built-in `standard` and `full` suites build Linux for
/// real (`kernbench`, from the userland pack) instead of the synthetic
/// `kbuild`: those with a pack.
pub const REAL_BUILD_ARCHES: &[&str] = &["x86_64", "i386", "ppc64le"];

/// The most SDET scripts at once in a 32-bit guest's built-in suites:
/// Debian's 686 kernel (HIGHMEM4G) uses at most about 3.5 GiB of a PC's
/// RAM, and 128 scripts need 4.2 GiB of MemTotal.
pub const MAX_LEVEL_32BIT: u32 = 64;

impl Suite {
    /// The built-in suite `name` for guests of `arch`. On an arch of
    /// [`REAL_BUILD_ARCHES`], `standard` and `full` time kernbench's real
    /// build in place of `kbuild`: the `standard` or `full` target (a few
    /// directories; vmlinux), a warmup build, five runs at half and
    /// optimal (kernbench's default of five; maximal starts a compiler per
    /// object at once, hundreds of them, so it is asked for by hand with
    /// `bootbench.kernbench.jobs`); `contest`'s foreground is the real
    /// build too (its `build` parameter `pack`), and SDET is the real
    /// `sdet` (shell scripts of the pack's programs) in `sdet_applets`'
    /// place. `quick` keeps the synthetic build on
    /// every arch: it must fit CI and a first run under TCG, where four
    /// real objects take a boot of two minutes.
    pub fn builtin_for(name: &str, arch: &str) -> Result<Suite, SuiteError> {
        let mut suite = Suite::builtin(name)?;
        if !REAL_BUILD_ARCHES.contains(&arch) || name == "quick" {
            return Ok(suite);
        }
        // contest's foreground: the same real build, quick's four objects
        // (a row is one build; under TCG that is about two minutes).
        for spec in suite.workloads.iter_mut().filter(|w| w.name == "contest") {
            spec.params.insert("build".into(), "pack".into());
        }
        // SDET's real scripts, every kind of command twice in full, once in
        // standard. A 32-bit guest stops at 64 scripts: 128 need about
        // 4.2 GiB of MemTotal (each may be compiling), more than its kernel
        // can use (see `MAX_LEVEL_32BIT`).
        for spec in suite.workloads.iter_mut().filter(|w| w.name == "sdet_applets") {
            let units = if name == "full" { 28 } else { 14 };
            spec.name = "sdet".into();
            spec.params.insert("units".into(), units.into());
            if arch == "i386" {
                let levels: Vec<u32> = [1, 4, 16, 64, 128].into_iter().filter(|l| *l <= MAX_LEVEL_32BIT).collect();
                spec.params.insert("levels".into(), levels.into());
            }
        }
        for spec in suite.workloads.iter_mut().filter(|w| w.name == "kbuild") {
            let mut params = serde_json::Map::new();
            params.insert("target".into(), name.into());
            params.insert("jobs".into(), serde_json::json!(["half", "optimal"]));
            *spec = WorkloadSpec { name: "kernbench".into(), iterations: Some(5), warmup: Some(1), params };
        }
        Ok(suite)
    }
}

/// The `contest` suite: contest's eleven rows, three runs of each (the
/// `[runs]` of reference 003 were 2 to 5), on the scratch disk `bootbench
/// run` attaches for it; dbench_load replays `client.txt`, pinned. Hours under TCG with a 1 GiB guest; the rows and
/// sizes are `bootbench.contest.*` parameters.
fn contest_suite() -> Suite {
    Suite {
        name: "contest".to_string(),
        seed: default_seed(),
        iterations: 3,
        warmup: 0,
        watchdog_s: 8 * 3600,
        workloads: vec![WorkloadSpec {
            name: "contest".into(),
            iterations: None,
            warmup: None,
            params: [("dbench_loadfile", CLIENT_TXT), ("dbench_loadfile_sha256", CLIENT_TXT_SHA256)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect(),
        }],
    }
}

/// The kbuild, SDET and hackbench entries of built-in suite `size`, as
/// every arch runs them without a pack (SDET of the init's applets,
/// `sdet_applets`; [`Suite::builtin_for`] puts the real ones in place where
/// there is a pack).
///
/// Quick fits CI under TCG next to fork, dbench and tbench (the six take
/// about a minute of guest time on x86_64): a 16-file tree built at the
/// optimal and maximal job counts without kernbench's warmup build, SDET
/// at 1 and 4 scripts of 6 units, hackbench with 2 groups of 10. Standard
/// and full follow reference 000 (kernbench and SDET at 1/4/16/64/128
/// scripts, 10 and 20 iterations): kernbench's half/optimal/maximal runs
/// after its warmup build, and hackbench's classic 10 groups of 20; full
/// doubles the tree and the SDET script length.
fn kernbench_era_specs(size: &str) -> Vec<WorkloadSpec> {
    let quick = size == "quick";
    let spec = |name: &str, iterations: Option<u32>, warmup: Option<u32>, params: serde_json::Value| WorkloadSpec {
        name: name.into(),
        iterations,
        warmup,
        params: match params {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        },
    };
    let (files, modes, warmup_build) = match size {
        "quick" => (16, vec!["optimal", "maximal"], false),
        "standard" => (300, vec!["half", "optimal", "maximal"], true),
        _ => (600, vec!["half", "optimal", "maximal"], true),
    };
    let (levels, units) = match size {
        "quick" => (vec![1, 4], 6),
        "standard" => (vec![1, 4, 16, 64, 128], 12),
        _ => (vec![1, 4, 16, 64, 128], 24),
    };
    let (groups, fds, loops) = if quick { (2, 10, 20) } else { (10, 20, 100) };
    let few = quick.then_some(3);
    vec![
        // kernbench's own warmup build replaces a discarded iteration.
        spec(
            "kbuild",
            few,
            Some(0),
            serde_json::json!({ "files": files, "modes": modes, "warmup_build": warmup_build }),
        ),
        spec("sdet_applets", few, quick.then_some(0), serde_json::json!({ "levels": levels, "units": units })),
        spec("hackbench", few, None, serde_json::json!({ "groups": groups, "fds": fds, "loops": loops })),
    ]
}

/// The dbench and tbench entries of built-in suite `size`. Quick fits CI
/// under TCG (about 8 s of guest time each) and replays the seeded
/// built-in loadfile; standard and full follow reference 000 (10 to 20
/// iterations) and replay dbench's own `client.txt`, pinned by its sha256,
/// so their numbers are dbench's and tbench's (the host packs it into the
/// image). The warmup is inside each iteration (`warmup_s`), so no whole
/// iteration is discarded.
fn nbench_specs(size: &str) -> Vec<WorkloadSpec> {
    let (clients, warmup_s, duration_s, iterations) = match size {
        "quick" => (2, 0.5, 2.0, 3),
        "standard" => (4, 2.0, 10.0, 10),
        _ => (8, 5.0, 20.0, 20),
    };
    let quick = size == "quick";
    ["dbench", "tbench"]
        .into_iter()
        .map(|name| {
            let mut params = serde_json::Map::new();
            params.insert("clients".into(), clients.into());
            params.insert("warmup_s".into(), warmup_s.into());
            params.insert("duration_s".into(), duration_s.into());
            if quick {
                params.insert("loadfile".into(), "builtin".into());
            } else {
                params.insert("loadfile".into(), CLIENT_TXT.into());
                params.insert("loadfile_sha256".into(), CLIENT_TXT_SHA256.into());
            }
            WorkloadSpec { name: name.into(), iterations: Some(iterations), warmup: Some(0), params }
        })
        .collect()
}
