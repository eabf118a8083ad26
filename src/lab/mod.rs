//! bootbench's own lab: real machines that boot candidate kernels by
//! kexec from a resident agent (the appliance's init in role `agent`),
//! with jobs queued in the receiver's store. This module holds what a lab
//! operator runs besides `run --target lab:NAME` (which is
//! `crate::boot::lab_target`): the machines (`machine add`, `list`), the
//! queue's state (`status`), and the agent's boot files (`bundle`).

pub mod bundle;

use crate::service::lab_queue::{Job, Machine, MachineSpec};
use crate::service::store::Store;
use std::path::PathBuf;

/// Errors of the lab commands.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A bundle's input is wrong.
    #[error("{what}: {why}")]
    Bundle {
        /// What was being made.
        what: String,
        /// Why it cannot be.
        why: String,
    },
    /// A file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A machine's description is wrong.
    #[error("lab machine '{name}': {why}")]
    Machine {
        /// The machine.
        name: String,
        /// Why.
        why: String,
    },
}

/// The archs a machine can be.
pub const ARCHS: &[&str] = &["x86_64", "i386", "ppc64", "ppc64le"];

/// Checks a machine's description before it is stored.
pub fn check_machine(name: &str, spec: &MachineSpec) -> Result<(), LabError> {
    let bad = |why: String| LabError::Machine { name: name.to_string(), why };
    if !loads::lab_protocol::valid_machine_name(name) {
        return Err(bad(format!(
            "not a machine name (letters, digits, '-', '_' and '.', at most {} characters, not starting with '.')",
            loads::lab_protocol::MAX_MACHINE_NAME
        )));
    }
    if !ARCHS.contains(&spec.arch.as_str()) {
        return Err(bad(format!("--arch {}: one of {}", spec.arch, ARCHS.join(", "))));
    }
    if spec.console.is_empty() || spec.console.contains(char::is_whitespace) {
        return Err(bad(format!("--console '{}': one word, e.g. ttyS0,115200n8", spec.console)));
    }
    if !["bare-metal", "kvm", "tcg"].contains(&spec.accel.as_str()) {
        return Err(bad(format!("--accel {}: bare-metal, kvm or tcg", spec.accel)));
    }
    if let Some(l) = spec.scratch_label.as_deref().filter(|l| !loads::suite::valid_scratch_label(l)) {
        return Err(bad(format!(
            "--scratch-label '{l}': an ext2/3/4 volume label, 1 to {} letters, digits, '.', '_' or '-'",
            loads::suite::MAX_SCRATCH_LABEL
        )));
    }
    if let Some(l) = spec.pack_label.as_deref().filter(|l| !loads::suite::valid_scratch_label(l)) {
        return Err(bad(format!(
            "--pack-label '{l}': an ext2/3/4 volume label, 1 to {} letters, digits, '.', '_' or '-'",
            loads::suite::MAX_SCRATCH_LABEL
        )));
    }
    if let (Some(p), Some(s)) = (&spec.pack_label, &spec.scratch_label) {
        if p == s {
            return Err(bad(format!(
                "--pack-label {p}: the same label as --scratch-label; the scratch filesystem is emptied before every job, so the packs need their own"
            )));
        }
    }
    if spec.poll_s == 0 || spec.poll_s > loads::lab_protocol::MAX_POLL_S {
        return Err(bad(format!("--poll {}: 1 to {} seconds", spec.poll_s, loads::lab_protocol::MAX_POLL_S)));
    }
    Ok(())
}

/// The status table of the lab in `store`: each machine with its last
/// hello and the state of its newest jobs.
pub fn status(store: &Store, machine: Option<&str>, jobs: usize) -> anyhow::Result<String> {
    let machines: Vec<Machine> = match machine {
        Some(m) => vec![store.machine(m)?],
        None => store.machines()?,
    };
    let mut out = String::new();
    for m in &machines {
        out.push_str(&format!(
            "machine {} ({}, console {}, accel {}{}){}: last hello {}{}\n",
            m.name,
            m.spec.arch,
            m.spec.console,
            m.spec.accel,
            [("scratch", &m.spec.scratch_label), ("pack store", &m.spec.pack_label)]
                .iter()
                .filter_map(|(what, l)| l.as_deref().map(|l| format!(", {what} label {l}")))
                .collect::<String>(),
            if m.revoked { " REVOKED" } else { "" },
            m.last_hello_at.as_deref().unwrap_or("never"),
            m.last_hello.as_ref().map(|h| format!(" (agent kernel {})", h.agent_kernel)).unwrap_or_default()
        ));
        let list: Vec<Job> = store.lab_jobs(Some(&m.name), jobs)?;
        let queued = list.iter().filter(|j| j.state == "queued").count();
        out.push_str(&format!("  {queued} queued\n"));
        for j in &list {
            out.push_str(&format!(
                "  job {:>5}  {:<9}  queued {}{}{}\n",
                j.id,
                j.state,
                j.created_at,
                j.run_id.as_deref().map(|r| format!("  run {r}")).unwrap_or_default(),
                j.failure.as_deref().map(|f| format!("  ({f})")).unwrap_or_default()
            ));
        }
    }
    if machines.is_empty() {
        out.push_str("no lab machines (bootbench lab machine add NAME --db DB)\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(scratch: Option<&str>, pack: Option<&str>) -> MachineSpec {
        MachineSpec {
            arch: "x86_64".into(),
            console: "ttyS0".into(),
            accel: "bare-metal".into(),
            poll_s: 10,
            scratch_label: scratch.map(String::from),
            pack_label: pack.map(String::from),
        }
    }

    #[test]
    fn a_machines_labels_are_checked_and_the_pack_store_is_not_the_scratch_partition() {
        check_machine("box1", &spec(Some("bb-scratch"), Some("bb-packs"))).unwrap();
        check_machine("box1", &spec(None, Some("bb-packs"))).unwrap();
        let e = check_machine("box1", &spec(Some("bb"), Some("bb"))).unwrap_err().to_string();
        assert!(e.contains("--pack-label bb") && e.contains("--scratch-label"), "{e}");
        let e = check_machine("box1", &spec(None, Some("has space"))).unwrap_err().to_string();
        assert!(e.contains("--pack-label 'has space'"), "{e}");
        let e = check_machine("box1", &spec(None, Some(&"x".repeat(17)))).unwrap_err().to_string();
        assert!(e.contains("--pack-label"), "{e}");
    }
}
