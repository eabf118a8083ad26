//! netconsole for a candidate (`bootbench.netconsole=IP:PORT`): before
//! the first workload, the NIC's driver (the late module list) and the
//! network come up, then netconsole.ko from the lab list with its target as
//! a module parameter, so that the kernel's messages reach a lab host even
//! when the serial console is not watched. All of it may block in the
//! kernel under test, so it runs in a child with a bound
//! ([`bounded_child`]); the child tells PID 1 what it configured through a
//! pipe. A failure is an error in the document, and the run goes on.
//! Never panics.

use crate::bounded_child;
use crate::late_steps;
use crate::module_loader;
use crate::network::{self, NetConfigured, NetRequest};
use crate::result_upload;
use loads::error_chain::error_chain;
use nix::sys::signalfd::SignalFd;
use std::ffi::CString;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

/// The bound on the whole set-up: the late modules, the network, netconsole.
pub const LIMIT: Duration =
    Duration::from_secs(late_steps::MODULES_LIMIT.as_secs() + result_upload::NETWORK_LIMIT.as_secs() + 10);

/// The network as the child configured it, for PID 1 (and the upload
/// after the run, which must keep it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    /// The interface netconsole sends on.
    pub iface: String,
    /// Its address and prefix.
    pub addr: (Ipv4Addr, u8),
    /// The default gateway, if any.
    pub gateway: Option<Ipv4Addr>,
    /// DNS servers known.
    pub dns: Vec<Ipv4Addr>,
}

impl Configured {
    /// The network as `c` describes it.
    pub fn from_net(c: &NetConfigured) -> Configured {
        Configured { iface: c.iface.clone(), addr: (c.addr, c.prefix), gateway: c.gateway, dns: c.dns.clone() }
    }

    /// What the child writes to the pipe.
    pub fn to_message(&self) -> String {
        let dns: Vec<String> = self.dns.iter().map(Ipv4Addr::to_string).collect();
        format!(
            "ok {} {}/{} {} {}",
            self.iface,
            self.addr.0,
            self.addr.1,
            self.gateway.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
            if dns.is_empty() { "-".to_string() } else { dns.join(",") }
        )
    }

    /// Reads [`Configured::to_message`]'s text back.
    pub fn from_message(text: &str) -> Option<Configured> {
        let mut w = text.split_whitespace();
        if w.next()? != "ok" {
            return None;
        }
        let iface = w.next()?.to_string();
        let (addr, prefix) = w.next()?.split_once('/')?;
        let gateway = match w.next()? {
            "-" => None,
            g => Some(g.parse().ok()?),
        };
        let dns = match w.next()? {
            "-" => Vec::new(),
            d => d.split(',').map(str::parse).collect::<Result<_, _>>().ok()?,
        };
        Some(Configured { iface, addr: (addr.parse().ok()?, prefix.parse().ok()?), gateway, dns })
    }

    /// The request that finds the network as it is: the same interface,
    /// its address kept, the same gateway and DNS servers.
    pub fn as_request(&self) -> NetRequest {
        NetRequest {
            iface: Some(self.iface.clone()),
            ip: Some(loads::suite::IpSetting::Kernel),
            gw: self.gateway,
            dns: Some(self.dns.clone()),
            qemu: false,
        }
    }
}

/// netconsole's module parameter for `target` through `iface`, the local
/// address and port left to the kernel: `netconsole=@/IFACE,PORT@IP/`.
pub fn parameter(iface: &str, target: SocketAddrV4) -> String {
    format!("netconsole=@/{iface},{}@{}/", target.port(), target.ip())
}

