//! The upload side of `bootbench run`. With `--serve` it starts a receiver
//! on 127.0.0.1 (a free port) for the run's duration, so nobody has to
//! start one by hand; with `--upload-url` the guest uploads elsewhere.
//! Either way it says what the guest is told (`bootbench.upload` on the
//! cmdline; the token, and a lab's CA, in the secrets segment appended to
//! the image: [`crate::boot::secrets_segment`]), which NIC modules the
//! image needs, and after each boot what became of the upload (the guest's
//! `upload` event, and with `--serve` whether the run arrived intact). It
//! also delivers the host's envelope of each boot (QEMU's argv, the console
//! log, the classification) to the same store, so the lab has the whole
//! record. It never changes the measurements.

use crate::boot::secrets_segment::GuestSecrets;
pub use crate::results::upload::UploadRecord;
use crate::results::{BootRecord, ResultsFile};
use crate::service::listener::ConnectionLimits;
use crate::service::receiver::{read_token, GivenToken, Receiver, ServeConfig, DEFAULT_MAX_BYTES};
use crate::service::store::{self, PutOutcome, RunKind, Store};
use crate::service::tokens::Scope;
use anyhow::Context;
use results_uploader::{UploadReport, UploadRequest, UploadSettings, EVENT_NETWORK, EVENT_UPLOAD};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Modules a Debian kernel needs for a virtio NIC (with their dependencies
/// resolved by the image builder).
pub const NET_MODULES: &[&str] = &["virtio_net", "virtio_pci"];

/// How QEMU user networking shows the host's 127.0.0.1 to the guest.
pub const HOST_FROM_GUEST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// Where the upload's token comes from.
#[derive(Debug, Clone, Copy)]
pub enum TokenSource<'a> {
    /// `--upload-token T` (visible in `ps` on this host).
    Given(&'a str),
    /// `--upload-token-file F`.
    File(&'a Path),
}

/// The upload arrangement of one `bootbench run`.
pub struct RunUpload {
    guest_url: String,
    /// Where the host sends the envelopes: `--upload-url` as this host
    /// reaches it (10.0.2.2 is the guest's name for 127.0.0.1); `None` with
    /// `--serve`, whose store the host writes directly.
    host_url: Option<String>,
    secrets: GuestSecrets,
    receiver: Option<Receiver>,
    store: Option<Store>,
    keep_db: Option<PathBuf>,
}

impl std::fmt::Debug for RunUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunUpload")
            .field("guest_url", &self.guest_url)
            .field("host_url", &self.host_url)
            .field("serving", &self.receiver.is_some())
            .finish()
    }
}

/// `url` (as the guest reaches it) as this host reaches it: QEMU's name
/// for the host's loopback, 10.0.2.2, becomes 127.0.0.1.
pub fn host_view(url: &str) -> anyhow::Result<String> {
    let mut u = results_uploader::parse_base_url(url)?;
    if u.host_str() == Some(&HOST_FROM_GUEST.to_string()) {
        u.set_host(Some("127.0.0.1")).map_err(|e| anyhow::anyhow!("cannot rewrite {url}: {e}"))?;
    }
    Ok(u.as_str().trim_end_matches('/').to_string())
}

