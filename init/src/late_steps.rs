//! The steps after the result is on the console: late module loads (the
//! results port's and the NIC's drivers), the copy on the virtio port, the
//! scratch disk's sync and umount, and the upload. Each may block in the
//! kernel under test, so each runs in a child with a time bound
//! ([`bounded_child`]); a failure or a passed bound is printed as a
//! `late-step` event, and the boot still powers off with its result intact.

use crate::bounded_child::{self, StepEnd};
use crate::module_loader;
use crate::result_channels::{self, console_line, say};
use crate::result_upload::{self, UploadPlan};
use crate::scratch_storage;
use crate::secrets::Secrets;
use crate::test_faults::Faults;
use loads::console_protocol::{self, EVENT_LATE_STEP};
use loads::error_chain::error_chain;
use loads::schema::StorageInfo;
use loads::suite::CmdlineConfig;
use nix::sys::signalfd::SignalFd;
use std::time::Duration;

/// Bound on loading the late modules.
pub const MODULES_LIMIT: Duration = Duration::from_secs(30);
/// Bound on writing the results port (it waits up to 5 s for the port).
pub const PORT_LIMIT: Duration = Duration::from_secs(20);
/// Bound on the scratch disk's sync and umount.
pub const STORAGE_LIMIT: Duration = Duration::from_secs(60);
/// Bound on the step `bootbench.test_fault=late-hang` makes hang.
pub const LATE_HANG_LIMIT: Duration = Duration::from_secs(10);

/// What runs after the result, from the cmdline.
#[derive(Debug, Clone)]
pub struct LateSteps {
    load_modules: bool,
    port: Option<String>,
    upload: Option<UploadPlan>,
}

impl LateSteps {
    /// The plan for a run with these cmdline keys and the secrets segment.
    pub fn new(cmdline: &CmdlineConfig, load_modules: bool, secrets: Secrets) -> LateSteps {
        LateSteps { load_modules, port: cmdline.port.clone(), upload: result_upload::plan(cmdline, secrets) }
    }

    /// The network is up already (netconsole brought it up before the
    /// workloads): the upload finds it as it is instead of configuring it
    /// again.
    pub fn network_configured(&mut self, net: crate::network::NetRequest) {
        if let Some(plan) = &mut self.upload {
            plan.net = net;
        }
    }

    /// The bound on the network and upload step (zero without an upload).
    pub fn upload_limit(&self) -> Duration {
        self.upload.as_ref().map(UploadPlan::limit).unwrap_or_default()
    }

    /// Runs every step in order, each bounded. `lines` is the framed
    /// result for the port, `json` the document for the upload.
    pub fn run(
        &self,
        sfd: Option<&SignalFd>,
        faults: &Faults,
        storage: Option<&StorageInfo>,
        run_id: &str,
        json: &str,
        lines: &[String],
    ) {
        if faults.late_hang() {
            step(sfd, "late-hang", LATE_HANG_LIMIT, || loop {
                std::thread::sleep(Duration::from_secs(3600));
            });
        }
        // Modules are only needed for the result port and the NIC, so they
        // load after the measurements: probing would add noise to them.
        if self.load_modules {
            step(sfd, "modules", MODULES_LIMIT, || {
                let (_, errors) = module_loader::load_listed(module_loader::MODULES_LIST);
                for e in &errors {
                    say(&format!("late module load: {}", error_chain(e)));
                }
                i32::from(!errors.is_empty())
            });
        }
        if let Some(port) = &self.port {
            step(sfd, "port", PORT_LIMIT, || match result_channels::emit_port(port, lines) {
                Ok(()) => 0,
                Err(e) => {
                    say(&format!("results port: {}", error_chain(&e)));
                    1
                }
            });
        }
        if storage.and_then(|s| s.scratch_mount.as_deref()).is_some() {
            step(sfd, "storage", STORAGE_LIMIT, || match scratch_storage::teardown(storage) {
                Ok(()) => 0,
                Err(e) => {
                    say(&format!("scratch disk teardown: {}", error_chain(&e)));
                    1
                }
            });
        }
        // Last channel: the document is already on the console, so the
        // upload (and the network it needs) can fail without losing it.
        if let Some(plan) = &self.upload {
            step(sfd, "upload", self.upload_limit(), || {
                result_upload::deliver(plan, run_id, json);
                0
            });
        }
    }
}

/// The `late-step` event text for a step that did not succeed.
pub fn event_text(name: &str, end: &StepEnd) -> String {
    let status = match end {
        StepEnd::Exited(_) => "failed",
        StepEnd::Signaled(_) => "died",
        StepEnd::TimedOut { .. } => "timeout",
        StepEnd::ForkFailed(_) => "not-run",
    };
    format!("step={name} status={status} detail={end}")
}

/// Runs one step bounded; reports it unless it succeeded.
fn step(sfd: Option<&SignalFd>, name: &'static str, limit: Duration, f: impl FnOnce() -> i32) {
    let end = bounded_child::run(sfd, name, limit, f);
    if !end.succeeded() {
        console_line(&console_protocol::event(EVENT_LATE_STEP, &event_text(name, &end)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_the_init_prints_is_one_the_host_requires_a_crc_on() {
        use loads::console_protocol::*;
        use results_uploader::{EVENT_NETWORK, EVENT_UPLOAD, EVENT_UPLOAD_ATTEMPT};
        for name in [
            EVENT_HELLO,
            EVENT_ALIVE,
            EVENT_POWEROFF,
            EVENT_INIT_PANIC,
            EVENT_LATE_STEP,
            EVENT_UPLOAD,
            EVENT_UPLOAD_ATTEMPT,
            EVENT_NETWORK,
            EVENT_AGENT_HELLO,
            EVENT_AGENT_JOB,
            EVENT_AGENT_KEXEC,
            EVENT_AGENT_PACK,
            EVENT_AGENT_WAIT,
            EVENT_AGENT_FAILED,
            EVENT_AGENT_ERROR,
            EVENT_AGENT_POWEROFF,
            EVENT_NETCONSOLE,
            EVENT_HW_WATCHDOG,
        ] {
            assert!(CHECKSUMMED_EVENTS.contains(&name), "{name}: a cut line would pass for an old-format event");
        }
    }

    #[test]
    fn a_timed_out_step_reads_as_a_timeout_naming_the_step_and_bound() {
        let end = StepEnd::TimedOut { step: "storage", limit: STORAGE_LIMIT, pid: 42 };
        assert_eq!(
            event_text("storage", &end),
            "step=storage status=timeout detail=storage did not finish within 60 s; its process 42 was killed"
        );
        assert!(event_text("modules", &StepEnd::Exited(1)).starts_with("step=modules status=failed"));
    }
}
