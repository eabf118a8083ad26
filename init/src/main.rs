//! bootbench's PID 1. Sets up the system, runs the suite's workloads in
//! child processes, sends the result out through every channel, and powers
//! off. It never returns; every error becomes part of the result, and a
//! panic (a bug of ours) is reported as such by [`panic_hook`] before a
//! clean power-off.
//!
//! Order matters: each workload's result is printed as soon as it ends,
//! and the whole document is printed on the console before anything that
//! may block in the kernel under test (late module loads, the results port,
//! the scratch disk's sync and umount, the upload). Those steps run in
//! children with deadlines ([`late_steps`]), so a hang there delays the
//! power-off by a bounded time and loses nothing.

mod block_device;
mod bounded_child;
mod claimed_fs;
mod config;
mod dhcp_client;
mod hw_watchdog;
mod kexec;
mod lab_agent;
mod late_steps;
mod lava_monitor;
mod module_loader;
mod netconsole;
mod network;
mod pack_store;
mod panic_hook;
mod power_off;
mod quiesce;
mod result_channels;
mod result_upload;
mod scratch_storage;
mod secrets;
mod signals;
mod system_setup;
mod test_faults;
mod volume_label;
mod workload_child;
mod zram_swap;

use loads::console_protocol::{self, EVENT_HELLO, EVENT_POWEROFF};
use loads::error_chain::error_chain;
use loads::measure::boottime_s;
use loads::provenance::KmsgCursor;
use loads::runner::{self, push_error};
use loads::schema::{RunDocument, WorkloadResult};
use loads::suite::AfterRun;
use loads::workload::RunContext;
use result_channels::{console_line, say, Stream};
use std::time::{Duration, Instant};

fn run_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("boot-{}", std::process::id()))
}

