//! The upload side of `bootbench run`. With `--serve` it starts a receiver
//! on 127.0.0.1 (a free port) for the run's duration, so nobody has to
//! start one by hand; with `--upload-url` the guest uploads elsewhere.
//! Either way it says what the guest is told (`bootbench.upload`,
//! `bootbench.token`), which NIC modules the image needs, and after each
//! boot what became of the upload (the guest's `upload` event, and with
//! `--serve` whether the run arrived intact). It also keeps the upload
//! token out of the results file. It never changes the measurements.

pub use crate::results::upload::UploadRecord;
use crate::results::{BootRecord, ResultsFile};
use crate::service::listener::ConnectionLimits;
use crate::service::receiver::{Receiver, ServeConfig, DEFAULT_MAX_BYTES};
use crate::service::store::{self, PutOutcome, RunKind, Store};
use anyhow::Context;
use results_uploader::{UploadReport, EVENT_NETWORK, EVENT_UPLOAD};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Modules a Debian kernel needs for a virtio NIC (with their dependencies
/// resolved by the image builder).
pub const NET_MODULES: &[&str] = &["virtio_net", "virtio_pci"];

/// How QEMU user networking shows the host's 127.0.0.1 to the guest.
pub const HOST_FROM_GUEST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// The upload arrangement of one `bootbench run`.
pub struct RunUpload {
    guest_url: String,
    token: String,
    receiver: Option<Receiver>,
    store: Option<Store>,
    keep_db: Option<PathBuf>,
}

impl std::fmt::Debug for RunUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunUpload")
            .field("guest_url", &self.guest_url)
            .field("serving", &self.receiver.is_some())
            .finish()
    }
}

impl RunUpload {
    /// Starts a receiver on 127.0.0.1 with a fresh random token; its store
    /// is `db`, or a file in `work_dir` that goes away with the run.
    pub fn serve(db: Option<&Path>, work_dir: &Path) -> anyhow::Result<RunUpload> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let path = db.map(Path::to_path_buf).unwrap_or_else(|| work_dir.join("received.db"));
        let receiver = Receiver::start(ServeConfig {
            db: path.clone(),
            token: token.clone(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_bytes: DEFAULT_MAX_BYTES,
            log_prefix: Some("run: receiver: ".into()),
            limits: ConnectionLimits::default(),
            tls: None,
        })?;
        let guest_url = format!("http://{HOST_FROM_GUEST}:{}", receiver.addr().port());
        eprintln!(
            "run: receiver on http://{} (the guest uploads to {guest_url}; store {})",
            receiver.addr(),
            path.display()
        );
        let store = Store::open(&path)?;
        Ok(RunUpload {
            guest_url,
            token,
            receiver: Some(receiver),
            store: Some(store),
            keep_db: db.map(Path::to_path_buf),
        })
    }

    /// The guest uploads to `url` (as the guest sees it) with `token`.
    pub fn elsewhere(url: &str, token: &str) -> anyhow::Result<RunUpload> {
        // The same checks the guest applies, so a typo fails here, not after a boot.
        loads::suite::CmdlineConfig::parse(&format!("bootbench.upload={url} bootbench.token={token}"))
            .context("bad --upload-url or --upload-token")?;
        Ok(RunUpload {
            guest_url: url.to_string(),
            token: token.to_string(),
            receiver: None,
            store: None,
            keep_db: None,
        })
    }

