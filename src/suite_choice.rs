//! Choosing the suite of a run: a built-in by name or a JSON file, with the
//! command line's overrides applied exactly as the guest applies its
//! `bootbench.*` keys, and contest's memory bounded by what the host has.
//! Depends on `loads`' suite model and contest's parameters only.

use anyhow::Context;
use loads::known_loadfiles::DBENCH_CLIENT_ROOM_BYTES;
use loads::suite::{CmdlineConfig, Suite};
use loads::workloads::contest::background_loads::LoadKind;
use loads::workloads::contest::real_tree::ROOM_BYTES as REAL_TREE_ROOM_BYTES;
use loads::workloads::contest::{ContestParams, Foreground, LoadTools, NAME as CONTEST_WORKLOAD};
use std::path::Path;

/// MiB of a guest's RAM that its kernel keeps out of MemTotal (its image,
/// the page structs, firmware ranges), as estimated to check `--mem`
/// before a boot: 40 MiB and 1/32 of the RAM, and 32 MiB more from
/// [`RAM_SPLIT_MIB`] up, where q35 puts the RAM above 2 GiB beyond the
/// 32-bit PCI hole. Measured with Debian's 6.1 x86_64 kernel
/// ([`MEASURED_RESERVE_MIB`]); the estimate stays above each. The guest
/// checks its own MemTotal again; this only keeps a boot that cannot fit
/// from starting.
pub fn kernel_reserve_mib(mem_mib: u64) -> u64 {
    40 + mem_mib / 32 + if mem_mib >= RAM_SPLIT_MIB { 32 } else { 0 }
}

/// The guest RAM from which q35 splits it around the PCI hole (2.75 GiB).
pub const RAM_SPLIT_MIB: u64 = 2816;

/// (`--mem`, MiB kept out of MemTotal) measured with Debian's 6.1.0-57
/// x86_64 kernel under TCG: MemTotal 958, 1964.97, 3913.22, 7939.21 and
/// 15991.21 MiB.
pub const MEASURED_RESERVE_MIB: [(u64, f64); 5] =
    [(1024, 66.0), (2048, 83.03), (4096, 182.78), (8192, 252.79), (16384, 392.79)];

/// A guest as the host sees it before booting, for the memory checks its
/// builds in the pack will make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestMemory {
    /// `--mem`, MiB.
    pub mem_mib: u64,
    /// Swap (disk and zram), MiB.
    pub swap_mib: u64,
    /// vCPUs.
    pub smp: u32,
    /// Whether the builds' output trees are in memory (no scratch disk).
    pub tree_in_memory: bool,
}

impl GuestMemory {
    /// Its MemTotal as estimated ([`kernel_reserve_mib`]).
    pub fn mem_total_mib(&self) -> u64 {
        self.mem_mib.saturating_sub(kernel_reserve_mib(self.mem_mib))
    }
}

