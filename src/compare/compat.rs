//! Whether two kernel groups may be compared: the same workloads with the
//! same parameters and metrics (else a refusal), and the same kind of
//! machine (else a prominent warning, since a different vCPU count, accel
//! mode or arch can pass for a kernel difference).

use super::samples::{version_text, GroupSamples, WorkloadKey};
use crate::results::{BootRecord, HostRef};
use std::collections::{BTreeMap, BTreeSet};

/// Why two groups cannot be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompatError {
    /// The same workload ran with different parameters.
    #[error("workload {name} ran with different parameters: {base_name} {base_params}, {cand_name} {cand_params}; compare runs of the same suite")]
    DifferentParams {
        /// Workload name.
        name: String,
        /// Baseline group's name.
        base_name: String,
        /// Its parameter sets.
        base_params: String,
        /// Candidate group's name.
        cand_name: String,
        /// Its parameter sets.
        cand_params: String,
    },
    /// The same workload ran in different versions (different bootbench
    /// releases, whose workloads measure differently).
    #[error("workload {name} is version {base_versions} for {base_name} and version {cand_versions} for {cand_name}: different versions measure different things, so they are never compared; rerun both with the same bootbench")]
    DifferentVersions {
        /// Workload name.
        name: String,
        /// Baseline group's name.
        base_name: String,
        /// Its versions.
        base_versions: String,
        /// Candidate group's name.
        cand_name: String,
        /// Its versions.
        cand_versions: String,
    },
    /// A workload ran in one group only.
    #[error("workload {workload} ran for {has} but not for {lacks}; compare runs of the same suite, or restrict with --workloads")]
    DifferentWorkloads {
        /// The workload.
        workload: String,
        /// Group that has it.
        has: String,
        /// Group that lacks it.
        lacks: String,
    },
    /// A metric is reported by one group only (different bootbench builds).
    #[error("metric '{metric}' of workload {workload} is reported for {has} but not for {lacks}")]
    DifferentMetrics {
        /// The workload.
        workload: String,
        /// The metric.
        metric: String,
        /// Group that has it.
        has: String,
        /// Group that lacks it.
        lacks: String,
    },
}

fn versions_by_name(ws: &BTreeSet<WorkloadKey>) -> BTreeMap<&str, BTreeSet<Option<u32>>> {
    let mut out: BTreeMap<&str, BTreeSet<Option<u32>>> = BTreeMap::new();
    for w in ws {
        out.entry(w.name.as_str()).or_default().insert(w.version);
    }
    out
}

fn params_by_name(ws: &BTreeSet<WorkloadKey>) -> BTreeMap<&str, Vec<&str>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for w in ws {
        out.entry(w.name.as_str()).or_default().push(w.params.as_str());
    }
    out
}

/// Refuses to compare unlike runs.
pub fn check_comparable(
    base_name: &str,
    base: &GroupSamples,
    cand_name: &str,
    cand: &GroupSamples,
) -> Result<(), CompatError> {
    let (bv, cv) = (versions_by_name(&base.workloads), versions_by_name(&cand.workloads));
    for (name, b) in &bv {
        match cv.get(name) {
            Some(c) if c != b || b.len() > 1 => {
                let text =
                    |vs: &BTreeSet<Option<u32>>| vs.iter().map(|v| version_text(*v)).collect::<Vec<_>>().join(" and ");
                return Err(CompatError::DifferentVersions {
                    name: name.to_string(),
                    base_name: base_name.into(),
                    base_versions: text(b),
                    cand_name: cand_name.into(),
                    cand_versions: text(c),
                });
            }
            _ => {}
        }
    }
    let (bp, cp) = (params_by_name(&base.workloads), params_by_name(&cand.workloads));
    for (name, b) in &bp {
        match cp.get(name) {
            Some(c) if c == b => {}
            Some(c) => {
                return Err(CompatError::DifferentParams {
                    name: name.to_string(),
                    base_name: base_name.into(),
                    base_params: b.join(" "),
                    cand_name: cand_name.into(),
                    cand_params: c.join(" "),
                })
            }
            None => {
                return Err(CompatError::DifferentWorkloads {
                    workload: name.to_string(),
                    has: base_name.into(),
                    lacks: cand_name.into(),
                })
            }
        }
    }
    if let Some(name) = cp.keys().find(|n| !bp.contains_key(*n)) {
        return Err(CompatError::DifferentWorkloads {
            workload: name.to_string(),
            has: cand_name.into(),
            lacks: base_name.into(),
        });
    }
    for (has, lacks, a, b) in [(base_name, cand_name, base, cand), (cand_name, base_name, cand, base)] {
        if let Some(k) = a.metrics.keys().find(|k| !b.metrics.contains_key(*k)) {
            return Err(CompatError::DifferentMetrics {
                workload: k.workload.to_string(),
                metric: k.metric.clone(),
                has: has.into(),
                lacks: lacks.into(),
            });
        }
    }
    Ok(())
}

