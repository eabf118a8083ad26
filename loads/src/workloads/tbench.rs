//! `tbench`: dbench's operations as request/response messages over
//! loopback TCP. A server process accepts one connection per client and
//! forks a handler for each, as `tbench_srv` does; the handlers only
//! produce and consume bytes. Reports MB/s and per-operation latency like
//! dbench. The appliance configures no network, so the loopback interface
//! is brought up first when it is down.

use super::nbench::client_driver::run_clients;
use super::nbench::loadfile::Loadfile;
use super::nbench::params::NbenchParams;
use super::nbench::results;
use super::nbench::tcp_wire::{self, WireClient};
use crate::reap;
use crate::schema::Iteration;
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use nix::unistd::{fork, ForkResult};

const NAME: &str = "tbench";

/// The server process ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// fork failed.
    #[error("cannot start the tbench server process")]
    Fork(#[source] nix::Error),
    /// It exited with an error or was killed.
    #[error("the tbench server process ended with {0}")]
    Ended(String),
    /// Waiting for it failed.
    #[error("cannot wait for the tbench server process")]
    Wait(#[source] reap::ReapError),
}

/// The prepared workload.
pub struct Tbench {
    params: NbenchParams,
    loadfile: Loadfile,
}

fn failed(source: impl std::error::Error + Send + Sync + 'static) -> WorkloadError {
    WorkloadError::Failed { workload: NAME, source: Box::new(source) }
}

impl Tbench {
    /// Prepares `tbench`: validates the parameters, loads the loadfile and
    /// makes sure the loopback interface is up.
    pub fn new(params: NbenchParams, _ctx: &RunContext) -> Result<Tbench, WorkloadError> {
        let (params, loadfile) = params.validate().map_err(failed)?;
        tcp_wire::ensure_loopback_up().map_err(failed)?;
        Ok(Tbench { params, loadfile })
    }
}

impl Workload for Tbench {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        params_map(&self.params)
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let listener = tcp_wire::listen_loopback().map_err(failed)?;
        let addr = listener
            .local_addr()
            .map_err(|source| failed(tcp_wire::WireError::Server { what: "read the listening address", source }))?;
        let clients = self.params.clients;
        // SAFETY: the server process runs this crate's code and leaves
        // with _exit (see the driver for the single-threaded caveat).
        let server = match unsafe { fork() } {
            Err(e) => return Err(failed(ServerError::Fork(e))),
            Ok(ForkResult::Child) => {
                let code = tcp_wire::serve_clients(listener, clients);
                // SAFETY: leaves without the parent's atexit work.
                unsafe { libc::_exit(code) }
            }
            Ok(ForkResult::Parent { child }) => child,
        };
        drop(listener);
        let max_io = self.loadfile.max_io_size();
        let outcome =
            run_clients(clients, self.params.phases(), &self.loadfile, |id| WireClient::connect(addr, id, max_io));
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                reap::kill_and_reap(&[server]);
                return Err(failed(e));
            }
        };
        // Every client has closed its connection, so the handlers and the
        // server end on their own.
        match reap::wait_pid(server) {
            Ok(r) if r.exit.success() => {}
            Ok(r) => return Err(failed(ServerError::Ended(r.exit.to_string()))),
            Err(e) => return Err(failed(ServerError::Wait(e))),
        }
        Ok(results::iteration(&outcome, &self.loadfile))
    }
}

#[cfg(test)]
mod tests {
    use super::super::nbench::builtin_loadfile;
    use super::super::nbench::completed_lines::check_iteration;
    use super::super::nbench::loadfile::Op;
    use super::*;

    fn run(params: NbenchParams) -> Iteration {
        let ctx = RunContext::new(1, std::env::temp_dir());
        let mut w = Tbench::new(params, &ctx).unwrap();
        w.run_iteration().unwrap()
    }

    /// Whether tbench carries out `op`: it sends nothing for Deltree
    /// (spelled out here, not taken from the code under test).
    fn carried(op: &Op) -> bool {
        !matches!(op, Op::Deltree { .. } | Op::Sleep { .. })
    }

    /// What tbench counts for `op`: the data a ReadX reply carries, the
    /// size of a WriteX.
    fn tbench_bytes(op: &Op) -> u64 {
        match op {
            Op::ReadX { ret_size, .. } => u64::from(*ret_size),
            Op::WriteX { size, .. } => u64::from(*size),
            _ => 0,
        }
    }

    #[test]
    fn builtin_loadfile_counts_the_bytes_of_the_exchanges_completed() {
        let it = run(NbenchParams { clients: 2, duration_s: 1.0, warmup_s: 0.0, ..Default::default() });
        assert!(it.metrics["ntcreatex_avg_latency"].value > 0.0);
        assert_eq!(it.detail["clients"], serde_json::json!(2));
        let ops = it.detail["ops"].as_object().unwrap();
        assert!(ops["ReadX"]["count"].as_u64().unwrap() > 0, "{ops:?}");
        assert!(!ops.contains_key("Deltree"), "Deltree sends nothing, like tbench");
        // Each client's bytes are those of the ReadX replies and WriteX
        // requests of the exchanges it completed, from the loadfile's
        // start.
        let lf = builtin_loadfile::builtin().unwrap();
        let ranges = check_iteration(&it.detail, &lf, carried, tbench_bytes);
        assert!(ranges.iter().all(|r| *r.start() > 1000), "{ranges:?}");
    }

    #[test]
    fn reads_count_the_bytes_they_returned() {
        // tbench counts a ReadX's ret_size (what its reply carries), a
        // WriteX's size.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("reads.txt");
        std::fs::write(&path, "ReadX 1 0 65536 1000 NT_STATUS_OK\nWriteX 1 0 4096 10 NT_STATUS_OK\n").unwrap();
        let it = run(NbenchParams {
            clients: 1,
            duration_s: 0.3,
            warmup_s: 0.0,
            loadfile: path.display().to_string(),
            ..Default::default()
        });
        let ops = it.detail["ops"].as_object().unwrap();
        let (reads, writes) = (ops["ReadX"]["count"].as_u64().unwrap(), ops["WriteX"]["count"].as_u64().unwrap());
        assert!(reads > 0, "{ops:?}");
        assert_eq!(it.detail["bytes"], serde_json::json!(reads * 1000 + writes * 4096));
    }

    #[test]
    fn client_txt_slice_counts_the_bytes_of_the_exchanges_completed() {
        const CLIENT_TXT: &str = "/usr/share/dbench/client.txt";
        let text = std::fs::read_to_string(CLIENT_TXT).unwrap_or_else(|e| {
            panic!("{CLIENT_TXT} is missing ({e}): run scripts/setup to install Debian's dbench package")
        });
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
        let lf = Loadfile::read(&path).unwrap();
        let ranges = check_iteration(&it.detail, &lf, carried, tbench_bytes);
        assert!(ranges.iter().all(|r| *r.start() > 1000), "{ranges:?}");
    }
}
