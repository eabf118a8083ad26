//! bootbench's PID 1. Sets up the system, runs the suite's workloads in
//! child processes, sends the result out through every channel, and powers
//! off. It never returns and never panics: every error becomes part of the
//! result.

mod block_device;
mod config;
mod dhcp_client;
mod module_loader;
mod network;
mod power_off;
mod result_channels;
mod result_upload;
mod scratch_storage;
mod signals;
mod system_setup;
mod workload_child;
mod zram_swap;

use loads::console_protocol::{self, EVENT_HELLO, EVENT_POWEROFF};
use loads::error_chain::error_chain;
use loads::measure::boottime_s;
use loads::provenance::KmsgCursor;
use loads::runner::{self, push_error};
use loads::schema::WorkloadResult;
use loads::workload::RunContext;
use result_channels::{console_line, say};
use std::time::{Duration, Instant};

fn run_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("boot-{}", std::process::id()))
}

fn main() {
    // Workloads re-exec this binary as small programs (applets).
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = loads::applets::main(&argv) {
        std::process::exit(code);
    }
    if std::process::id() != 1 {
        eprintln!("bootbench-init: must run as PID 1 (the initramfs /init); use `bootbench local` on a host");
        std::process::exit(2);
    }
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
    let port = cmdline.as_ref().ok().and_then(|c| c.port.clone());
    let load_modules = cmdline.as_ref().ok().and_then(|c| c.load_modules).unwrap_or(true);
    let upload = cmdline.as_ref().ok().and_then(result_upload::plan);
    let cmdline_keys = cmdline.as_ref().ok().cloned().unwrap_or_default();
    let config = cmdline.and_then(|c| config::load(&c));

    let id = run_id();
    let mut doc = runner::begin_document(&id, config.as_ref().ok().map(|c| &c.suite), accel);
    doc.timings.init_start_s = init_start_s;
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

    match (&config, &sfd) {
        (Err(e), _) => {
            let msg = error_chain(e);
            say(&format!("configuration error: {msg}"));
            push_error(&mut doc, "config", msg);
        }
        (Ok(_), None) => push_error(&mut doc, "setup", "no signalfd: workloads not run".into()),
        (Ok(cfg), Some(sfd)) => {
            let deadline = started + Duration::from_secs(cfg.suite.watchdog_s);
            let ctx = RunContext::new(cfg.suite.seed, system_setup::WORK_DIR.into());
            let alive = Duration::from_secs(cmdline_keys.alive_s.unwrap_or(console_protocol::ALIVE_INTERVAL_S));
            for spec in &cfg.suite.workloads {
                if doc.timings.first_workload_s.is_none() {
                    doc.timings.first_workload_s = Some(boottime_s());
                }
                say(&format!("workload {} starting", spec.name));
                match workload_child::run(&cfg.suite, spec, &ctx, sfd, deadline, alive) {
                    Ok(result) => {
                        if let Some(err) = &result.error {
                            say(&format!("workload {} failed: {err}", spec.name));
                        }
                        doc.workloads.push(result);
                    }
                    Err(e) => {
                        let msg = error_chain(&e);
                        say(&format!("error: {msg}"));
                        let stop = matches!(
                            e,
                            workload_child::ChildError::Watchdog { .. } | workload_child::ChildError::Stopped { .. }
                        );
                        doc.workloads.push(WorkloadResult {
                            name: spec.name.clone(),
                            params: spec.params.clone(),
                            error: Some(msg),
                            ..Default::default()
                        });
                        if stop {
                            break;
                        }
                    }
                }
            }
            doc.timings.workloads_done_s = Some(boottime_s());
        }
    }

    // Modules are only needed for the result port, so they load after the
    // measurements: probing devices would otherwise add noise to them.
    if load_modules {
        let (_, errors) = module_loader::load_listed(module_loader::MODULES_LIST);
        for e in errors {
            push_error(&mut doc, "modules", error_chain(&e));
        }
    }
    if let Err(e) = scratch_storage::record_zram_usage(doc.provenance.storage.as_mut()) {
        push_error(&mut doc, "storage", error_chain(&e));
    }
    if let Err(e) = scratch_storage::teardown(doc.provenance.storage.as_ref()) {
        push_error(&mut doc, "storage", error_chain(&e));
    }
    let warnings = KmsgCursor::open(true).warnings();
    runner::finish_document(&mut doc, warnings);
    // The upload token must not travel inside the result it protects
    // (finish_document has just read /proc/cmdline, token included).
    doc.provenance.kernel.cmdline = loads::suite::redact_secrets(&doc.provenance.kernel.cmdline);
    let json = serde_json::to_string(&doc).unwrap_or_else(|e| {
        format!(r#"{{"schema_version":1,"run_id":"{id}","status":"error","errors":[{{"where":"serialise","message":"{e}"}}]}}"#)
    });
    if let Err(e) = result_channels::emit(&id, &json, port.as_deref()) {
        say(&format!("error: {}", error_chain(&e)));
    }
    // Last channel: the document is already on the console, so the upload
    // (and the network it needs) can fail without losing anything.
    if let Some(plan) = &upload {
        result_upload::deliver(plan, &id, &json);
    }
    console_line(&console_protocol::event(EVENT_POWEROFF, &format!("status={:?}", doc.status).to_lowercase()));
    power_off::power_off(sfd.as_ref())
}