fn main() {
    // Workloads re-exec this binary as small programs (applets); PID 1 never
    // runs one, whatever its argv (the kernel passes words after `--`).
    if std::process::id() != 1 {
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if let Some(code) = loads::applets::main(&argv) {
            std::process::exit(code);
        }
        eprintln!("bootbench-init: must run as PID 1 (the initramfs /init); use `bootbench local` on a host");
        std::process::exit(2);
    }
    panic_hook::install();
    let init_start_s = boottime_s();
    let started = Instant::now();
    // Mount first: the console node lives on devtmpfs.
    let mount_errors = system_setup::mount_all();
    let console_error = system_setup::ensure_console_fds().err();
    console_line(&console_protocol::event(
        EVENT_HELLO,
        &format!("version={} boottime={init_start_s:.6}", env!("CARGO_PKG_VERSION")),
    ));
    let sfd = match signals::block_all() {
        Ok(s) => Some(s),
        Err(e) => {
            say(&format!("error: {}", error_chain(&e)));
            None
        }
    };
    let oom_error = system_setup::set_oom_score_adj(-1000).err();

    let cmdline = config::read_cmdline();
    let accel = cmdline.as_ref().ok().and_then(|c| c.accel.clone());
    let load_modules = cmdline.as_ref().ok().and_then(|c| c.load_modules).unwrap_or(true);
    let cmdline_keys = cmdline.as_ref().ok().cloned().unwrap_or_default();
    // A cmdline refused for a bad value still says how the run ends: a
    // lab candidate must go back to its agent, configuration error or not.
    let after = match &cmdline {
        Ok(c) => c.after,
        Err(_) => std::fs::read_to_string("/proc/cmdline").ok().and_then(|t| AfterRun::from_raw_cmdline(&t)),
    };
    power_off::set_after(after.unwrap_or_default());
    let mut lava = lava_monitor::LavaMonitor::new(cmdline.as_ref().ok().map(|c| c.lava.unwrap_or(false)));
    lava.start();
    // Before any workload: read and remove the secrets segment.
    let (secrets, secret_errors) = secrets::take();
    for e in &secret_errors {
        say(&format!("secrets: {}", error_chain(e)));
    }
    // A lab machine's agent never runs the suite: it boots the lab's jobs.
    if cmdline_keys.role() == loads::suite::Role::Agent {
        lab_agent::run(&cmdline_keys, secrets, load_modules, sfd.as_ref());
    }
    let mut late = late_steps::LateSteps::new(&cmdline_keys, load_modules, secrets);
    let faults = test_faults::Faults::new(&cmdline_keys.test_faults);
    let config = cmdline.and_then(|c| config::load(&c));

    let id = run_id();
    let mut doc = runner::begin_document(&id, config.as_ref().ok().map(|c| &c.suite), accel);
    doc.timings.init_start_s = init_start_s;
    if let Some(what) = faults.describe() {
        say(&what);
        push_error(&mut doc, "test-fault", what);
    }
    for e in mount_errors {
        push_error(&mut doc, "setup", error_chain(&e));
    }
    if let Some(e) = console_error {
        push_error(&mut doc, "setup", error_chain(&e));
    }
    if let Some(e) = oom_error {
        push_error(&mut doc, "setup", error_chain(&e));
    }
    // The scratch disk's driver and filesystem must be there before the
    // workloads; device probing noise ends before anything is measured.
    if load_modules {
        let (_, errors) = module_loader::load_listed(module_loader::EARLY_MODULES_LIST);
        for e in errors {
            push_error(&mut doc, "storage", error_chain(&e));
        }
    }
    let (storage, storage_errors) = scratch_storage::setup(&cmdline_keys);
    for e in storage_errors {
        let msg = error_chain(&e);
        say(&format!("storage error: {msg}"));
        push_error(&mut doc, "storage", msg);
    }
    doc.provenance.storage = storage;
    if config.is_ok() {
        lab_set_up(&mut doc, &cmdline_keys, load_modules, sfd.as_ref(), &mut late);
    }

    match (&config, &sfd) {
        (Err(e), _) => {
            let msg = error_chain(e);
            say(&format!("configuration error: {msg}"));
            push_error(&mut doc, "config", msg);
        }
        (Ok(_), None) => push_error(&mut doc, "setup", "no signalfd: workloads not run".into()),
        (Ok(cfg), Some(sfd)) => {
            let alive_s = cmdline_keys.alive_s.unwrap_or(console_protocol::ALIVE_INTERVAL_S);
            run_suite(&mut doc, &cfg.suite, sfd, &faults, started, alive_s, &mut lava);
        }
    }

    if let Err(e) = scratch_storage::record_zram_usage(doc.provenance.storage.as_mut()) {
        push_error(&mut doc, "storage", error_chain(&e));
    }
    let warnings = KmsgCursor::open(true).warnings();
    runner::finish_document(&mut doc, warnings);
    // The upload token must not travel inside the result it protects
    // (finish_document has just read /proc/cmdline, token included).
    doc.provenance.kernel.cmdline = loads::suite::redact_secrets(&doc.provenance.kernel.cmdline);
    let json = document_json(&doc);
    // The console first: from here on, nothing can lose the result.
    let lines = result_channels::frame(Stream::Result, &id, &json);
    result_channels::emit_console(&lines);
    late.run(sfd.as_ref(), &faults, doc.provenance.storage.as_ref(), &id, &json, &lines);
    // LAVA ends its job at the end line, and powers the device off: the
    // late steps (the upload, the scratch disk's sync) come first.
    lava.finish(&doc);
    console_line(&console_protocol::event(EVENT_POWEROFF, &format!("status={:?}", doc.status).to_lowercase()));
    power_off::power_off(sfd.as_ref())
}

