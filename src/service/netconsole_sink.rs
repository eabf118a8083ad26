//! The receiver's netconsole sink: UDP datagrams from lab machines'
//! candidates (the kernel's messages, sent by netconsole, which the
//! candidate's init configures from `bootbench.netconsole`), each appended
//! to the console of the job running on the machine it came from. A
//! machine is known by the address its agent's requests came from; a
//! datagram no single running job claims is dropped with a log line (a
//! lab where machines share an address behind NAT gets no netconsole
//! logs, rather than mixed ones).

use crate::service::request_context::Shared;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The largest datagram taken (netconsole sends at most about 1000 bytes).
const MAX_DATAGRAM: usize = 64 * 1024;

/// A running sink; it stops when dropped.
#[derive(Debug)]
pub(in crate::service) struct Sink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sink {
    /// Binds `addr` and receives on a thread of its own.
    pub(in crate::service) fn start(addr: SocketAddr, state: Shared) -> std::io::Result<Sink> {
        let socket = UdpSocket::bind(addr)?;
        let addr = socket.local_addr()?;
        socket.set_read_timeout(Some(Duration::from_millis(200)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("bootbench-netconsole-{}", addr.port()))
            .spawn(move || receive(&socket, &state, &flag))?;
        Ok(Sink { addr, stop, thread: Some(thread) })
    }

    /// The address it listens on.
    pub(in crate::service) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn receive(socket: &UdpSocket, state: &Shared, stop: &AtomicBool) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => {
                log::warn!("netconsole sink: {e}");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let data = buf.get(..n).unwrap_or_default();
        let ip = from.ip().to_string();
        let mut store = state.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match store.lab_job_from(&ip) {
            Ok(Some(job)) => {
                if let Err(e) = store.lab_console(job, data) {
                    log::warn!("netconsole sink: job {job}: {e}");
                }
            }
            Ok(None) => log::debug!("netconsole sink: {n} bytes from {from}, which runs no single lab job; dropped"),
            Err(e) => log::warn!("netconsole sink: {e}"),
        }
    }
}