/// Checks `guest` against the memory checks the suite's builds in the pack
/// make when they start (kernbench's; contest's pack foreground with
/// mem_load's share, which may go to swap), with the MemTotal the host
/// estimates: `Ok(Err(why))` when one would refuse, `why` being its
/// error. An error is the suite's (bad parameters).
pub fn check_pack_builds(suite: &Suite, guest: GuestMemory) -> anyhow::Result<Result<(), String>> {
    use loads::workloads::contest::{background_loads::mem_load_bytes, check_pack_memory};
    use loads::workloads::kernbench::{check_memory, KernbenchParams, NAME as KERNBENCH};
    let have = guest.mem_total_mib();
    for spec in &suite.workloads {
        let params = loads::workload::params_without_version(&spec.params);
        let refused = if spec.name == KERNBENCH {
            let p: KernbenchParams = loads::workload::parse_params(KERNBENCH, &params)?;
            check_memory(p.target, &p.jobs, guest.smp, have, guest.tree_in_memory).err().map(|e| e.to_string())
        } else if spec.name == loads::workloads::sdet::NAME {
            use loads::workloads::sdet::{memory_needed_mib, SdetParams};
            let p: SdetParams = loads::workload::parse_params(&spec.name, &params)?;
            let need = memory_needed_mib(&p.levels);
            (have < need).then(|| {
                format!("sdet's largest level needs about {need} MiB of MemTotal, and the guest would have {have} MiB")
            })
        } else if spec.name == CONTEST_WORKLOAD && loads::workloads::builds_in_pack(spec) {
            let p: ContestParams = loads::workload::parse_params(CONTEST_WORKLOAD, &params)?;
            let jobs = p.jobs.unwrap_or(guest.smp.saturating_mul(4));
            // mem_bytes is the guest's MemTotal unless the suite gave one.
            let mem_bytes = p.mem_bytes.unwrap_or(have << 20);
            let mem_load = p.rows.iter().any(|r| r == LoadKind::Mem.name()).then(|| mem_load_bytes(mem_bytes, 4096));
            check_pack_memory(p.pack_target(), jobs, guest.tree_in_memory, mem_load, have, guest.swap_mib)
                .err()
                .map(|e| e.to_string())
        } else {
            None
        };
        if let Some(why) = refused {
            return Ok(Err(why));
        }
    }
    Ok(Ok(()))
}

/// The smallest `--mem` from `from_mib` up to `upto_mib`, a multiple of
/// `step_mib` (at least 64 MiB; the machine's granularity, see
/// `qemu::ArchProfile::mem_step_mib`), for which `fits` holds; `None` when
/// none does.
pub fn least_mem_that_fits(
    from_mib: u64,
    upto_mib: u64,
    step_mib: u64,
    mut fits: impl FnMut(u64) -> anyhow::Result<bool>,
) -> anyhow::Result<Option<u64>> {
    let step = step_mib.max(64);
    let mut mem = from_mib.div_ceil(step).max(1) * step;
    while mem <= upto_mib {
        if fits(mem)? {
            return Ok(Some(mem));
        }
        mem += step;
    }
    Ok(None)
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
        let build = if p.build == Foreground::Pack { BUILD_ROOM_BYTES } else { 0 };
        // The real tree of the tar and list loads, its archive and a copy.
        let tree_rows = [LoadKind::Ctar, LoadKind::Xtar, LoadKind::List].map(LoadKind::name);
        let tree =
            if p.effective_load_tools() == LoadTools::Pack && p.rows.iter().any(|r| tree_rows.contains(&r.as_str())) {
                REAL_TREE_ROOM_BYTES
            } else {
                0
            };
        let need = dbench.saturating_mul(DBENCH_CLIENT_ROOM_BYTES).saturating_add(build).saturating_add(tree);
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
    suite.workloads.iter().any(loads::workloads::builds_in_pack).then_some(BUILD_ROOM_BYTES)
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
    load_suite_for(name_or_path, arch, true)
}

/// The built-in suite `name` for guests of `arch`: with `real_builds`, as
/// [`Suite::builtin_for`] builds it (Linux compiled in the pack where
/// there is one); without (`--pack none`), the synthetic builds on every
/// arch.
pub fn builtin_suite(name: &str, arch: &str, real_builds: bool) -> anyhow::Result<Suite> {
    Ok(if real_builds { Suite::builtin_for(name, arch)? } else { Suite::builtin(name)? })
}