/// What a lab boot asks for before the workloads: netconsole
/// (`bootbench.netconsole`), then the hardware watchdog
/// (`bootbench.hw_watchdog`). A failure of either is an error in the
/// document, and the run goes on.
fn lab_set_up(
    doc: &mut RunDocument,
    cmdline: &loads::suite::CmdlineConfig,
    load_modules: bool,
    sfd: Option<&nix::sys::signalfd::SignalFd>,
    late: &mut late_steps::LateSteps,
) {
    use loads::console_protocol::{EVENT_HW_WATCHDOG, EVENT_NETCONSOLE};
    if let Some(target) = cmdline.netconsole {
        match netconsole::start(sfd, target, &result_upload::net_request(cmdline), load_modules) {
            Ok(configured) => {
                console_line(&console_protocol::event(
                    EVENT_NETCONSOLE,
                    &format!("target={target} iface={}", configured.iface),
                ));
                late.network_configured(configured.as_request());
            }
            Err(e) => {
                console_line(&console_protocol::event(EVENT_NETCONSOLE, &format!("failed error={e}")));
                push_error(doc, "netconsole", format!("netconsole to {target}: {e}"));
            }
        }
    }
    if let Some(timeout_s) = cmdline.hw_watchdog() {
        if load_modules {
            // netconsole loads only with its target, above.
            let (_, errors) = module_loader::load_listed_except(module_loader::LAB_MODULES_LIST, &["netconsole"]);
            for e in errors {
                say(&format!("hw watchdog: module load: {}", error_chain(&e)));
            }
        }
        let alive_s = cmdline.alive_s.unwrap_or(console_protocol::ALIVE_INTERVAL_S);
        match hw_watchdog::arm(timeout_s) {
            // A driver may round the timeout down below what two alive
            // intervals need: it would reset a healthy machine.
            Ok(armed) if !hw_watchdog::outlasts_two_ticks(armed.timeout_s, alive_s) => {
                let _ = hw_watchdog::disarm();
                let msg = format!(
                    "{} took a timeout of {} s for the {timeout_s} s asked, not more than twice the alive interval ({alive_s} s): disarmed",
                    armed.device, armed.timeout_s
                );
                console_line(&console_protocol::event(EVENT_HW_WATCHDOG, &format!("failed error={msg}")));
                push_error(doc, "hw-watchdog", msg);
            }
            Ok(armed) => {
                console_line(&console_protocol::event(EVENT_HW_WATCHDOG, &armed.event_text()));
                doc.provenance.hw_watchdog = Some(loads::schema::HwWatchdogInfo {
                    device: armed.device,
                    identity: armed.identity,
                    timeout_s: armed.timeout_s,
                });
            }
            Err(e) => {
                let msg = error_chain(&e);
                console_line(&console_protocol::event(EVENT_HW_WATCHDOG, &format!("failed error={msg}")));
                push_error(doc, "hw-watchdog", format!("{}={timeout_s}: {msg}", loads::lab_protocol::HW_WATCHDOG_KEY));
            }
        }
    }
}

/// The document as JSON; if that fails, a smaller document that says why
/// (built with serde_json, so it is valid JSON whatever the error says).
fn document_json(doc: &RunDocument) -> String {
    serde_json::to_string(doc).unwrap_or_else(|e| {
        let mut small = runner::begin_document(&doc.run_id, None, None);
        small.provenance = doc.provenance.clone();
        small.errors = doc.errors.clone();
        push_error(&mut small, "serialise", format!("the result document could not be serialised: {e}"));
        small.status = small.derive_status();
        serde_json::to_string(&small).unwrap_or_default()
    })
}

/// The watchdog's deadline: `watchdog_s` after `started`, or as far as an
/// `Instant` goes (the suite's checks bound `watchdog_s` far below that;
/// this keeps PID 1 from panicking whatever the number).
pub fn watchdog_deadline(started: Instant, watchdog_s: u64) -> Instant {
    let mut span = Duration::from_secs(watchdog_s);
    loop {
        if let Some(d) = started.checked_add(span) {
            return d;
        }
        span /= 2;
    }
}

/// The result of a workload the suite did not run, and why.
fn not_run(spec: &loads::suite::WorkloadSpec, reason: &str) -> WorkloadResult {
    WorkloadResult {
        name: spec.name.clone(),
        params: spec.params.clone(),
        error: Some(format!("not run: {reason}")),
        ..Default::default()
    }
}

