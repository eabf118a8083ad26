//! Where a run's boots run (`--target`): QEMU on this host, or a lab
//! machine (`crate::boot::lab_target`), with the flags a lab run takes.

use anyhow::bail;
use loads::lab_protocol;
use std::path::PathBuf;

/// The flags of a run on a lab machine (kept in a bisection's state, so a
/// resumed bisection boots where it booted).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LabTargetArgs {
    /// Where to boot: `qemu` (the default) or `lab:NAME`, a machine added
    /// with `bootbench lab machine add` whose agent is up (its store is
    /// --lab-db). Each boot is then a job for that machine.
    #[arg(long, default_value = "qemu", value_name = "qemu|lab:NAME")]
    pub target: String,
    /// The receiver's store that holds the lab's machines and job queue
    /// (`bootbench serve --db`), for --target lab:NAME.
    #[arg(long, value_name = "DB")]
    pub lab_db: Option<PathBuf>,
    /// A command that resets the lab machine (IPMI, a PDU), run with `sh
    /// -c` when a job times out or the machine does not come back to its
    /// agent, e.g. `ipmitool -H bmc power cycle`.
    #[arg(long, value_name = "CMD")]
    pub power_cycle: Option<String>,
    /// A command that prints the lab machine's serial console on stdout
    /// (e.g. `ipmitool sol activate`), run with `sh -c` for each job's
    /// duration: the job's console log, which sees panics before
    /// netconsole is up.
    #[arg(long, value_name = "CMD")]
    pub console_cmd: Option<String>,
}

impl Default for LabTargetArgs {
    fn default() -> Self {
        LabTargetArgs { target: "qemu".into(), lab_db: None, power_cycle: None, console_cmd: None }
    }
}

impl LabTargetArgs {
    /// These flags as `bootbench run` arguments (none for QEMU).
    pub fn to_argv(&self) -> Vec<String> {
        if self.target == "qemu" {
            return Vec::new();
        }
        let mut argv = vec!["--target".to_string(), self.target.clone()];
        let mut opt = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                argv.extend([format!("--{k}"), v]);
            }
        };
        opt("lab-db", self.lab_db.as_ref().map(|p| p.display().to_string()));
        opt("power-cycle", self.power_cycle.clone());
        opt("console-cmd", self.console_cmd.clone());
        argv
    }
}

/// Where a run boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// QEMU on this host.
    Qemu,
    /// A lab machine, by name.
    Lab(String),
}

impl LabTargetArgs {
    /// The target `--target` names.
    pub fn target(&self) -> anyhow::Result<Target> {
        match self.target.as_str() {
            "qemu" => Ok(Target::Qemu),
            t => match t.strip_prefix("lab:") {
                Some(name) if lab_protocol::valid_machine_name(name) => Ok(Target::Lab(name.to_string())),
                Some(name) => bail!(
                    "--target lab:{name}: '{name}' is not a machine name (letters, digits, '-', '_' and '.', at most {} characters)",
                    lab_protocol::MAX_MACHINE_NAME
                ),
                None => bail!("--target {t}: a target is 'qemu' or 'lab:NAME'"),
            },
        }
    }
}
