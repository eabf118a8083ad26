//! Secrets out of what a boot records. Every boot's envelope goes through
//! [`redact_boot`], whether or not the run uploads: a token given through
//! `--append` or `--variant` must no more reach the results file (or, after
//! `bootbench upload`, a store) than the run's own. Cmdline words are found
//! by the kernel's quoting rules ([`loads::suite::redact_secrets`]); the
//! values themselves are also replaced wherever else they appear.

use crate::results::BootRecord;
use loads::suite::{redact_secrets, REDACTED};

/// Shortest secret value replaced in free text (the console log): a
/// shorter one would also match ordinary words. Cmdline words are
/// redacted by key, whatever their length.
pub const MIN_FREE_TEXT_SECRET: usize = 8;

/// `text` with each of `secrets` (the long enough ones) replaced.
fn replace_values(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= MIN_FREE_TEXT_SECRET) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    out
}

/// A cmdline (or an argv word that may hold one) with secret keys and the
/// known secret values redacted.
fn redact_cmdline(text: &str, secrets: &[String]) -> String {
    replace_values(&redact_secrets(text), secrets)
}

/// The console log with the kernel's echo of its cmdline redacted by key,
/// and the known secret values replaced on every line.
fn redact_console(log: &str, secrets: &[String]) -> String {
    let echoes_cmdline = |l: &str| l.contains("command line:") || l.contains("Command line:");
    let mut out = String::with_capacity(log.len());
    for line in log.split_inclusive('\n') {
        if echoes_cmdline(line) {
            out.push_str(&redact_secrets(line));
        } else {
            out.push_str(line);
        }
    }
    replace_values(&out, secrets)
}

/// Takes the secrets out of `boot`: its cmdline, QEMU's argv, the console
/// log and the guest document's cmdline. `secrets` are values known to be
/// secret (the run's upload token, the values of the secret keys of the
/// cmdline: [`loads::suite::secret_values`]).
pub fn redact_boot(boot: &mut BootRecord, secrets: &[String]) {
    boot.cmdline = redact_cmdline(&boot.cmdline, secrets);
    for a in &mut boot.qemu.argv {
        *a = redact_cmdline(a, secrets);
    }
    boot.console_log = redact_console(&boot.console_log, secrets);
    if let Some(doc) = &mut boot.result {
        doc.provenance.kernel.cmdline = redact_cmdline(&doc.provenance.kernel.cmdline, secrets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_go_from_every_recorded_cmdline_whatever_the_quoting() {
        let cmdline = "console=ttyS0\t\"bootbench.token=s3cret-value 1\" lab.api_token=short quiet";
        let secrets = loads::suite::secret_values(cmdline);
        assert_eq!(secrets, ["s3cret-value 1", "short"]);
        let mut b = BootRecord {
            cmdline: cmdline.into(),
            console_log: format!(
                "[    0.000000] Kernel command line: {cmdline}\r\nbootbench: something printed s3cret-value 1\r\nshort words stay\r\n"
            ),
            ..BootRecord::default()
        };
        b.qemu.argv = vec!["-append".into(), cmdline.into()];
        let mut doc = loads::runner::begin_document("run-1", None, None);
        doc.provenance.kernel.cmdline = cmdline.into();
        b.result = Some(doc);
        redact_boot(&mut b, &secrets);
        let all = serde_json::to_string(&b).unwrap();
        assert!(!all.contains("s3cret"), "{all}");
        assert!(!all.contains("api_token=short"), "{all}");
        assert!(b.console_log.contains("short words stay"), "a short value is not replaced in free text");
        assert_eq!(b.cmdline, "console=ttyS0\tbootbench.token=<redacted> lab.api_token=<redacted> quiet");
    }
}
