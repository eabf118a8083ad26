//! Choosing the suite of a run: a built-in by name or a JSON file, with the
//! command line's overrides applied exactly as the guest applies its
//! `bootbench.*` keys, and contest's memory bounded by what the host has.
//! Depends on `loads`' suite model and contest's parameters only.

use anyhow::Context;
use loads::known_loadfiles::DBENCH_CLIENT_ROOM_BYTES;
use loads::suite::{CmdlineConfig, Suite};
use loads::workloads::contest::background_loads::LoadKind;
use loads::workloads::contest::{ContestParams, NAME as CONTEST_WORKLOAD};
use std::path::Path;

/// MiB of a guest's RAM that its kernel keeps out of MemTotal (its image,
/// the page structs, firmware ranges), as estimated to check `--mem`
/// before a boot: 40 MiB and 1/32 of the RAM, 72 MiB of 1 GiB (Debian's
/// 6.1 x86_64 kernel with a 1024 MiB guest had a MemTotal of 958 MiB: 66
/// MiB kept). The guest checks its own MemTotal again; this only keeps a
/// boot that cannot fit from starting.
pub fn kernel_reserve_mib(mem_mib: u64) -> u64 {
    40 + mem_mib / 32
}

/// The smallest `--mem`, a multiple of 64 MiB, whose MemTotal (after
/// [`kernel_reserve_mib`]) holds `mem_total_mib`.
pub fn mem_for_mem_total(mem_total_mib: u64) -> u64 {
    let mut mem = mem_total_mib.div_ceil(64) * 64;
    while mem - kernel_reserve_mib(mem) < mem_total_mib {
        mem += 64;
    }
    mem
}

/// The `--mem` (MiB) the suite's kernel builds in the pack need on `smp`
/// vCPUs, and which build needs it; `None` when it runs none. The builds'
/// output trees take memory too when `tree_in_memory` (no scratch disk).
pub fn pack_build_memory(suite: &Suite, smp: u32, tree_in_memory: bool) -> anyhow::Result<Option<(u64, String)>> {
    use loads::workloads::kernbench::{memory_need, KernbenchParams, NAME};
    let mut worst: Option<(u64, String)> = None;
    for spec in suite.workloads.iter().filter(|w| w.name == NAME) {
        let params = loads::workload::params_without_version(&spec.params);
        let p: KernbenchParams = loads::workload::parse_params(NAME, &params)?;
        let Some((level, total)) = memory_need(p.target, &p.jobs, smp, tree_in_memory) else { continue };
        let mem = mem_for_mem_total(total);
        if worst.as_ref().is_none_or(|(m, _)| mem > *m) {
            let jobs = level.limit(smp).flag();
            let why = format!(
                "kernbench's {} build at the {} level ({jobs} on {smp} vCPUs, a MemTotal of {total} MiB)",
                p.target.name(),
                level.name()
            );
            worst = Some((mem, why));
        }
    }
    // contest's pack foreground: its build alone (mem_load's share, which
    // may go to swap, the guest checks with its MemTotal and SwapTotal).
    for spec in suite.workloads.iter().filter(|w| loads::workloads::contest::needs_pack(w)) {
        use loads::kernel_build::make::JobLimit;
        let params = loads::workload::params_without_version(&spec.params);
        let p: ContestParams = loads::workload::parse_params(CONTEST_WORKLOAD, &params)?;
        let target = p.pack_target();
        let jobs = p.jobs.unwrap_or(smp.saturating_mul(4)).max(1);
        let compilers = loads::pack_build::concurrent_compilers(JobLimit::Jobs(jobs as usize), target);
        let tree = if tree_in_memory { target.work_tree_mib() } else { 0 };
        let total = loads::pack_build::memory_needed_mib(compilers).saturating_add(tree);
        let mem = mem_for_mem_total(total);
        if worst.as_ref().is_none_or(|(m, _)| mem > *m) {
            let why = format!(
                "contest's foreground, the {} build at -j{jobs} ({compilers} compilers at once, a MemTotal of {total} MiB)",
                target.name()
            );
            worst = Some((mem, why));
        }
    }
    Ok(worst)
}

/// Gives every contest workload of `suite` a `mem_bytes` of `mem_mib`
/// unless it has one, after checking that half of this host's available
/// memory covers it (mem_load touches 110% of it).
pub fn bound_contest_memory(suite: &mut Suite, mem_mib: u64, available_bytes: Option<u64>) -> anyhow::Result<()> {
    let bytes = mem_mib.saturating_mul(1 << 20);
    for spec in suite.workloads.iter_mut().filter(|w| w.name == "contest") {
        let given = spec.params.get("mem_bytes").and_then(|v| v.as_u64());
        let effective = given.unwrap_or(bytes);
        if let Some(avail) = available_bytes {
            if effective.saturating_add(effective / 10) > avail / 2 {
                anyhow::bail!(
                    "contest's mem_bytes {} MiB is more than half of this host's available memory ({} MiB): mem_load would touch 110% of it; give a smaller --mem",
                    effective >> 20,
                    avail >> 20
                );
            }
        }
        if given.is_none() {
            spec.params.insert("mem_bytes".into(), bytes.into());
        }
    }
    Ok(())
}

