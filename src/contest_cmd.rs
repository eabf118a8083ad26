//! `bootbench contest-report`: reads results files (or runs of a results
//! store), groups their boots into kernels the way `bootbench compare`
//! does, and prints contest's table. Owns argument handling, reading and
//! grouping; the figures are [`crate::contest_report`]'s.
//!
//! Every argument is a results file (all its kernel groups) or
//! FILE:SELECTOR (one group, as `compare` takes it). Groups with the same
//! kernel image, cmdline and label from several arguments are one kernel:
//! boots of one kernel run on different days add up. A boot given twice
//! (same run id) counts once.

use crate::compare::{self, selector};
use crate::contest_report::{self, render, InputBoot, KernelInput, RatioBase, Settings};
use crate::results_file::ResultsFile;
use crate::{schema_migration, store};
use anyhow::{bail, Context};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `bootbench contest-report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ContestReportArgs {
    /// Results files written by `bootbench run -o`; FILE:SELECTOR picks one
    /// kernel group of a file (#N, label=NAME or NAME, sha=HEXPREFIX,
    /// cmdline~TEXT). With --store, a run id of the store.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// What Ratio divides by: `baseline` (the baseline kernel's mean
    /// no_load time, as the 2002 reports did) or `own` (each kernel's own
    /// no_load of the same iteration).
    #[arg(long, default_value = "baseline")]
    pub ratio_base: RatioBase,
    /// The baseline kernel, by its name in the table or its label
    /// (default: the first kernel).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Output format: text, json or markdown.
    #[arg(long, default_value = "text")]
    pub format: Format,
    /// Write the output here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// A results store (SQLite file of `bootbench serve`): arguments that
    /// are not files are run ids in it.
    #[arg(long)]
    pub store: Option<PathBuf>,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The reference layout.
    Text,
    /// The report with each column's standard deviation.
    Json,
    /// Markdown tables.
    Markdown,
}

impl std::str::FromStr for Format {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Format> {
        Ok(match s {
            "text" => Format::Text,
            "json" => Format::Json,
            "markdown" | "md" => Format::Markdown,
            other => bail!("unknown format '{other}' (expected text, json or markdown)"),
        })
    }
}

/// Reads one argument: its file's (or store run's) boots grouped, and the
/// groups it names with how to cite each.
fn read_argument(arg: &str, store_db: Option<&PathBuf>) -> anyhow::Result<Vec<(selector::FileGroup, String, String)>> {
    let (file, sel): (ResultsFile, Option<selector::Selector>) = match (selector::parse(arg), store_db) {
        (Ok(sel), _) => (schema_migration::read_results(&sel.file)?, Some(sel)),
        (Err(selector::SelectorError::NoFile(_)), Some(db)) => (
            store::load_run(db, arg)
                .with_context(|| format!("'{arg}' is no file, and not a run of the store {}", db.display()))?
                .into_results_file(),
            None,
        ),
        (Err(e), _) => return Err(e.into()),
    };
    let groups = selector::groups(&file.boots);
    let origin = sel.as_ref().map_or_else(|| arg.to_string(), |s| s.file.display().to_string());
    let picked = match sel.as_ref().filter(|s| s.criterion.is_some()) {
        Some(s) => vec![(selector::select(s, &groups)?, arg.to_string())],
        None if groups.len() == 1 => groups.into_iter().map(|g| (g, arg.to_string())).collect(),
        None => groups.into_iter().map(|g| (g.clone(), format!("{arg}:#{}", g.number))).collect(),
    };
    let boots: Vec<_> = picked.iter().flat_map(|(g, _)| g.boots.iter().cloned()).collect();
    contest_report::check_has_contest(arg, &boots)?;
    Ok(picked.into_iter().map(|(g, source)| (g, source, origin.clone())).collect())
}

/// Reads every argument and forms the kernels, in order of first mention.
pub fn kernels(args: &[String], store_db: Option<&PathBuf>) -> anyhow::Result<Vec<KernelInput>> {
    struct Merged {
        group: selector::FileGroup,
        sources: Vec<String>,
        origins: Vec<String>,
    }
    let mut merged: Vec<Merged> = Vec::new();
    let mut seen_runs: BTreeSet<String> = BTreeSet::new();
    for arg in args {
        for (group, source, origin) in read_argument(arg, store_db)? {
            let key = group.boots.first().map(|b| b.group_key());
            let at = match merged.iter().position(|m| m.group.boots.first().map(|b| b.group_key()) == key) {
                Some(i) => i,
                None => {
                    let number = merged.len() + 1;
                    merged.push(Merged {
                        group: selector::FileGroup { number, boots: Vec::new() },
                        sources: Vec::new(),
                        origins: Vec::new(),
                    });
                    number - 1
                }
            };
            let Some(m) = merged.get_mut(at) else { continue };
            m.sources.push(source);
            for b in group.boots {
                let run_id = b.result.as_ref().map(|d| d.run_id.clone()).filter(|r| !r.is_empty());
                if let Some(id) = run_id {
                    if !seen_runs.insert(id) {
                        continue;
                    }
                }
                m.group.boots.push(b);
                m.origins.push(origin.clone());
            }
        }
    }
    let groups: Vec<selector::FileGroup> = merged.iter().map(|m| m.group.clone()).collect();
    // The init's own cmdline keys are what tells kernels apart when one
    // kernel runs under several schedulers; their prefix is noise there.
    let names: Vec<String> = compare::display_names(&groups)
        .into_iter()
        .map(|n| n.replace("[bootbench.", "[").replace(" bootbench.", " "))
        .collect();
    Ok(merged
        .into_iter()
        .zip(names)
        .map(|(m, name)| KernelInput {
            name,
            sources: m.sources,
            boots: m
                .group
                .boots
                .into_iter()
                .zip(m.origins)
                .map(|(record, origin)| InputBoot { origin, record })
                .collect(),
        })
        .collect())
}

/// The report for `args`, rendered, and its warnings.
pub fn render_report(args: &ContestReportArgs) -> anyhow::Result<(String, Vec<String>)> {
    let inputs = kernels(&args.files, args.store.as_ref())?;
    let settings = Settings { ratio_base: args.ratio_base, baseline: args.baseline.clone() };
    let report = contest_report::build(&inputs, &settings)?;
    let body = match args.format {
        Format::Text => render::text(&report),
        Format::Json => render::json(&report)?,
        Format::Markdown => render::markdown(&report),
    };
    Ok((body, report.warnings))
}

/// Runs `bootbench contest-report`.
pub fn run(args: &ContestReportArgs) -> anyhow::Result<ExitCode> {
    let (body, warnings) = render_report(args)?;
    crate::compare_cmd::deliver(
        "contest-report",
        &body,
        &warnings,
        args.format != Format::Text,
        args.output.as_deref(),
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;