impl RunUpload {
    /// Starts a receiver on 127.0.0.1 with a fresh random token; its store
    /// is `db`, or a file in `work_dir` that goes away with the run.
    pub fn serve(db: Option<&Path>, work_dir: &Path, ca_file: Option<&Path>) -> anyhow::Result<RunUpload> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let path = db.map(Path::to_path_buf).unwrap_or_else(|| work_dir.join("received.db"));
        let receiver = Receiver::start(ServeConfig {
            db: path.clone(),
            tokens: vec![GivenToken { name: "run".into(), secret: token.clone(), scope: Scope::UPLOAD }],
            public_reads: false,
            base_url: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_bytes: DEFAULT_MAX_BYTES,
            log_prefix: Some("run: receiver: ".into()),
            limits: ConnectionLimits::default(),
            tls: None,
            netconsole: None,
        })?;
        let guest_url = format!("http://{HOST_FROM_GUEST}:{}", receiver.addr().port());
        log::info!(
            "receiver on http://{} (the guest uploads to {guest_url}; store {})",
            receiver.addr(),
            path.display()
        );
        let store = Store::open(&path)?;
        Ok(RunUpload {
            guest_url,
            host_url: None,
            secrets: GuestSecrets { upload_token: token, upload_ca_pem: read_ca(ca_file)? },
            receiver: Some(receiver),
            store: Some(store),
            keep_db: db.map(Path::to_path_buf),
        })
    }

    /// The guest uploads to `url` (as the guest sees it) with the token
    /// from `token`, trusting the extra CAs of `ca_file` for https.
    pub fn elsewhere(url: &str, token: TokenSource<'_>, ca_file: Option<&Path>) -> anyhow::Result<RunUpload> {
        let token = match token {
            TokenSource::Given(t) => read_token(Some(t), None).context("--upload-token")?,
            TokenSource::File(f) => read_token(None, Some(f)).context("--upload-token-file")?,
        };
        // The same checks the guest applies, so a typo fails here, not after a boot.
        loads::suite::CmdlineConfig::parse(&format!("bootbench.upload={url}")).context("bad --upload-url")?;
        Ok(RunUpload {
            guest_url: url.to_string(),
            host_url: Some(host_view(url)?),
            secrets: GuestSecrets { upload_token: token, upload_ca_pem: read_ca(ca_file)? },
            receiver: None,
            store: None,
            keep_db: None,
        })
    }

    /// The kernel cmdline keys that make the guest upload. The token is
    /// not one of them: it goes in the secrets segment.
    pub fn cmdline_keys(&self) -> [(&'static str, &str); 1] {
        [("bootbench.upload", &self.guest_url)]
    }

    /// What the guest's secrets segment holds.
    pub fn guest_secrets(&self) -> &GuestSecrets {
        &self.secrets
    }

    /// Values that must not appear in anything recorded.
    pub fn secret_values(&self) -> Vec<String> {
        vec![self.secrets.upload_token.clone()]
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

    /// Delivers the host's envelope of `boot` next to the guest's document:
    /// with `--serve` straight into the store, with `--upload-url` by HTTP
    /// to the receiver (its report is returned). The run id is the guest
    /// document's, or for a boot that sent none (a panic, a hang) the
    /// host's id for the boot; a boot with neither (not made by
    /// [`crate::boot::session`]) is not delivered: `Ok(None)`.
    pub fn deliver_envelope(&mut self, boot: &BootRecord) -> anyhow::Result<Option<UploadReport>> {
        let run_id = match (&boot.result, &boot.boot.envelope_id) {
            (Some(doc), _) => doc.run_id.as_str(),
            (None, Some(id)) => id.as_str(),
            (None, None) => return Ok(None),
        };
        let one = ResultsFile { boots: vec![boot.clone()], ..ResultsFile::default() };
        let body = serde_json::to_vec(&one).context("cannot serialise the envelope")?;
        if let Some(store) = &mut self.store {
            let run = store::validate(body, run_id).context("the envelope is not storable")?;
            return match store.put(&run, None, None)? {
                PutOutcome::Stored | PutOutcome::AlreadyStored => Ok(None),
                PutOutcome::Conflict { .. } => {
                    anyhow::bail!("the store already holds a different envelope for run {run_id}")
                }
            };
        }
        let Some(url) = &self.host_url else { return Ok(None) };
        let mut settings = UploadSettings::host();
        settings.extra_ca_pem = self.secrets.upload_ca_pem.clone();
        let req = UploadRequest { base_url: url, token: &self.secrets.upload_token, run_id, body: &body };
        Ok(Some(UploadReport::from(&results_uploader::upload(&req, &settings))))
    }

    /// Completes a boot's envelope: the upload record (from the boot's
    /// `events` and the console's `console_document` text), the host's
    /// envelope delivered, and a progress line.
    pub fn attach(&mut self, record: &mut BootRecord, events: &[(String, String)], console_document: Option<&str>) {
        let run_id = record.result.as_ref().map(|d| d.run_id.clone());
        // The delivered envelope holds what became of the guest's upload;
        // only the results file can hold what became of its own.
        record.upload = Some(self.record(events, console_document, run_id.as_deref()));
        let delivered = self.deliver_envelope(record);
        if let Some(rec) = &mut record.upload {
            match delivered {
                Ok(report) => rec.envelope = report,
                Err(e) => rec.envelope_error = Some(format!("{e:#}")),
            }
            log::info!("boot {}: {}", record.boot.index + 1, describe(rec));
        }
    }

    /// Stops the receiver; says where the runs are when the store is kept.
    pub fn finish(mut self) -> anyhow::Result<()> {
        if let Some(r) = self.receiver.take() {
            r.stop()?;
        }
        if let (Some(db), Some(store)) = (&self.keep_db, &self.store) {
            let n = store.list(usize::MAX >> 1).map(|l| l.len()).unwrap_or(0);
            log::info!("the store {} holds {n} run row(s)", db.display());
        }
        Ok(())
    }
}

/// The extra CA file's PEM text, checked to hold usable certificates.
fn read_ca(ca_file: Option<&Path>) -> anyhow::Result<Option<Vec<u8>>> {
    let Some(path) = ca_file else { return Ok(None) };
    Ok(Some(results_uploader::read_ca_file(path).context("--upload-ca-file")?))
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
            None => log::info!("no kernel config found: assuming {module} is built in"),
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
    let envelope = match (&rec.envelope, &rec.envelope_error) {
        (_, Some(e)) => format!("; the host's envelope was not delivered: {e}"),
        (Some(r), None) if r.verdict.delivered() => format!("; the host's envelope {}", r.verdict.name()),
        (Some(r), None) => {
            format!("; the host's envelope {}: {}", r.verdict.name(), r.error.as_deref().unwrap_or("no reason"))
        }
        (None, None) => String::new(),
    };
    format!("upload {guest}{arrived}{envelope}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use results_uploader::Verdict;

    #[test]
    fn records_read_the_guests_events() {
        let up = RunUpload::elsewhere("http://10.0.2.2:9", TokenSource::Given("tok-0123456789abcdef"), None).unwrap();
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
        let good = TokenSource::Given("tok-0123456789abcdef");
        let e = format!("{:#}", RunUpload::elsewhere("10.0.2.2:8080", good, None).unwrap_err());
        assert!(e.contains("bootbench.upload"), "{e}");
        let e = format!(
            "{:#}",
            RunUpload::elsewhere("http://10.0.2.2:8080", TokenSource::Given("a\u{7f}bcdefghijklmnopq"), None)
                .unwrap_err()
        );
        assert!(e.contains("--upload-token"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not a certificate").unwrap();
        let e = format!("{:#}", RunUpload::elsewhere("http://10.0.2.2:8080", good, Some(&ca)).unwrap_err());
        assert!(e.contains("--upload-ca-file") && e.contains("ca.pem") && e.contains("cannot be used"), "{e}");
        let missing = dir.path().join("missing.pem");
        let e = format!("{:#}", RunUpload::elsewhere("http://10.0.2.2:8080", good, Some(&missing)).unwrap_err());
        assert!(e.contains("missing.pem"), "{e}");
    }

    #[test]
    fn the_token_goes_in_the_secrets_segment_not_on_the_cmdline() {
        let up =
            RunUpload::elsewhere("http://10.0.2.2:8080", TokenSource::Given("tok-0123456789abcdef"), None).unwrap();
        let keys = format!("{:?}", up.cmdline_keys());
        assert!(!keys.contains("tok-0123456789abcdef") && !keys.contains("token"), "{keys}");
        assert_eq!(up.guest_secrets().upload_token, "tok-0123456789abcdef");
        assert_eq!(up.secret_values(), ["tok-0123456789abcdef"]);
        assert!(!format!("{up:?}").contains("tok-0123"));
    }

    /// A boot that panicked before its document: no run id of the guest's,
    /// the host's `id` instead.
    fn panicked(id: &str) -> BootRecord {
        let mut b = BootRecord { label: "cand".into(), ..Default::default() };
        b.boot.classification = "panic".into();
        b.boot.envelope_id = Some(id.into());
        b.machine.arch = "x86_64".into();
        b.console_log = "Kernel panic - not syncing: test".into();
        b
    }

    #[test]
    fn a_boot_without_a_document_reaches_the_store_under_the_hosts_id_by_serve_and_by_http() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kept.db");
        let mut served = RunUpload::serve(Some(&db), dir.path(), None).unwrap();
        let mut direct = panicked("host-direct");
        served.attach(&mut direct, &[], None);
        let rec = direct.upload.as_ref().unwrap();
        assert_eq!(rec.envelope_error, None);
        // The same receiver as a lab's, over HTTP with its token.
        let token = served.guest_secrets().upload_token.clone();
        let mut remote = RunUpload::elsewhere(&served.guest_url, TokenSource::Given(&token), None).unwrap();
        let report = remote.deliver_envelope(&panicked("host-remote")).unwrap().expect("sent over HTTP");
        assert_eq!(report.verdict, Verdict::Stored, "{report:?}");
        // A boot with neither a document nor a host id is not sent.
        let mut nameless = panicked("x");
        nameless.boot.envelope_id = None;
        assert_eq!(remote.deliver_envelope(&nameless).unwrap(), None);
        served.finish().unwrap();
        for id in ["host-direct", "host-remote"] {
            let f = store::load_run(&db, id).unwrap().into_results_file();
            assert_eq!(f.boots[0].boot.classification, "panic", "{id}");
            assert_eq!(f.boots[0].console_log, "Kernel panic - not syncing: test", "{id}");
        }
    }

    #[test]
    fn the_host_reaches_the_guests_name_for_its_loopback_at_127_0_0_1() {
        assert_eq!(host_view("http://10.0.2.2:8080").unwrap(), "http://127.0.0.1:8080");
        assert_eq!(host_view("https://lab.example:8443/").unwrap(), "https://lab.example:8443");
        assert_eq!(host_view("http://10.0.2.22:80").unwrap(), "http://10.0.2.22");
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
}