/// The scratch room the suite's contest needs beyond its RAM-sized files,
/// or `None` when it runs no contest: for each contest whose rows include
/// dbench_load, its clients (`dbench_clients`, default 16 × `smp`) times
/// [`DBENCH_CLIENT_ROOM_BYTES`], plus [`BUILD_ROOM_BYTES`] when its
/// foreground is the pack build (its output tree stays beside dbench_load's
/// files).
pub fn contest_scratch_room(suite: &Suite, smp: u32) -> anyhow::Result<Option<u64>> {
    let mut room = None;
    for spec in suite.workloads.iter().filter(|w| w.name == CONTEST_WORKLOAD) {
        let params = loads::workload::params_without_version(&spec.params);
        let p: ContestParams = loads::workload::parse_params(CONTEST_WORKLOAD, &params)?;
        let clients = p.dbench_clients.unwrap_or(smp.saturating_mul(16));
        let dbench = if p.rows.iter().any(|r| r == LoadKind::Dbench.name()) { u64::from(clients) } else { 0 };
        let build = if loads::workloads::needs_pack(spec) { BUILD_ROOM_BYTES } else { 0 };
        let need = dbench.saturating_mul(DBENCH_CLIENT_ROOM_BYTES).saturating_add(build);
        room = Some(room.map_or(need, |r: u64| r.max(need)));
    }
    Ok(room)
}

/// The scratch room a kernel build in the pack needs for its objects: the
/// objects of a whole `vmlinux` of the pack's x86_64 defconfig, with room
/// to spare (the image is sparse).
pub const BUILD_ROOM_BYTES: u64 = 3 << 30;

/// The scratch room a kernel build in the pack needs for its objects
/// ([`BUILD_ROOM_BYTES`]), or `None` when the suite runs none (kernbench,
/// or contest with `build: "pack"`).
pub fn pack_build_scratch_room(suite: &Suite) -> Option<u64> {
    suite.workloads.iter().any(loads::workloads::needs_pack).then_some(BUILD_ROOM_BYTES)
}

/// The scratch room the suite needs beyond contest's RAM-sized files, or
/// `None` when nothing in it needs a scratch disk: the larger of contest's
/// ([`contest_scratch_room`]) and the pack build's
/// ([`pack_build_scratch_room`]).
pub fn scratch_room(suite: &Suite, smp: u32) -> anyhow::Result<Option<u64>> {
    let contest = contest_scratch_room(suite, smp)?;
    let build = pack_build_scratch_room(suite);
    Ok(match (contest, build) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    })
}

/// MemAvailable of this host, in bytes.
pub fn mem_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Loads a suite by built-in name (as built for guests of `arch`:
/// [`Suite::builtin_for`]) or from a JSON file.
pub fn load_suite(name_or_path: &str, arch: &str) -> anyhow::Result<Suite> {
    if loads::suite::BUILTIN_SUITES.contains(&name_or_path) {
        return Ok(Suite::builtin_for(name_or_path, arch)?);
    }
    let path = Path::new(name_or_path);
    let json = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read suite file '{name_or_path}' (built-in suites: {})",
            loads::suite::BUILTIN_SUITES.join(", ")
        )
    })?;
    Ok(Suite::from_json(name_or_path, &json)?)
}

