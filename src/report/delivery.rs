//! Where a rendered report goes: a file or standard output, with its
//! warnings on standard error whenever they could hide inside a file.

use anyhow::Context;
use std::path::Path;

/// Writes a report to `output` (or stdout). The warnings also go to stderr
/// when the body is not the text table or goes to a file, so differences
/// in the machines never hide inside a file.
pub fn deliver(body: &str, warnings: &[String], not_text: bool, output: Option<&Path>) -> anyhow::Result<()> {
    if not_text || output.is_some() {
        for w in warnings {
            log::warn!("{w}");
        }
    }
    match output {
        Some(p) => {
            std::fs::write(p, body).with_context(|| format!("cannot write {}", p.display()))?;
            log::info!("wrote {}", p.display());
        }
        None => print!("{body}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_goes_to_its_file_and_an_unwritable_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.txt");
        deliver("table\n", &["arch differs".into()], false, Some(&out)).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "table\n");
        let bad = dir.path().join("no/such/dir/r.txt");
        let e = format!("{:#}", deliver("x", &[], true, Some(&bad)).unwrap_err());
        assert!(e.contains("cannot write") && e.contains("no/such/dir"), "{e}");
    }
}
