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
        let dir = self.dir.clone();
        let outcome =
            run_clients(self.params.clients, self.params.phases(), &self.loadfile, |id| FsClient::open(&dir, id));
        let cleanup = std::fs::remove_dir_all(&self.dir);
        let outcome = outcome.map_err(failed)?;
        cleanup.map_err(|e| failed(DirError { dir: self.dir.clone(), what: "remove", source: e }))?;
        Ok(results::iteration(&outcome, &self.loadfile))
    }
}

#[cfg(test)]
mod tests {
    use super::super::nbench::builtin_loadfile;
    use super::super::nbench::completed_lines::check_iteration;
    use super::super::nbench::loadfile::Op;
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
    fn builtin_loadfile_counts_the_bytes_of_the_lines_completed() {
        let it = run(NbenchParams { clients: 2, duration_s: 1.0, warmup_s: 0.0, ..Default::default() });
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
        // Each client's bytes are those of the ReadX and WriteX sizes of
        // the lines it completed, from the loadfile's start.
        let lf = builtin_loadfile::builtin().unwrap();
        // dbench counts the size each ReadX and WriteX asks for (spelled
        // out here, not taken from the code under test).
        let dbench_bytes = |op: &Op| match op {
            Op::ReadX { size, .. } | Op::WriteX { size, .. } => u64::from(*size),
            _ => 0,
        };
        let ranges = check_iteration(&it.detail, &lf, |_| true, dbench_bytes);
        assert!(ranges.iter().all(|r| *r.start() > 1000), "{ranges:?}");
        let secs = it.detail["measured_s"].as_f64().unwrap();
        let bytes = it.detail["bytes"].as_u64().unwrap() as f64;
        assert!((it.metrics["throughput"].value - bytes / 1e6 / secs).abs() < 1e-9, "{:?}", it.metrics);
    }

    /// rchar + wchar of this process and the children it has reaped.
    fn io_bytes() -> u64 {
        let io = std::fs::read_to_string("/proc/self/io").unwrap();
        io.lines()
            .filter_map(|l| l.strip_prefix("rchar: ").or_else(|| l.strip_prefix("wchar: ")))
            .map(|v| v.trim().parse::<u64>().unwrap())
            .sum()
    }

    /// Runs `f` in a forked child and returns what it returned: the
    /// child's /proc/self/io then counts its own I/O and its reaped
    /// children's, and none of the test harness's other threads.
    fn in_child(f: impl FnOnce() -> String) -> String {
        use std::io::{Read, Write};
        let (r, w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child runs `f` and leaves with _exit.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                drop(r);
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                    .unwrap_or_else(|_| "the child panicked".to_string());
                let _ = std::fs::File::from(w).write_all(out.as_bytes());
                // SAFETY: leaves without the harness's exit work.
                unsafe { libc::_exit(0) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(w);
                let mut out = String::new();
                std::fs::File::from(r).read_to_string(&mut out).unwrap();
                nix::sys::wait::waitpid(child, None).unwrap();
                out
            }
        }
    }

    #[test]
    fn client_txt_throughput_is_the_bytes_the_kernel_moved() {
        let text = std::fs::read_to_string(CLIENT_TXT).unwrap_or_else(|e| {
            panic!("{CLIENT_TXT} is missing ({e}): run scripts/setup to install Debian's dbench package")
        });
        // The first 20,000 lines: setup, fillers and the first documents.
        let slice: String = text.lines().take(20_000).flat_map(|l| [l, "\n"]).collect();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("client-slice.txt");
        std::fs::write(&path, slice).unwrap();
        let params = NbenchParams {
            clients: 2,
            duration_s: 1.0,
            warmup_s: 0.0,
            loadfile: path.display().to_string(),
            ..Default::default()
        };
        let ctx = RunContext::new(1, tmp.path().to_path_buf());
        let mut w = Dbench::new(params, &ctx).unwrap();
        let max_io = w.loadfile.max_io_size() as u64;
        let text_len = w.loadfile.text_len;
        let out = in_child(|| {
            let before = io_bytes();
            let it = w.run_iteration().unwrap();
            let moved = io_bytes() - before;
            serde_json::json!({ "moved": moved, "detail": it.detail }).to_string()
        });
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let (moved, detail) = (v["moved"].as_u64().unwrap(), &v["detail"]);
        let counted = detail["bytes"].as_u64().unwrap();
        eprintln!("counted {counted} bytes, the kernel moved {moved}");
        // client.txt's reads all return what they ask for, so the kernel
        // moved every counted byte, plus the loadfile's text each client
        // reads on every pass, what each client did after the timed phase
        // (at most one operation) and the clients' reports through their
        // pipes.
        assert_eq!(detail["counters"]["read_size_mismatches"], serde_json::json!(0), "{detail}");
        assert!(counted > 10_000_000, "{counted}");
        assert!(counted <= moved, "counted {counted} bytes, the kernel moved {moved}");
        let passes = detail["passes_started"].as_u64().unwrap();
        let slack = passes * text_len + 2 * (max_io + 64 * 1024);
        assert!(moved - counted <= slack, "counted {counted} bytes, the kernel moved {moved}");
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