/// Applies the command-line overrides the same way the guest applies
/// `bootbench.*` keys, so both validate identically.
pub fn apply_overrides(
    suite: Suite,
    iterations: Option<u32>,
    warmup: Option<u32>,
    workloads: Option<&str>,
) -> anyhow::Result<Suite> {
    let mut words = Vec::new();
    if let Some(n) = iterations {
        words.push(format!("bootbench.iterations={n}"));
    }
    if let Some(n) = warmup {
        words.push(format!("bootbench.warmup={n}"));
    }
    if let Some(w) = workloads {
        words.push(format!("bootbench.workloads={w}"));
    }
    let cfg = CmdlineConfig::parse(&words.join(" "))?;
    Ok(cfg.apply(suite)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernbench_memory_is_counted_before_the_boot() {
        for total in [1, 900, 960, 991, 992, 1700, 60_000] {
            let mem = mem_for_mem_total(total);
            assert!(mem - kernel_reserve_mib(mem) >= total, "{total}: {mem}");
            assert!(
                mem.is_multiple_of(64) && (mem - 64).saturating_sub(kernel_reserve_mib(mem - 64)) < total,
                "{total}: {mem} is the least"
            );
        }
        let suite = |params: &str| {
            Suite::from_json(
                "t",
                &format!(r#"{{"name":"t","workloads":[{{"name":"fork"}},{{"name":"kernbench","params":{params}}}]}}"#),
            )
            .unwrap()
        };
        let none = Suite::from_json("t", r#"{"name":"t","workloads":[{"name":"fork"}]}"#).unwrap();
        assert_eq!(pack_build_memory(&none, 2, false).unwrap(), None);
        // quick's four objects: 256 + 4 × 176 = 960 MiB of MemTotal at -j8
        // or -j (the last of equals is named); 256 + 176 at -j1.
        let (mem, why) = pack_build_memory(&suite("{}"), 2, false).unwrap().unwrap();
        assert_eq!(mem, mem_for_mem_total(960));
        assert!(why.contains("quick build at the maximal level (-j on 2 vCPUs, a MemTotal of 960 MiB)"), "{why}");
        let (half, _) = pack_build_memory(&suite(r#"{"jobs":"half"}"#), 2, false).unwrap().unwrap();
        assert_eq!(half, mem_for_mem_total(432));
        let full = suite(r#"{"target":"full","jobs":"half"}"#);
        let (on_disk, _) = pack_build_memory(&full, 2, false).unwrap().unwrap();
        let (in_memory, _) = pack_build_memory(&full, 2, true).unwrap().unwrap();
        let tree = loads::pack_build::target::Target::Full.work_tree_mib();
        assert_eq!(
            (on_disk, in_memory),
            (mem_for_mem_total(432), mem_for_mem_total(432 + tree)),
            "the tree in memory counts"
        );
        let (standard, why) =
            pack_build_memory(&suite(r#"{"target":"standard","jobs":"half,optimal"}"#), 4, false).unwrap().unwrap();
        assert_eq!(standard, mem_for_mem_total(256 + 16 * 176), "{why}");
        assert!(pack_build_memory(&suite(r#"{"jobs":"none"}"#), 2, false).is_err(), "bad params are an error");
        // contest's pack foreground counts its build.
        let contest = Suite::builtin_for("contest", "x86_64").unwrap();
        let (mem, why) = pack_build_memory(&contest, 2, false).unwrap().unwrap();
        assert_eq!(mem, mem_for_mem_total(960), "{why}");
        assert!(why.contains("contest's foreground, the quick build at -j8 (4 compilers at once"), "{why}");
        assert_eq!(pack_build_memory(&Suite::builtin_for("contest", "i386").unwrap(), 2, false).unwrap(), None);
    }

    #[test]
    fn contest_scratch_room_is_dbench_load_s_clients_room() {
        assert_eq!(contest_scratch_room(&Suite::builtin("quick").unwrap(), 2).unwrap(), None);
        let contest = Suite::builtin("contest").unwrap();
        assert_eq!(contest_scratch_room(&contest, 2).unwrap(), Some(32 * DBENCH_CLIENT_ROOM_BYTES), "16 × vCPUs");
        assert_eq!(contest_scratch_room(&contest, 4).unwrap(), Some(64 * DBENCH_CLIENT_ROOM_BYTES));
        let with = |params: serde_json::Value| {
            let json = serde_json::json!({ "name": "t", "workloads": [{ "name": "contest", "params": params }] });
            contest_scratch_room(&Suite::from_json("t", &json.to_string()).unwrap(), 2).unwrap()
        };
        assert_eq!(with(serde_json::json!({ "rows": "no_load,io_load" })), Some(0), "no dbench_load: no room");
        assert_eq!(with(serde_json::json!({ "dbench_clients": 3 })), Some(3 * DBENCH_CLIENT_ROOM_BYTES));
        // The pack build's output tree stays beside dbench_load's files.
        let pack = with(serde_json::json!({ "dbench_clients": 3, "build": "pack" }));
        assert_eq!(pack, Some(3 * DBENCH_CLIENT_ROOM_BYTES + BUILD_ROOM_BYTES));
        assert_eq!(with(serde_json::json!({ "rows": "no_load", "build": "synthetic" })), Some(0));
        assert!(contest_scratch_room(
            &Suite::from_json("t", r#"{"name":"t","workloads":[{"name":"contest","params":{"rows":5}}]}"#).unwrap(),
            2
        )
        .is_err());
    }

    #[test]
    fn contest_memory_is_bounded_by_mem_and_the_host() {
        let fresh = || {
            Suite::from_json(
                "t",
                r#"{"name":"t","iterations":1,"workloads":[{"name":"fork"},{"name":"contest"},{"name":"contest","params":{"mem_bytes":1048576}}]}"#,
            )
            .unwrap()
        };
        let mut suite = fresh();
        bound_contest_memory(&mut suite, 256, Some(8 << 30)).unwrap();
        assert_eq!(suite.workloads[1].params["mem_bytes"], serde_json::json!(256u64 << 20));
        assert_eq!(suite.workloads[2].params["mem_bytes"], serde_json::json!(1048576), "the suite's own value wins");
        assert!(suite.workloads[0].params.get("mem_bytes").is_none());
        let e = bound_contest_memory(&mut fresh(), 4096, Some(4 << 30)).unwrap_err().to_string();
        assert!(e.contains("more than half") && e.contains("--mem"), "{e}");
    }
}