/// What must match between boots, as (aspect, value) pairs.
fn environment(b: &BootRecord) -> Vec<(&'static str, String)> {
    let guest = b.result.as_ref().map(|d| &d.provenance);
    vec![
        ("arch", b.machine.arch.clone()),
        ("accel", b.machine.accel.clone()),
        ("vCPUs", b.machine.smp.to_string()),
        ("memory", format!("{} MiB", b.machine.mem_mib)),
        ("CPU model", cpu_model(b)),
        // The versioned type (`q35` stands for a different machine in each
        // QEMU release); files written before it was recorded say nothing.
        ("machine type", b.machine.machine_type.clone().unwrap_or_default()),
        ("QEMU", b.qemu.version.clone()),
        // The shift scales guest time per instruction.
        ("icount", b.qemu.option("-icount").unwrap_or_default().to_string()),
        // A different init or suite is a different benchmark.
        ("initramfs sha256", b.initramfs.sha256.get(..12).unwrap_or(&b.initramfs.sha256).to_string()),
        ("guest CPUs online", guest.map(|p| p.machine.cpus.to_string()).unwrap_or_default()),
        ("bootbench", guest.map(|p| p.bootbench.version.clone()).unwrap_or_default()),
        // The disks' speed is part of the machine for the workloads that
        // use them (contest, and dbench on the scratch disk).
        ("disk I/O", disk_io(b)),
        ("disk throttle", disk_throttle(b)),
    ]
}

/// The CPU model the guest ran: as recorded, else the argv's `-cpu` (files
/// written before the model was recorded), else the one asked for; empty
/// (no difference) when unknown, as for a store's bare document or an
/// older file that left QEMU's default unnamed.
fn cpu_model(b: &BootRecord) -> String {
    b.machine
        .cpu_model
        .clone()
        .or_else(|| b.qemu.option("-cpu").map(str::to_string))
        .or_else(|| b.machine.cpu.clone())
        .unwrap_or_default()
}

/// How QEMU did the disks' I/O; empty without disks.
fn disk_io(b: &BootRecord) -> String {
    let Some(s) = &b.storage else { return String::new() };
    if s.scratch.is_none() && s.swap.is_none() {
        return String::new();
    }
    // Files written before this was recorded used QEMU's default.
    s.io.as_ref()
        .map_or_else(|| "cache=writeback,aio=threads".into(), |io| format!("cache={},aio={}", io.cache, io.aio))
}

/// The disks' throttle; empty without disks.
fn disk_throttle(b: &BootRecord) -> String {
    let Some(s) = &b.storage else { return String::new() };
    if s.scratch.is_none() && s.swap.is_none() {
        return String::new();
    }
    match &s.throttle {
        None => "none".into(),
        Some(t) => match t.iops_total {
            Some(iops) => format!("{} B/s, {iops} IOPS", t.bps_total),
            None => format!("{} B/s", t.bps_total),
        },
    }
}

/// Each workload's warmup and measured iteration counts, e.g.
/// `fork 1+3, dbench 0+3`.
fn iteration_counts(b: &BootRecord) -> Vec<(&'static str, String)> {
    let parts: Vec<String> = b
        .result
        .iter()
        .flat_map(|d| &d.workloads)
        .map(|w| format!("{} {}+{}", w.name, w.warmup, w.iterations.len()))
        .collect();
    vec![("warmup+measured iterations", parts.join(", "))]
}

/// Warnings for every aspect of the machine that differs across the boots
/// of all groups (`groups` are (name, boots) pairs). Empty values (boots
/// without a guest document) are ignored.
///
/// When the boots ran on more than one host, a line saying so: under
/// icount on one vCPU without disks, with the same virtual machine known
/// to have run everywhere, that the figures compare across the hosts;
/// otherwise a warning.
pub fn environment_warnings(groups: &[(&str, &[BootRecord])]) -> Vec<String> {
    let mut out = differences(groups, environment);
    out.extend(hosts_line(groups, out.is_empty()));
    out
}

