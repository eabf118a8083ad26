//! The suite's workloads on this host, without booting. Each workload runs
//! in this process exactly as the guest's workload child runs it, so
//! development and tests need no boot. A suite that builds in the userland
//! pack gets the pack mounted here ([`pack_mount`]) in place of the
//! guest's `/pack`, so host and guest build from the same image.

pub mod pack_mount;

use crate::pack::choice::ChosenPack;
use crate::results::pack::PackRecord;
use anyhow::Context;
use loads::runner;
use loads::schema::{RunDocument, RunError};
use loads::suite::Suite;
use loads::workload::RunContext;
use pack_mount::PackMount;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The parameter of a pack workload that says where the pack is mounted.
pub const PACK_PARAM: &str = "pack";

/// What `bootbench local` writes with `-o`: the result document, with the
/// pack the run used beside its fields (as `run` records it in each boot's
/// envelope), when it used one. Without a pack it is the document alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalDocument {
    /// The result document.
    #[serde(flatten)]
    pub document: RunDocument,
    /// The userland pack mounted for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<PackRecord>,
}

/// `suite` with every pack workload's `pack` parameter set to `dir`,
/// unless the suite gave one.
pub fn with_pack_at(suite: &Suite, dir: &Path) -> Suite {
    let mut suite = suite.clone();
    for w in suite.workloads.iter_mut().filter(|w| loads::workloads::needs_pack(w)) {
        w.params.entry(PACK_PARAM).or_insert_with(|| dir.display().to_string().into());
    }
    suite
}

/// Runs every workload of `suite` here, in `work_dir` (default: a fresh
/// temporary directory), with `pack` mounted read-only for the workloads
/// that build in it, and returns the finished document. The pack is
/// unmounted and its loop device detached before this returns, whatever
/// the workloads did; a failure to undo it is an error of the document.
pub fn run_suite(suite: &Suite, work_dir: Option<&Path>, pack: Option<&ChosenPack>) -> anyhow::Result<LocalDocument> {
    let tmp;
    let work_dir = match work_dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create work dir {}", d.display()))?;
            d.to_path_buf()
        }
        None => {
            tmp = tempfile::Builder::new().prefix("bootbench-local-").tempdir().context("cannot create a temp dir")?;
            tmp.path().to_path_buf()
        }
    };
    if pack.is_some() {
        // Ctrl-C then unmounts the pack (see `PackMount`).
        crate::interrupt::install()?;
    }
    let mount = pack.map(|p| PackMount::mount(&p.image)).transpose()?;
    // Registered after the mount's hook, so it runs first: make and its
    // compilers, in their own process group, die before the pack is
    // unmounted, and the loop device detaches as the process ends.
    let _kill_builds = mount.as_ref().map(|_| {
        crate::interrupt::on_interrupt(|| {
            let groups = loads::userland_pack::kill_running();
            if groups > 0 {
                log::info!("interrupted; killed the build running in the userland pack");
            }
        })
    });
    let suite = match &mount {
        Some(m) => {
            log::info!(
                "userland pack {} mounted read-only at {} ({})",
                m.image().display(),
                m.dir().display(),
                m.device().display()
            );
            with_pack_at(suite, m.dir())
        }
        None => suite.clone(),
    };
    let ctx = RunContext::new(suite.seed, work_dir);
    let run_id = uuid::Uuid::new_v4().to_string();
    let mut doc = runner::begin_document(&run_id, Some(&suite), None);
    let kmsg = loads::provenance::KmsgCursor::open(false);
    for spec in &suite.workloads {
        log::info!("workload {} ...", spec.name);
        doc.workloads.push(runner::run_workload(&suite, spec, &ctx, false));
    }
    if let Some(m) = mount {
        let storage = doc.provenance.storage.get_or_insert_with(Default::default);
        storage.pack_device = Some(m.device().display().to_string());
        storage.pack_mount = Some(m.dir().display().to_string());
        if let Err(e) = m.unmount() {
            doc.errors.push(RunError { location: "local".into(), message: loads::error_chain::error_chain(&e) });
        }
    }
    let mut kmsg = kmsg;
    runner::finish_document(&mut doc, kmsg.warnings());
    Ok(LocalDocument { document: doc, pack: pack.map(|p| p.record.clone()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_workloads_get_the_mount_point_unless_the_suite_gave_one() {
        let suite = Suite::from_json(
            "t",
            r#"{"name":"t","workloads":[{"name":"fork"},{"name":"kernbench"},{"name":"kernbench","params":{"pack":"/mine"}},
                {"name":"contest","params":{"build":"pack"}},{"name":"contest"}]}"#,
        )
        .unwrap();
        let got = with_pack_at(&suite, Path::new("/tmp/bootbench-pack-x"));
        let packs: Vec<_> = got.workloads.iter().map(|w| w.params.get(PACK_PARAM).cloned()).collect();
        let at = Some("/tmp/bootbench-pack-x".into());
        assert_eq!(packs, [None, at.clone(), Some("/mine".into()), at, None], "contest's pack foreground too");
    }
}