/// [`load_suite`], the built-in suites as [`builtin_suite`] makes them.
pub fn load_suite_for(name_or_path: &str, arch: &str, real_builds: bool) -> anyhow::Result<Suite> {
    if loads::suite::BUILTIN_SUITES.contains(&name_or_path) {
        return builtin_suite(name_or_path, arch, real_builds);
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

    #[test]
    fn the_kernel_reserve_estimate_stays_above_every_measured_one() {
        for (mem, kept) in MEASURED_RESERVE_MIB {
            let est = kernel_reserve_mib(mem) as f64;
            assert!(est >= kept && est <= 1.6 * kept, "--mem {mem}M: estimated {est} MiB kept, measured {kept}");
        }
    }

    use super::*;

    #[test]
    fn the_builds_in_the_pack_are_checked_before_the_boot_as_the_guest_checks_them() {
        // The least --mem of 64 MiB steps whose estimated MemTotal holds
        // `total` MiB.
        let for_total = |total: u64| {
            least_mem_that_fits(64, 1 << 20, 64, |m| Ok(m - kernel_reserve_mib(m) >= total)).unwrap().unwrap()
        };
        assert_eq!(for_total(952), 1024, "1024 - 72");
        assert_eq!(for_total(953), 1088);
        // The least --mem the suite's builds fit in, with `swap(mem)` of swap.
        let least = |suite: &Suite, smp: u32, tree_in_memory: bool, swap: fn(u64) -> u64| {
            least_mem_that_fits(64, 1 << 20, 64, |mem_mib| {
                let g = GuestMemory { mem_mib, swap_mib: swap(mem_mib), smp, tree_in_memory };
                Ok(check_pack_builds(suite, g)?.is_ok())
            })
            .unwrap()
        };
        let no_swap: fn(u64) -> u64 = |_| 0;
        let suite = |params: &str| {
            Suite::from_json(
                "t",
                &format!(r#"{{"name":"t","workloads":[{{"name":"fork"}},{{"name":"kernbench","params":{params}}}]}}"#),
            )
            .unwrap()
        };
        let none = Suite::from_json("t", r#"{"name":"t","workloads":[{"name":"fork"}]}"#).unwrap();
        assert_eq!(least(&none, 2, false, no_swap), Some(64), "nothing to hold");
        // quick's four objects: 256 + 4 × 176 = 960 MiB of MemTotal at -j8
        // or -j; 256 + 176 at -j1.
        assert_eq!(least(&suite("{}"), 2, false, no_swap), Some(for_total(960)));
        let g = GuestMemory { mem_mib: 1024, swap_mib: 0, smp: 2, tree_in_memory: false };
        let why = check_pack_builds(&suite("{}"), g).unwrap().unwrap_err();
        assert!(why.contains("needs about 960 MiB") && why.contains("MemTotal is 952 MiB"), "the guest's words: {why}");
        assert_eq!(least(&suite(r#"{"jobs":"half"}"#), 2, false, no_swap), Some(for_total(432)));
        let full = suite(r#"{"target":"full","jobs":"half"}"#);
        let tree = loads::pack_build::target::Target::Full.work_tree_mib();
        assert_eq!(least(&full, 2, true, no_swap), Some(for_total(432 + tree)), "the tree in memory counts");
        let standard = suite(r#"{"target":"standard","jobs":"half,optimal"}"#);
        assert_eq!(least(&standard, 4, false, no_swap), Some(for_total(256 + 16 * 176)));
        let g = GuestMemory { mem_mib: 1024, swap_mib: 0, smp: 2, tree_in_memory: false };
        assert!(check_pack_builds(&suite(r#"{"jobs":"none"}"#), g).is_err(), "bad params are an error");
        // contest's pack foreground: its build, and mem_load's 110% of
        // MemTotal beside it, in RAM and swap.
        let contest = Suite::builtin_for("contest", "x86_64").unwrap();
        assert_eq!(least(&contest, 2, false, no_swap), None, "mem_load needs swap beside the build");
        let swap_disk: fn(u64) -> u64 = |m| m;
        let zram: fn(u64) -> u64 = |m| m / 2;
        let with_disk = least(&contest, 2, false, swap_disk).unwrap();
        let with_zram = least(&contest, 2, false, zram).unwrap();
        // The same from the guest's rule written out: the build (960 MiB)
        // and mem_load (110% of MemTotal) within MemTotal and swap.
        let by_rule = |swap: fn(u64) -> u64| {
            least_mem_that_fits(64, 1 << 20, 64, |m| {
                let total = m - kernel_reserve_mib(m);
                Ok(960 + (total * 11).div_ceil(10) <= total + swap(m))
            })
            .unwrap()
            .unwrap()
        };
        assert_eq!((with_disk, with_zram), (by_rule(swap_disk), by_rule(zram)));
        assert!(with_zram > with_disk, "half as much swap: {with_zram} > {with_disk}");
        let rows = Suite::from_json(
            "t",
            r#"{"name":"t","workloads":[{"name":"contest","params":{"build":"pack","rows":"no_load,io_load"}}]}"#,
        )
        .unwrap();
        assert_eq!(least(&rows, 2, false, no_swap), Some(for_total(960)), "without mem_load, the build alone");
        assert_eq!(
            least(&Suite::builtin_for("contest", "ppc64").unwrap(), 2, false, no_swap),
            Some(64),
            "ppc64 has no pack"
        );
    }

    #[test]
    fn the_pack_s_loads_beside_a_synthetic_build_ask_for_no_build_memory() {
        let g = GuestMemory { mem_mib: 512, swap_mib: 0, smp: 2, tree_in_memory: false };
        let suite = |params: &str| {
            let json = format!(r#"{{"name":"t","workloads":[{{"name":"contest","params":{params}}}]}}"#);
            Suite::from_json("t", &json).unwrap()
        };
        let loads_only = suite(r#"{"rows":"no_load,list_load","load_tools":"pack"}"#);
        assert_eq!(check_pack_builds(&loads_only, g).unwrap(), Ok(()), "no Linux build: no compilers' memory");
        let build = suite(r#"{"rows":"no_load,list_load","build":"pack"}"#);
        assert!(check_pack_builds(&build, g).unwrap().is_err(), "the pack build's four compilers need 960 MiB");
        // SDET's largest level: 128 + 32 MiB a script.
        let sdet = |levels: &str| {
            let json = format!(r#"{{"name":"t","workloads":[{{"name":"sdet","params":{{"levels":{levels}}}}}]}}"#);
            Suite::from_json("t", &json).unwrap()
        };
        let have = g.mem_total_mib();
        assert_eq!(check_pack_builds(&sdet("[1,4]"), g).unwrap(), Ok(()));
        let why = check_pack_builds(&sdet("[1,16]"), g).unwrap().unwrap_err();
        assert_eq!(
            why,
            format!("sdet's largest level needs about 640 MiB of MemTotal, and the guest would have {have} MiB")
        );
    }

    #[test]
    fn only_a_kernel_build_in_the_pack_asks_for_its_scratch_room() {
        let suite = |w: &str| Suite::from_json("t", &format!(r#"{{"name":"t","workloads":[{w}]}}"#)).unwrap();
        assert_eq!(scratch_room(&suite(r#"{"name":"kernbench"}"#), 2).unwrap(), Some(BUILD_ROOM_BYTES));
        // SDET's scripts run in the pack, but their homes are in the work
        // directory: no scratch disk for them.
        let sdet = suite(r#"{"name":"sdet"}"#);
        assert!(sdet.workloads.iter().any(loads::workloads::needs_pack));
        assert_eq!(scratch_room(&sdet, 2).unwrap(), None);
        let contest = suite(r#"{"name":"contest","params":{"rows":"list_load","load_tools":"pack"}}"#);
        assert_eq!(scratch_room(&contest, 2).unwrap(), Some(REAL_TREE_ROOM_BYTES), "the tree, not a build's objects");
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
        // The pack build's loads are the pack's tar and ls, on a real tree.
        assert_eq!(pack, Some(3 * DBENCH_CLIENT_ROOM_BYTES + BUILD_ROOM_BYTES + REAL_TREE_ROOM_BYTES));
        let rows = "no_load,dbench_load";
        let pack = with(serde_json::json!({ "dbench_clients": 3, "build": "pack", "rows": rows }));
        assert_eq!(pack, Some(3 * DBENCH_CLIENT_ROOM_BYTES + BUILD_ROOM_BYTES), "no tar or list row: no tree");
        let tools = with(serde_json::json!({ "rows": "list_load", "load_tools": "pack" }));
        assert_eq!(tools, Some(REAL_TREE_ROOM_BYTES), "the synthetic build with the pack's loads");
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