/// The line about the hosts behind the boots, when there is more than one
/// (boots without a recorded host are left out); `same_machine` says that
/// no aspect of [`environment`] differs. A host is its name, CPU and CPU
/// count: two machines that share a default hostname still differ.
fn hosts_line(groups: &[(&str, &[BootRecord])], same_machine: bool) -> Option<String> {
    // Keyed by what tells hosts apart; the kernel release may change.
    let mut hosts: BTreeMap<(&str, &str, u32), (&HostRef, BTreeSet<&str>)> = BTreeMap::new();
    for (name, boots) in groups {
        for h in boots.iter().filter_map(|b| b.host.as_ref()).filter(|h| !h.name.is_empty()) {
            hosts.entry((h.name.as_str(), h.cpu.as_str(), h.cpus)).or_insert((h, BTreeSet::new())).1.insert(name);
        }
    }
    if hosts.len() < 2 {
        return None;
    }
    let names: BTreeSet<&str> = hosts.keys().map(|k| k.0).collect();
    let listed: Vec<String> = hosts
        .values()
        .map(|(h, groups)| {
            // The CPU is named only where the names alone would not tell
            // the hosts apart.
            let host = if names.len() == hosts.len() { h.name.clone() } else { h.describe() };
            format!("{host} ({})", groups.iter().copied().collect::<Vec<_>>().join(", "))
        })
        .collect();
    let listed = listed.join(" vs ");
    let boots = || groups.iter().flat_map(|(_, boots)| boots.iter());
    if !boots().all(|b| b.machine.accel == "icount") {
        return Some(format!(
            "the machines differ — the boots ran on different hosts: {listed}; real-clock figures measure the host as much as the kernel: compare boots of one host, or icount boots (--clock icount), whose figures do not depend on the host"
        ));
    }
    if !same_machine {
        return Some(format!(
            "the boots ran on different hosts: {listed}; icount figures compare across hosts only when the virtual machine is the same, and here it is not (the differences are listed above)"
        ));
    }
    // What lets the host's timing reach an icount guest, or leaves the
    // machine unknown.
    let mut reasons = Vec::new();
    if boots().any(|b| b.machine.machine_type.is_none()) {
        reasons.push("some boots do not record their machine type (older files or a failed QEMU query)");
    }
    if boots().any(|b| b.machine.smp > 1) {
        reasons.push("with more than one vCPU, when host events land decides where the guest's tasks run");
    }
    if boots().any(|b| b.storage.as_ref().is_some_and(|s| s.scratch.is_some() || s.swap.is_some()) || b.pack.is_some())
    {
        reasons.push("disk I/O completes at host-dependent points of the guest's instruction stream");
    }
    Some(if reasons.is_empty() {
        format!(
            "the boots ran on different hosts: {listed}; all ran under icount on one vCPU without disks, with the same QEMU, machine type, CPU model, memory, initramfs and bootbench, so their figures count the same virtual machine's instructions and compare across the hosts"
        )
    } else {
        format!(
            "the boots ran on different hosts: {listed}; they ran the same virtual machine under icount, but their figures may differ across the hosts by more than within one: {}",
            reasons.join("; ")
        )
    })
}

/// A warning when the boots' warmup or measured iteration counts differ.
/// Iterations can drift within a boot (page cache, slab and PID state grow
/// as it goes on), so a boot's mean, the sample of a comparison, depends on
/// which iterations it covers.
pub fn iteration_count_warnings(groups: &[(&str, &[BootRecord])]) -> Vec<String> {
    differences(groups, iteration_counts)
}

/// A line per aspect (from `aspects`) whose value differs across boots.
fn differences(
    groups: &[(&str, &[BootRecord])],
    aspects: fn(&BootRecord) -> Vec<(&'static str, String)>,
) -> Vec<String> {
    let mut seen: BTreeMap<&'static str, BTreeMap<String, BTreeSet<&str>>> = BTreeMap::new();
    let mut order: Vec<&'static str> = Vec::new();
    for (name, boots) in groups {
        for b in *boots {
            for (aspect, value) in aspects(b) {
                if value.is_empty() {
                    continue;
                }
                if !order.contains(&aspect) {
                    order.push(aspect);
                }
                seen.entry(aspect).or_default().entry(value).or_default().insert(name);
            }
        }
    }
    let mut out = Vec::new();
    for aspect in order {
        let Some(values) = seen.get(aspect) else { continue };
        if values.len() > 1 {
            let parts: Vec<String> = values
                .iter()
                .map(|(v, names)| format!("{v} ({})", names.iter().copied().collect::<Vec<_>>().join(", ")))
                .collect();
            let severe =
                matches!(aspect, "arch" | "accel" | "vCPUs" | "memory" | "CPU model" | "machine type" | "icount");
            out.push(format!(
                "{}{aspect} differs: {}",
                if severe { "the machines differ — " } else { "" },
                parts.join(" vs ")
            ));
        }
    }
    out
}