/// The child's work: modules, network, netconsole. Returns what to tell
/// PID 1.
fn set_up(target: SocketAddrV4, net: &NetRequest, load_modules: bool) -> Result<Configured, String> {
    if load_modules {
        let (_, errors) = module_loader::load_listed(module_loader::MODULES_LIST);
        if let Some(e) = errors.first() {
            // The NIC may be built in: the bring-up says whether it is there.
            crate::result_channels::say(&format!("netconsole: late module load: {}", error_chain(e)));
        }
    }
    let configured = network::bring_up(net).map_err(|(step, e)| format!("network: {step}: {}", error_chain(&e)))?;
    // netconsole needs configfs (NETCONSOLE_DYNAMIC), listed before it.
    let path = module_loader::load_dependencies_of(module_loader::LAB_MODULES_LIST, "netconsole")
        .map_err(|e| error_chain(&e))?
        .ok_or_else(|| {
            format!(
                "netconsole.ko is not in the image's {} (the kernel has no netconsole module)",
                module_loader::LAB_MODULES_LIST
            )
        })?;
    let param = CString::new(parameter(&configured.iface, target)).map_err(|e| e.to_string())?;
    match module_loader::load_file(&path, &param) {
        Ok(true) => Ok(Configured::from_net(&configured)),
        Ok(false) => Err("netconsole was loaded already, without this target".into()),
        Err(e) => Err(error_chain(&e)),
    }
}

/// Sets netconsole up in a bounded child. Returns the network as
/// configured, or why it failed.
pub fn start(
    sfd: Option<&SignalFd>,
    target: SocketAddrV4,
    net: &NetRequest,
    load_modules: bool,
) -> Result<Configured, String> {
    let (rx, tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
        .map_err(|e| format!("cannot make a pipe: {e}"))?;
    let end = bounded_child::run(sfd, "netconsole", LIMIT, move || {
        let message = match set_up(target, net, load_modules) {
            Ok(c) => c.to_message(),
            Err(e) => format!("error {e}"),
        };
        let mut tx = std::fs::File::from(tx);
        let _ = tx.write_all(message.as_bytes());
        0
    });
    let mut text = String::new();
    let _ = std::fs::File::from(rx).take(64 * 1024).read_to_string(&mut text);
    if !end.succeeded() {
        return Err(format!("the set-up did not end: {end}"));
    }
    match Configured::from_message(&text) {
        Some(c) => Ok(c),
        None => Err(text.strip_prefix("error ").unwrap_or(&text).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parameter_names_the_interface_port_and_address() {
        let p = parameter("enp0s3", "192.168.1.20:6666".parse().unwrap());
        assert_eq!(p, "netconsole=@/enp0s3,6666@192.168.1.20/");
    }

    #[test]
    fn what_the_child_configured_reaches_pid_1_whole() {
        let c = Configured {
            iface: "eth0".into(),
            addr: ([10, 0, 2, 15].into(), 24),
            gateway: Some([10, 0, 2, 2].into()),
            dns: vec![[10, 0, 2, 3].into(), [1, 1, 1, 1].into()],
        };
        assert_eq!(Configured::from_message(&c.to_message()), Some(c.clone()));
        let bare = Configured { gateway: None, dns: Vec::new(), ..c.clone() };
        assert_eq!(Configured::from_message(&bare.to_message()), Some(bare));
        assert_eq!(Configured::from_message("error network: no interface"), None);
        // The upload after the run keeps this network as it is.
        let r = c.as_request();
        assert_eq!(r.iface.as_deref(), Some("eth0"));
        assert_eq!(r.ip, Some(loads::suite::IpSetting::Kernel));
        assert_eq!((r.gw, r.dns), (c.gateway, Some(c.dns)));
    }

    #[test]
    fn a_failed_set_up_in_the_child_is_an_error_saying_why() {
        // No NIC here under test: the bring-up of a named, missing
        // interface fails at once, and the child says so through the pipe.
        let net = NetRequest { iface: Some("bb-none0".into()), ..Default::default() };
        let e = start(None, "10.0.2.2:6666".parse().unwrap(), &net, false).unwrap_err();
        assert!(e.starts_with("network: "), "{e}");
    }
}