/// Runs every workload of `suite` in order, each in a child, printing each
/// result as it ends. After each, every process the workload left is
/// killed. A watchdog, a stop signal or processes that cannot be killed
/// end the suite; the workloads not run are listed with the reason.
fn run_suite(
    doc: &mut RunDocument,
    suite: &loads::suite::Suite,
    sfd: &nix::sys::signalfd::SignalFd,
    faults: &test_faults::Faults,
    started: Instant,
    alive_s: u64,
    lava: &mut lava_monitor::LavaMonitor,
) {
    let names = || suite.workloads.iter().map(|w| w.name.as_str());
    let deadline = watchdog_deadline(started, suite.watchdog_s);
    let ctx = RunContext::new(suite.seed, system_setup::WORK_DIR.into());
    let alive = Duration::from_secs(alive_s);
    let mut stopped: Option<String> = None;
    for (index, spec) in suite.workloads.iter().enumerate() {
        // Between workloads PID 1 is making progress.
        hw_watchdog::pet();
        if let Some(reason) = &stopped {
            let result = not_run(spec, reason);
            lava.workload(&result, index + 1, names());
            doc.workloads.push(result);
            continue;
        }
        // A stop signal, or the watchdog's time up (the last workload ended
        // just in time): what is left is not run, rather than started and
        // killed at once.
        let why_not = match signals::stop_requested() {
            Some(signal) => Some(format!("stopped by signal {signal} before workload {}", spec.name)),
            None if Instant::now() >= deadline => {
                Some(format!("the watchdog's {} s ran out before workload {}", suite.watchdog_s, spec.name))
            }
            None => None,
        };
        if let Some(reason) = why_not {
            say(&reason);
            let result = not_run(spec, &reason);
            lava.workload(&result, index + 1, names());
            doc.workloads.push(result);
            stopped = Some(reason);
            continue;
        }
        if doc.timings.first_workload_s.is_none() {
            doc.timings.first_workload_s = Some(boottime_s());
        }
        say(&format!("workload {} starting", spec.name));
        let outcome = workload_child::run(suite, spec, &ctx, sfd, deadline, alive, &faults.for_child(index));
        let result = match outcome {
            Ok(result) => {
                if let Some(err) = &result.error {
                    say(&format!("workload {} failed: {err}", spec.name));
                }
                result
            }
            Err(e) => {
                let msg = error_chain(&e);
                say(&format!("error: {msg}"));
                if matches!(e, workload_child::ChildError::Watchdog { .. } | workload_child::ChildError::Stopped { .. })
                {
                    stopped = Some(msg.clone());
                }
                WorkloadResult {
                    name: spec.name.clone(),
                    params: spec.params.clone(),
                    error: Some(msg),
                    ..Default::default()
                }
            }
        };
        let left = quiesce::after_workload(Some(sfd));
        if let Some(line) = left.summary(&spec.name) {
            say(&line);
            push_error(doc, "teardown", line.clone());
            if !left.stuck.is_empty() && stopped.is_none() {
                stopped = Some(format!("processes of workload {} could not be killed", spec.name));
            }
        }
        // The next workload starts on an empty work directory, or not at
        // all: one measured on another filesystem (the rootfs, after a
        // failed mount) or among the last one's files would be unlike.
        if let Err(e) = system_setup::fresh_work_dir() {
            let msg = format!("after workload {}: {}", spec.name, error_chain(&e));
            say(&msg);
            push_error(doc, "teardown", msg);
            if stopped.is_none() {
                stopped = Some(format!("the work directory could not be renewed after workload {}", spec.name));
            }
        }
        match runner::workload_stream_json(index + 1, &result) {
            Ok(json) => result_channels::emit_console(&result_channels::frame(Stream::Workload, &doc.run_id, &json)),
            Err(e) => say(&format!("workload {}: cannot serialise its result: {e}", spec.name)),
        }
        lava.workload(&result, index + 1, names());
        doc.workloads.push(result);
        if index == 0 {
            faults.after_first_workload();
        }
    }
    doc.timings.workloads_done_s = Some(boottime_s());
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_watchdog_deadline_never_panics(secs in proptest::num::u64::ANY) {
            let now = Instant::now();
            let d = watchdog_deadline(now, secs);
            proptest::prop_assert!(d >= now);
        }
    }

    #[test]
    fn extreme_watchdogs_give_a_deadline_and_in_range_ones_are_exact() {
        let now = Instant::now();
        assert!(watchdog_deadline(now, u64::MAX) > now + Duration::from_secs(7 * 24 * 3600));
        assert_eq!(watchdog_deadline(now, 1800), now + Duration::from_secs(1800));
    }

    #[test]
    fn every_cmdline_key_at_its_extremes_gives_a_run_plan_without_panicking() {
        // What PID 1 computes from the keys: the config, the late steps'
        // plan (upload policy, limits), the watchdog deadline, the alive
        // interval.
        let values = ["0", "1", "2", "3600", "604800", "604801", "4294967295", "18446744073709551615", "-1", "x"];
        let keys = ["iterations", "warmup", "seed", "watchdog", "alive", "zram", "upload_attempts", "upload_timeout"];
        for key in keys {
            for v in values {
                let line = format!("bootbench.upload=http://10.0.2.2:8080 bootbench.token=t bootbench.{key}={v}");
                let Ok(c) = loads::suite::CmdlineConfig::parse(&line) else { continue };
                let suite = c.apply(loads::suite::Suite::builtin("quick").unwrap()).unwrap();
                let _ = watchdog_deadline(Instant::now(), suite.watchdog_s);
                let _ = Duration::from_secs(c.alive_s.unwrap_or(console_protocol::ALIVE_INTERVAL_S));
                let late = late_steps::LateSteps::new(&c, true, secrets::Secrets::default());
                // The host's default silence timeout is 300 s; the upload
                // prints an event per attempt, and its bound stays below.
                assert!(late.upload_limit() < Duration::from_secs(300), "{key}={v}: {:?}", late.upload_limit());
            }
        }
    }
}
