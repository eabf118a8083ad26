//! Picking the kernel groups a comparison or report reads: results files
//! (whole, or one group through a selector) and runs of a results store.
//! For contest, groups of the same kernel from several arguments merge
//! into one kernel, a boot given twice counting once. Sits above the
//! results model, the store, the comparison's selectors and contest's
//! report inputs; only commands use it.

use crate::compare::{self, selector, GroupInput};
use crate::report::contest::{check_has_contest, InputBoot, KernelInput};
use crate::results::migration;
use crate::results::ResultsFile;
use anyhow::{bail, Context};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Reads every file named (or, with a store, every run id that names no
/// file) and picks the groups: baseline first.
pub fn select_groups(args: &[String], store_db: Option<&Path>) -> anyhow::Result<Vec<(selector::FileGroup, String)>> {
    let mut selectors = Vec::new();
    let mut files: Vec<(PathBuf, Vec<selector::FileGroup>)> = Vec::new();
    for a in args {
        match (selector::parse(a), store_db) {
            (Ok(s), _) => selectors.push(s),
            (Err(selector::SelectorError::NoFile(_)), Some(db)) => {
                let run = crate::service::store::load_run(db, a)
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
            let f = migration::read_results_or_local(&s.file)?;
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

/// The groups `args` name, as the comparison takes them: the baseline and
/// the candidates, each named for the table.
pub fn comparison_inputs(args: &[String], store_db: Option<&Path>) -> anyhow::Result<(GroupInput, Vec<GroupInput>)> {
    let picked = select_groups(args, store_db)?;
    let groups: Vec<selector::FileGroup> = picked.iter().map(|(g, _)| g.clone()).collect();
    let names = compare::display_names(&groups);
    let mut inputs: Vec<GroupInput> =
        picked.into_iter().zip(names).map(|((g, source), name)| GroupInput { name, source, boots: g.boots }).collect();
    let baseline = inputs.remove(0);
    Ok((baseline, inputs))
}

/// The kernel groups of every file `args` name, described for `--list`.
pub fn list_groups(args: &[String]) -> anyhow::Result<String> {
    let mut out = String::new();
    for a in args {
        let s = selector::parse(a)?;
        let f = migration::read_results_or_local(&s.file)?;
        out.push_str(&format!("{}:\n{}\n", s.file.display(), selector::describe(&selector::groups(&f.boots))));
    }
    Ok(out)
}

/// Reads one argument: its file's (or store run's) boots grouped, and the
/// groups it names with how to cite each.
fn read_contest_argument(
    arg: &str,
    store_db: Option<&PathBuf>,
) -> anyhow::Result<Vec<(selector::FileGroup, String, String)>> {
    let (file, sel): (ResultsFile, Option<selector::Selector>) = match (selector::parse(arg), store_db) {
        (Ok(sel), _) => (migration::read_results_or_local(&sel.file)?, Some(sel)),
        (Err(selector::SelectorError::NoFile(_)), Some(db)) => (
            crate::service::store::load_run(db, arg)
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
    check_has_contest(arg, &boots)?;
    Ok(picked.into_iter().map(|(g, source)| (g, source, origin.clone())).collect())
}

/// Reads every argument and forms the kernels, in order of first mention.
pub fn contest_kernels(args: &[String], store_db: Option<&PathBuf>) -> anyhow::Result<Vec<KernelInput>> {
    struct Merged {
        group: selector::FileGroup,
        sources: Vec<String>,
        origins: Vec<String>,
    }
    let mut merged: Vec<Merged> = Vec::new();
    let mut seen_runs: BTreeSet<String> = BTreeSet::new();
    for arg in args {
        for (group, source, origin) in read_contest_argument(arg, store_db)? {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_names_each_files_groups_and_comparison_inputs_put_the_baseline_first() {
        use crate::compare::test_fixtures::fork_boots;
        use crate::results::ResultsFile;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ab.json");
        let mut boots = fork_boots(0, "base", "aaaa01", &[&[100.0, 101.0], &[100.5, 100.2]]);
        boots.extend(fork_boots(2, "cand", "bbbb02", &[&[90.0, 91.0], &[90.5, 90.2]]));
        ResultsFile { boots, ..Default::default() }.write(&f).unwrap();
        let listed = list_groups(&[f.display().to_string()]).unwrap();
        assert!(listed.starts_with(&format!("{}:\n", f.display())), "{listed}");
        assert!(listed.contains("#1 label 'base'") && listed.contains("#2 label 'cand'"), "{listed}");
        let (baseline, candidates) = comparison_inputs(&[f.display().to_string()], None).unwrap();
        assert_eq!((baseline.boots.len(), candidates.len(), candidates[0].boots.len()), (2, 1, 2));
        assert_eq!(baseline.boots[0].label, "base");
        let missing = dir.path().join("gone.json").display().to_string();
        let e = format!("{:#}", list_groups(std::slice::from_ref(&missing)).unwrap_err());
        assert!(e.contains("gone.json"), "{e}");
        let e = format!("{:#}", comparison_inputs(&[missing], None).unwrap_err());
        assert!(e.contains("gone.json"), "{e}");
    }

    #[test]
    fn groups_come_from_store_runs_by_id() {
        use crate::compare::test_fixtures::fork_boots;
        use crate::results::ResultsFile;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let mut store = crate::service::store::Store::open(&db).unwrap();
        for (id, label, sha, rates) in
            [("base-run", "base", "aaaa01", [100.0, 101.0]), ("cand-run", "cand", "bbbb02", [90.0, 91.0])]
        {
            let mut boots = fork_boots(0, label, sha, &[&rates]);
            if let Some(doc) = boots[0].result.as_mut() {
                doc.run_id = id.to_string();
            }
            let file = ResultsFile { boots, ..Default::default() };
            let body = serde_json::to_vec(&file).unwrap();
            store.put(&crate::service::store::validate(body, id).unwrap(), None, None).unwrap();
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
}
