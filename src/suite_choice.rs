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

/// Loads a suite by built-in name or from a JSON file.
pub fn load_suite(name_or_path: &str) -> anyhow::Result<Suite> {
    if loads::suite::BUILTIN_SUITES.contains(&name_or_path) {
        return Ok(Suite::builtin(name_or_path)?);
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
