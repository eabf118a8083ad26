//! `dbench`: N client processes replay an NBENCH loadfile on the work
//! filesystem (a tmpfs in the appliance, as reference 000 used ramfs)
//! through a warmup and a timed phase, and report MB/s with dbench's
//! per-operation count, average and maximum latency. Each iteration starts
//! from an empty directory and removes it afterwards.

use super::nbench::client_driver::run_clients;
use super::nbench::fs_client::FsClient;
use super::nbench::loadfile::Loadfile;
use super::nbench::params::NbenchParams;
use super::nbench::results;
use crate::schema::Iteration;
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use std::path::PathBuf;

const NAME: &str = "dbench";

/// The prepared workload.
pub struct Dbench {
    params: NbenchParams,
    loadfile: Loadfile,
    dir: PathBuf,
}

fn failed(source: impl std::error::Error + Send + Sync + 'static) -> WorkloadError {
    WorkloadError::Failed { workload: NAME, source: Box::new(source) }
}

impl Dbench {
    /// Prepares `dbench`: validates the parameters and loads the loadfile.
    pub fn new(params: NbenchParams, ctx: &RunContext) -> Result<Dbench, WorkloadError> {
        let (params, loadfile) = params.validate().map_err(failed)?;
        Ok(Dbench { params, loadfile, dir: ctx.work_dir.join(NAME) })
    }

    fn fresh_dir(&self) -> Result<(), WorkloadError> {
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(failed(DirError { dir: self.dir.clone(), what: "remove", source: e })),
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| failed(DirError { dir: self.dir.clone(), what: "create", source: e }))
    }
}

/// The replay directory could not be made or removed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} the replay directory {dir}")]
pub struct DirError {
    dir: PathBuf,
    what: &'static str,
    #[source]
    source: std::io::Error,
}

impl Workload for Dbench {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        params_map(&self.params)
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        self.fresh_dir()?;
        let max_io = self.loadfile.max_io_size();
        let dir = self.dir.clone();
        let outcome = run_clients(self.params.clients, self.params.phases(), &self.loadfile, |id| {
            FsClient::open(&dir, id, max_io)
        });
        let cleanup = std::fs::remove_dir_all(&self.dir);
        let outcome = outcome.map_err(failed)?;
        cleanup.map_err(|e| failed(DirError { dir: self.dir.clone(), what: "remove", source: e }))?;
        Ok(results::iteration(&outcome, &self.loadfile))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT_TXT: &str = "/usr/share/dbench/client.txt";

    fn run(params: NbenchParams) -> Iteration {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = RunContext::new(1, tmp.path().to_path_buf());
        let mut w = Dbench::new(params, &ctx).unwrap();
        let it = w.run_iteration().unwrap();
        assert!(!tmp.path().join("dbench").exists(), "the iteration removes its directory");
        it
    }

    #[test]
    fn builtin_loadfile_two_clients_one_second() {
        let it = run(NbenchParams { clients: 2, duration_s: 1.0, warmup_s: 0.2, ..Default::default() });
        let mb_s = it.metrics["throughput"].value;
        assert!(mb_s > 1.0, "{mb_s} MB/s");
        assert_eq!(it.metrics["throughput"].unit, "MB/s");
        assert!(it.metrics["readx_avg_latency"].value > 0.0);
        assert_eq!(it.detail["clients"], serde_json::json!(2));
        assert_eq!(it.detail["loadfile"], serde_json::json!("builtin"));
        let counters = &it.detail["counters"];
        assert_eq!(counters["find_count_mismatches"], serde_json::json!(0), "{counters}");
        assert_eq!(counters["read_size_mismatches"], serde_json::json!(0), "{counters}");
        let ops = it.detail["ops"].as_object().unwrap();
        for op in ["NTCreateX", "Close", "ReadX", "WriteX", "Qpathinfo", "Find"] {
            assert!(ops[op]["count"].as_u64().unwrap() > 0, "{op}: {ops:?}");
        }
    }

    #[test]
    fn client_txt_slice_two_clients_one_second() {
        let text = std::fs::read_to_string(CLIENT_TXT).unwrap_or_else(|e| {
            panic!("{CLIENT_TXT} is missing ({e}): run scripts/setup to install Debian's dbench package")
        });
        // The first 20,000 lines: setup, fillers and the first documents.
        let slice: String = text.lines().take(20_000).flat_map(|l| [l, "\n"]).collect();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("client-slice.txt");
        std::fs::write(&path, slice).unwrap();
        let it = run(NbenchParams {
            clients: 2,
            duration_s: 1.0,
            warmup_s: 0.0,
            loadfile: path.display().to_string(),
            ..Default::default()
        });
        assert!(it.metrics["throughput"].value > 1.0, "{:?}", it.metrics["throughput"]);
        assert_eq!(it.detail["counters"]["find_count_mismatches"], serde_json::json!(0));
    }

    #[test]
    fn a_status_mismatch_fails_the_iteration_naming_line_and_op() {
        let tmp = tempfile::tempdir().unwrap();
        let lf = tmp.path().join("bad.txt");
        std::fs::write(
            &lf,
            "Deltree \"\\clients\\client1\" NT_STATUS_OK\nMkdir \"\\clients\" NT_STATUS_OK\nNTCreateX \"\\clients\\client1\\nope\" 0x40 0x1 1 NT_STATUS_OK\n",
        )
        .unwrap();
        let ctx = RunContext::new(1, tmp.path().to_path_buf());
        let mut w = Dbench::new(
            NbenchParams {
                clients: 2,
                duration_s: 1.0,
                warmup_s: 0.0,
                loadfile: lf.display().to_string(),
                ..Default::default()
            },
            &ctx,
        )
        .unwrap();
        let e = w.run_iteration().unwrap_err();
        let chain = crate::error_chain::error_chain(&e);
        assert!(chain.contains("line 3") && chain.contains("NTCreateX") && chain.contains("bad.txt"), "{chain}");
    }
}
