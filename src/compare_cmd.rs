//! `bootbench compare`: reads results files, picks the kernel groups named
//! on the command line, runs the comparison and writes it in the asked
//! format. Owns argument parsing and file handling; the analysis is
//! [`crate::compare`]'s.

use crate::compare::{self, html, selector, tabular, text, GroupInput, Method, Settings};
use crate::schema_migration;
use crate::stats::multiple_testing::Correction;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `bootbench compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The baseline, then one or more candidates. Each is a results file
    /// (holding one kernel group) or FILE:SELECTOR for one group of a
    /// multi-kernel file; SELECTOR is #N, label=NAME (or just NAME),
    /// sha=HEXPREFIX or cmdline~TEXT. A single multi-kernel file compares
    /// its first group (baseline) with all the others.
    #[arg(required = true, value_name = "BASE [CAND]...")]
    pub groups: Vec<String>,
    /// Changes inside ±threshold are "no change", e.g. 2% or 0.5.
    #[arg(long, default_value = "2%")]
    pub threshold: String,
    /// Confidence in %, e.g. 95 (or 0.95).
    #[arg(long, default_value = "95")]
    pub confidence: String,
    /// Correction for the number of metrics: holm, bh (Benjamini-Hochberg) or none.
    #[arg(long, default_value = "holm")]
    pub correction: String,
    /// Interval method: welch-log (ratio of geometric means) or fieller
    /// (ratio of arithmetic means).
    #[arg(long, default_value = "welch-log")]
    pub method: String,
    /// Output format: text, json, csv, markdown or html.
    #[arg(long, default_value = "text")]
    pub format: String,
    /// Write the output here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Compare only these workloads, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Leave out boots with NaN or missing metrics or a failed workload
    /// (listed in the output) instead of refusing.
    #[arg(long)]
    pub skip_incomplete_boots: bool,
    /// A results store (SQLite file of `bootbench serve`): a group argument
    /// that names no file is a run id of this store.
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// List the kernel groups in the files and stop.
    #[arg(long)]
    pub list: bool,
}

/// Parses `2%`, `2` or `0.5%` into percent.
pub fn parse_threshold(s: &str) -> anyhow::Result<f64> {
    let t = s.trim().trim_end_matches('%');
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => bail!("bad threshold '{s}': expected a percentage like 2% or 0.5"),
    }
}

/// Parses `95`, `95%` or `0.95` into a fraction.
pub fn parse_confidence(s: &str) -> anyhow::Result<f64> {
    let t = s.trim().trim_end_matches('%');
    let v: f64 = t
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .with_context(|| format!("bad confidence '{s}': expected e.g. 95"))?;
    let frac = if v > 1.0 { v / 100.0 } else { v };
    if !(0.5..1.0).contains(&frac) {
        bail!("bad confidence '{s}': must be at least 50% and below 100%");
    }
    Ok(frac)
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The reference layout.
    Text,
    /// The whole report as JSON.
    Json,
    /// One row per metric and kernel.
    Csv,
    /// Markdown tables.
    Markdown,
    /// Self-contained HTML with plots.
    Html,
}

impl std::str::FromStr for Format {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Format> {
        Ok(match s {
            "text" => Format::Text,
            "json" => Format::Json,
            "csv" => Format::Csv,
            "markdown" | "md" => Format::Markdown,
            "html" => Format::Html,
            other => bail!("unknown format '{other}' (expected text, json, csv, markdown or html)"),
        })
    }
}

/// Reads every file named (or, with a store, every run id that names no
/// file) and picks the groups: baseline first.
pub fn select_groups(args: &[String], store_db: Option<&Path>) -> anyhow::Result<Vec<(selector::FileGroup, String)>> {
    let mut selectors = Vec::new();
    let mut files: Vec<(PathBuf, Vec<selector::FileGroup>)> = Vec::new();
    for a in args {
        match (selector::parse(a), store_db) {
            (Ok(s), _) => selectors.push(s),
            (Err(selector::SelectorError::NoFile(_)), Some(db)) => {
                let run = crate::store::load_run(db, a)
                    .with_context(|| format!("'{a}' is no file, and not a run of the store {}", db.display()))?;
                // A stored run stands for itself under a name no file has.
                let key = PathBuf::from(format!("store:{a}"));
                files.push((key.clone(), selector::groups(&run.into_results_file().boots)));
                selectors.push(selector::Selector { text: a.clone(), file: key, criterion: None });
            }
            (Err(e), _) => return Err(e.into()),
        }
    }
    for s in &selectors {
        if !files.iter().any(|(p, _)| *p == s.file) {
            let f = schema_migration::read_results(&s.file)?;
            files.push((s.file.clone(), selector::groups(&f.boots)));
        }
    }
    let groups_of = |p: &PathBuf| files.iter().find(|(q, _)| q == p).map(|(_, g)| g.as_slice()).unwrap_or_default();
    if let [only] = selectors.as_slice() {
        let gs = groups_of(&only.file);
        if only.criterion.is_none() && gs.len() >= 2 {
            return Ok(gs.iter().map(|g| (g.clone(), format!("{}:#{}", only.file.display(), g.number))).collect());
        }
        if gs.len() < 2 {
            bail!(
                "a comparison needs a baseline and at least one candidate; {} holds {} group(s):\n{}",
                only.file.display(),
                gs.len(),
                selector::describe(gs)
            );
        }
    }
    let mut out = Vec::new();
    for s in &selectors {
        out.push((selector::select(s, groups_of(&s.file))?, s.text.clone()));
    }
    Ok(out)
}

/// Runs `bootbench compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        for a in &args.groups {
            let s = selector::parse(a)?;
            let f = schema_migration::read_results(&s.file)?;
            println!("{}:\n{}", s.file.display(), selector::describe(&selector::groups(&f.boots)));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let format: Format = args.format.parse()?;
    let settings = Settings {
        threshold_pct: parse_threshold(&args.threshold)?,
        confidence: parse_confidence(&args.confidence)?,
        correction: args.correction.parse::<Correction>()?,
        method: args.method.parse::<Method>()?,
    };
    let picked = select_groups(&args.groups, args.store.as_deref())?;
    let groups: Vec<selector::FileGroup> = picked.iter().map(|(g, _)| g.clone()).collect();
    let names = compare::display_names(&groups);
    let mut inputs: Vec<GroupInput> =
        picked.into_iter().zip(names).map(|((g, source), name)| GroupInput { name, source, boots: g.boots }).collect();
    let baseline = inputs.remove(0);
    let only = (!args.workloads.is_empty()).then_some(args.workloads.as_slice());
    let report = compare::compare(&baseline, &inputs, settings, only, args.skip_incomplete_boots)?;
    let body = match format {
        Format::Text => text::render(&report),
        Format::Json => tabular::json(&report)?,
        Format::Csv => tabular::csv(&report)?,
        Format::Markdown => tabular::markdown(&report),
        Format::Html => html::render(&report)?,
    };
    deliver("compare", &body, &report.warnings, format != Format::Text, args.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

/// Writes a report to `output` (or stdout). The warnings also go to stderr
/// when the body is not the text table or goes to a file, so differences
/// in the machines never hide inside a file. `tool` prefixes the messages.
pub fn deliver(
    tool: &str,
    body: &str,
    warnings: &[String],
    not_text: bool,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    if not_text || output.is_some() {
        for w in warnings {
            eprintln!("{tool}: WARNING: {w}");
        }
    }
    match output {
        Some(p) => {
            std::fs::write(p, body).with_context(|| format!("cannot write {}", p.display()))?;
            eprintln!("{tool}: wrote {}", p.display());
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
        deliver("compare", "table\n", &["arch differs".into()], false, Some(&out)).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "table\n");
        let bad = dir.path().join("no/such/dir/r.txt");
        let e = format!("{:#}", deliver("compare", "x", &[], true, Some(&bad)).unwrap_err());
        assert!(e.contains("cannot write") && e.contains("no/such/dir"), "{e}");
    }

    #[test]
    fn groups_come_from_store_runs_by_id() {
        use crate::compare::test_fixtures::fork_boots;
        use crate::results_file::ResultsFile;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let mut store = crate::store::Store::open(&db).unwrap();
        for (id, label, sha, rates) in
            [("base-run", "base", "aaaa01", [100.0, 101.0]), ("cand-run", "cand", "bbbb02", [90.0, 91.0])]
        {
            let mut boots = fork_boots(0, label, sha, &[&rates]);
            if let Some(doc) = boots[0].result.as_mut() {
                doc.run_id = id.to_string();
            }
            let file = ResultsFile { boots, ..Default::default() };
            let body = serde_json::to_vec(&file).unwrap();
            store.put(&crate::store::validate(body, id).unwrap(), None).unwrap();
        }
        drop(store);
        let args = ["base-run".to_string(), "cand-run".to_string()];
        let picked = select_groups(&args, Some(&db)).unwrap();
        let labels: Vec<&str> = picked.iter().map(|(g, _)| g.label()).collect();
        assert_eq!(labels, ["base", "cand"]);
        let e = format!("{:#}", select_groups(&["nope-run".to_string()], Some(&db)).unwrap_err());
        assert!(e.contains("'nope-run' is no file, and not a run of the store"), "{e}");
        assert!(select_groups(&args, None).is_err(), "without --store a run id is a missing file");
    }

    #[test]
    fn thresholds_and_confidences() {
        assert_eq!(parse_threshold("2%").unwrap(), 2.0);
        assert_eq!(parse_threshold("0.5").unwrap(), 0.5);
        assert!(parse_threshold("-1%").is_err());
        assert!(parse_threshold("lots").unwrap_err().to_string().contains("lots"));
        assert_eq!(parse_confidence("95").unwrap(), 0.95);
        assert_eq!(parse_confidence("99%").unwrap(), 0.99);
        assert_eq!(parse_confidence("0.9").unwrap(), 0.9);
        assert!(parse_confidence("100").is_err());
        assert!(parse_confidence("30").is_err());
        assert!("pdf".parse::<Format>().unwrap_err().to_string().contains("pdf"));
    }
}