    /// The kernel cmdline keys that make the guest upload.
    pub fn cmdline_keys(&self) -> [(&'static str, &str); 2] {
        [("bootbench.upload", &self.guest_url), ("bootbench.token", &self.token)]
    }

    /// Replaces the token wherever the envelope would carry it (cmdline,
    /// QEMU argv, console log).
    pub fn redact(&self, boot: &mut BootRecord) {
        boot.cmdline = loads::suite::redact_secrets(&boot.cmdline);
        for a in &mut boot.qemu.argv {
            *a = loads::suite::redact_secrets(a);
        }
        if boot.console_log.contains(&self.token) {
            boot.console_log = boot.console_log.replace(&self.token, "<redacted>");
        }
    }

    /// What became of the upload of the boot that printed `events` and
    /// whose console carried `console_document`.
    pub fn record(
        &self,
        events: &[(String, String)],
        console_document: Option<&str>,
        run_id: Option<&str>,
    ) -> UploadRecord {
        let mut rec = UploadRecord { url: self.guest_url.clone(), ..UploadRecord::default() };
        rec.network = events.iter().rev().find(|(n, _)| n == EVENT_NETWORK).map(|(_, t)| t.clone());
        if let Some((_, text)) = events.iter().rev().find(|(n, _)| n == EVENT_UPLOAD) {
            match UploadReport::parse_event_text(text) {
                Ok(r) => rec.guest = Some(r),
                Err(e) => rec.event_error = Some(e.to_string()),
            }
        }
        if let (Some(store), Some(id)) = (&self.store, run_id) {
            let stored = store.summaries(id).unwrap_or_default().into_iter().find(|s| s.kind == RunKind::Document);
            rec.received = Some(stored.is_some());
            rec.matches_console = stored.map(|s| {
                console_document.and_then(|d| store::canonical_sha256(d.as_bytes())).is_some_and(|c| c == s.sha256)
            });
        }
        rec
    }

    /// With `--serve`, also keeps the host's envelope of `boot` in the
    /// store, so `compare` can take the run from there with everything
    /// the host knew.
    pub fn store_envelope(&mut self, boot: &BootRecord) -> anyhow::Result<()> {
        let (Some(store), Some(doc)) = (&mut self.store, &boot.result) else { return Ok(()) };
        let one = ResultsFile { boots: vec![boot.clone()], ..ResultsFile::default() };
        let body = serde_json::to_vec(&one).context("cannot serialise the envelope")?;
        let run = store::validate(body, &doc.run_id).context("the envelope is not storable")?;
        match store.put(&run, None)? {
            PutOutcome::Stored | PutOutcome::AlreadyStored => Ok(()),
            PutOutcome::Conflict { .. } => {
                anyhow::bail!("the store already holds a different envelope for run {}", doc.run_id)
            }
        }
    }

    /// Completes a boot's envelope: the token redacted, the upload record
    /// (from the boot's `events` and the console's `console_document`
    /// text), a progress line, and with `--serve` the envelope kept in the
    /// store.
    pub fn attach(&mut self, record: &mut BootRecord, events: &[(String, String)], console_document: Option<&str>) {
        self.redact(record);
        let run_id = record.result.as_ref().map(|d| d.run_id.clone());
        let rec = self.record(events, console_document, run_id.as_deref());
        eprintln!("run: boot {}: {}", record.boot.index + 1, describe(&rec));
        record.upload = Some(rec);
        if let Err(e) = self.store_envelope(record) {
            eprintln!("run: cannot keep the host envelope in the store: {e:#}");
        }
    }

    /// Stops the receiver; says where the runs are when the store is kept.
    pub fn finish(mut self) -> anyhow::Result<()> {
        if let Some(r) = self.receiver.take() {
            r.stop()?;
        }
        if let (Some(db), Some(store)) = (&self.keep_db, &self.store) {
            let n = store.list(usize::MAX >> 1).map(|l| l.len()).unwrap_or(0);
            eprintln!("run: the store {} holds {n} run row(s)", db.display());
        }
        Ok(())
    }
}

/// How a kernel config builds `option` (`CONFIG_<option>`): `y`, `m`,
/// `n` (not set), or `None` when there is no config to read.
fn config_state(config: Option<&Path>, option: &str) -> Option<char> {
    let text = std::fs::read_to_string(config?).ok()?;
    let set = format!("CONFIG_{option}=");
    let unset = format!("# CONFIG_{option} is not set");
    Some(
        text.lines()
            .find_map(|l| if l == unset { Some('n') } else { l.strip_prefix(&set).and_then(|v| v.chars().next()) })
            .unwrap_or('n'),
    )
}

/// `modules` plus what the guest needs for a virtio NIC: nothing where
/// the kernel builds virtio-net and virtio-pci in, [`NET_MODULES`] where
/// they are modules. A kernel without virtio-net cannot upload: an error
/// before any boot. Without a config, the modules are assumed built in
/// (with a warning).
pub fn image_modules(
    config: Option<&Path>,
    modules_dir_known: bool,
    mut modules: Vec<String>,
) -> anyhow::Result<Vec<String>> {
    for (option, module) in [("VIRTIO_NET", "virtio_net"), ("VIRTIO_PCI", "virtio_pci")] {
        match config_state(config, option) {
            Some('y') => {}
            Some('m') if modules_dir_known => {
                if !modules.iter().any(|m| m == module) {
                    modules.push(module.to_string());
                }
            }
            Some('m') => anyhow::bail!(
                "the guest needs the {module} module for the upload, but the kernel's modules tree is unknown (give --modules-dir)"
            ),
            Some(_) => anyhow::bail!(
                "the kernel has no {module} (CONFIG_{option} is not set in {}): the guest cannot upload; drop --serve/--upload-url",
                config.map(|c| c.display().to_string()).unwrap_or_default()
            ),
            None => eprintln!("run: no kernel config found: assuming {module} is built in"),
        }
    }
    Ok(modules)
}

/// A one-line summary of `rec` for the run's progress output.
pub fn describe(rec: &UploadRecord) -> String {
    let guest = match &rec.guest {
        Some(g) if g.verdict.delivered() => format!(
            "{} (HTTP {}) after {} attempt(s) [{}] in {} ms",
            g.verdict.name(),
            g.http_status.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            g.attempts,
            g.history.join(","),
            g.elapsed_ms
        ),
        Some(g) => format!("{}: {}", g.verdict.name(), g.error.as_deref().unwrap_or("no reason")),
        None => match &rec.event_error {
            Some(e) => format!("unreadable upload event: {e}"),
            None => "no upload event from the guest".into(),
        },
    };
    let arrived = match (rec.received, rec.matches_console) {
        (Some(true), Some(true)) => "; the receiver has it, identical to the console's",
        (Some(true), _) => "; the receiver has it, but it DIFFERS from the console's",
        (Some(false), _) => "; the receiver does NOT have it",
        (None, _) => "",
    };
    format!("upload {guest}{arrived}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use results_uploader::Verdict;

    #[test]
    fn records_read_the_guests_events() {
        let up = RunUpload::elsewhere("http://10.0.2.2:9", "tok").unwrap();
        let report = UploadReport {
            verdict: Verdict::Refused,
            http_status: Some(403),
            attempts: 1,
            elapsed_ms: 5,
            history: vec!["403".into()],
            delays_ms: vec![0],
            url: "http://10.0.2.2:9/runs/r".into(),
            error: Some("HTTP 403: wrong token".into()),
        };
        let events = vec![
            ("hello".to_string(), "x".to_string()),
            ("network".to_string(), "iface=eth0 addr=10.0.2.15/24".to_string()),
            ("upload".to_string(), report.to_event_text()),
        ];
        let rec = up.record(&events, None, Some("r"));
        assert_eq!(rec.guest, Some(report));
        assert_eq!(rec.network.as_deref(), Some("iface=eth0 addr=10.0.2.15/24"));
        assert_eq!(rec.received, None, "not our receiver: unknown");
        assert!(describe(&rec).contains("refused: HTTP 403"));
        let rec = up.record(&[("upload".into(), "verdict=nonsense".into())], None, None);
        assert!(rec.event_error.is_some());
        assert!(describe(&rec).contains("unreadable"));
    }

    #[test]
    fn bad_upload_settings_fail_before_booting() {
        let e = format!("{:#}", RunUpload::elsewhere("10.0.2.2:8080", "t").unwrap_err());
        assert!(e.contains("bootbench.upload"), "{e}");
        let e = format!("{:#}", RunUpload::elsewhere("http://10.0.2.2:8080", "a\u{7f}").unwrap_err());
        assert!(e.contains("bootbench.token"), "{e}");
    }

    #[test]
    fn net_modules_follow_the_kernel_config() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config");
        std::fs::write(&cfg, "CONFIG_VIRTIO_NET=m\nCONFIG_VIRTIO_PCI=m\n").unwrap();
        let m = image_modules(Some(&cfg), true, vec!["virtio_console".into(), "virtio_pci".into()]).unwrap();
        assert_eq!(m, ["virtio_console", "virtio_pci", "virtio_net"]);
        std::fs::write(&cfg, "CONFIG_VIRTIO_NET=y\nCONFIG_VIRTIO_PCI=y\n").unwrap();
        assert!(image_modules(Some(&cfg), false, vec![]).unwrap().is_empty());
        std::fs::write(&cfg, "# CONFIG_VIRTIO_NET is not set\nCONFIG_VIRTIO_PCI=y\n").unwrap();
        let e = image_modules(Some(&cfg), true, vec![]).unwrap_err().to_string();
        assert!(e.contains("CONFIG_VIRTIO_NET is not set"), "{e}");
        std::fs::write(&cfg, "CONFIG_VIRTIO_NET=m\nCONFIG_VIRTIO_PCI=y\n").unwrap();
        let e = image_modules(Some(&cfg), false, vec![]).unwrap_err().to_string();
        assert!(e.contains("--modules-dir"), "{e}");
        assert!(image_modules(None, false, vec![]).unwrap().is_empty());
    }

    #[test]
    fn tokens_are_redacted_from_the_envelope() {
        let up = RunUpload::elsewhere("http://10.0.2.2:9", "s3cret").unwrap();
        let mut b = BootRecord {
            cmdline: "console=ttyS0 bootbench.token=s3cret".into(),
            console_log: "Kernel command line: bootbench.token=s3cret\n".into(),
            ..BootRecord::default()
        };
        b.qemu.argv = vec!["-append".into(), "console=ttyS0 bootbench.token=s3cret quiet".into()];
        up.redact(&mut b);
        let all = serde_json::to_string(&b).unwrap();
        assert!(!all.contains("s3cret"), "{all}");
        assert!(b.cmdline.contains("bootbench.token=<redacted>"));
    }
}
