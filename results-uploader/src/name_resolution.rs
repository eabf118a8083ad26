//! Turning the upload URL's host into addresses. On a host the system
//! resolver (getaddrinfo, through reqwest) does it. The guest's static
//! glibc has no NSS and no resolv.conf, so there a host name is resolved by
//! hickory's pure-Rust stub resolver against the DNS servers the guest was
//! given (cmdline or DHCP), IPv4 only because the guest configures IPv4
//! only. An IP literal needs no resolution anywhere.

#[cfg(feature = "dns")]
use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolverConfig, ResolverOpts};
#[cfg(feature = "dns")]
use hickory_resolver::net::runtime::TokioRuntimeProvider;
#[cfg(feature = "dns")]
use hickory_resolver::Resolver;
use reqwest::Url;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How host names in upload URLs are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The operating system's resolver (a host with a dynamic libc).
    System,
    /// These DNS servers, queried by the built-in stub resolver (the
    /// guest). An empty list refuses host names with a clear error.
    Servers(Vec<IpAddr>),
}

/// Errors while resolving the upload host.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A host name, but no DNS server to ask.
    #[error("upload host '{host}' is a name and no DNS server is known: give bootbench.dns=ADDR (or use DHCP, or an IP address in the URL)")]
    NoServers {
        /// The host name.
        host: String,
    },
    /// This build has no resolver (the `dns` feature is off).
    #[error("upload host '{host}' is a name, and this build has no DNS resolver (feature 'dns'): use an IP address in the URL")]
    NoResolver {
        /// The host name.
        host: String,
    },
    /// The stub resolver could not be set up.
    #[error("cannot set up the DNS resolver")]
    Setup(#[source] std::io::Error),
    /// The lookup failed or found nothing.
    #[error("cannot resolve upload host '{host}' via DNS servers {servers:?}")]
    Lookup {
        /// The host name.
        host: String,
        /// Servers asked.
        servers: Vec<IpAddr>,
        /// Resolver error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The lookup answered, but with no IPv4 address.
    #[error("upload host '{host}' has no IPv4 address (DNS servers {servers:?})")]
    NoAddress {
        /// The host name.
        host: String,
        /// Servers asked.
        servers: Vec<IpAddr>,
    },
}

/// The host name of `url` when it needs resolving by us: `None` for IP
/// literals and for [`Resolution::System`].
pub fn name_to_resolve<'u>(url: &'u Url, resolution: &Resolution) -> Option<&'u str> {
    match resolution {
        Resolution::Servers(_) => url.domain(),
        Resolution::System => None,
    }
}

/// Resolves `host` with `servers` (UDP, then TCP for truncated answers,
/// on port 53), `timeout` per query. The port of every returned address is
/// `port`.
pub fn resolve(host: &str, port: u16, servers: &[IpAddr], timeout: Duration) -> Result<Vec<SocketAddr>, ResolveError> {
    let servers: Vec<SocketAddr> = servers.iter().map(|ip| SocketAddr::new(*ip, 53)).collect();
    resolve_with(host, port, &servers, timeout)
}

/// Without the `dns` feature: every name is refused, clearly.
#[cfg(not(feature = "dns"))]
fn resolve_with(
    host: &str,
    _port: u16,
    servers: &[SocketAddr],
    _timeout: Duration,
) -> Result<Vec<SocketAddr>, ResolveError> {
    if servers.is_empty() {
        return Err(ResolveError::NoServers { host: host.to_string() });
    }
    Err(ResolveError::NoResolver { host: host.to_string() })
}

/// [`resolve`] with explicit server ports (tests run a server on a free port).
#[cfg(feature = "dns")]
fn resolve_with(
    host: &str,
    port: u16,
    servers: &[SocketAddr],
    timeout: Duration,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let ips: Vec<IpAddr> = servers.iter().map(SocketAddr::ip).collect();
    if servers.is_empty() {
        return Err(ResolveError::NoServers { host: host.to_string() });
    }
    let name_servers = servers
        .iter()
        .map(|s| {
            let mut ns = NameServerConfig::udp_and_tcp(s.ip());
            for c in &mut ns.connections {
                c.port = s.port();
            }
            ns
        })
        .collect();
    let config = ResolverConfig::from_name_servers(name_servers);
    let mut opts = ResolverOpts::default();
    opts.timeout = timeout;
    opts.attempts = 2;
    opts.ip_strategy = LookupIpStrategy::Ipv4Only;
    // No /etc/hosts in the guest, and none wanted: only the servers given.
    opts.use_hosts_file = hickory_resolver::config::ResolveHosts::Never;
    let lookup_err = |source: Box<dyn std::error::Error + Send + Sync>| ResolveError::Lookup {
        host: host.to_string(),
        servers: ips.clone(),
        source,
    };
    // hickory is async; a current-thread runtime keeps it on this thread.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ResolveError::Setup)?;
    let resolver = Resolver::builder_with_config(config, TokioRuntimeProvider::default())
        .with_options(opts)
        .build()
        .map_err(|e| lookup_err(Box::new(e)))?;
    // A trailing dot: the name is absolute, no search domains are tried.
    let fqdn = if host.ends_with('.') { host.to_string() } else { format!("{host}.") };
    let found = runtime.block_on(resolver.lookup_ip(fqdn.as_str())).map_err(|e| lookup_err(Box::new(e)))?;
    let addrs: Vec<SocketAddr> = found.iter().filter(IpAddr::is_ipv4).map(|ip| SocketAddr::new(ip, port)).collect();
    if addrs.is_empty() {
        return Err(ResolveError::NoAddress { host: host.to_string(), servers: ips });
    }
    Ok(addrs)
}

#[cfg(all(test, feature = "dns"))]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use hickory_resolver::proto::op::{Message, OpCode, ResponseCode};
    use hickory_resolver::proto::rr::rdata::A;
    use hickory_resolver::proto::rr::{RData, Record, RecordType};
    use std::net::{Ipv4Addr, UdpSocket};

    /// A DNS server on 127.0.0.1 that answers A queries for `name` with
    /// `addr`, NXDOMAIN for everything else, and counts queries.
    fn dns_server(name: &'static str, addr: Ipv4Addr) -> SocketAddr {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = sock.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                let Ok(q) = Message::from_vec(&buf[..n]) else { continue };
                let mut resp = Message::response(q.metadata.id, OpCode::Query);
                resp.metadata.recursion_desired = q.metadata.recursion_desired;
                resp.metadata.recursion_available = true;
                resp.add_queries(q.queries.clone());
                match q.queries.first() {
                    Some(query) if query.name().to_ascii() == name && query.query_type() == RecordType::A => {
                        resp.add_answer(Record::from_rdata(query.name().clone(), 60, RData::A(A(addr))));
                    }
                    Some(query) if query.name().to_ascii() == name => {}
                    _ => resp.metadata.response_code = ResponseCode::NXDomain,
                }
                let _ = sock.send_to(&resp.to_vec().unwrap(), from);
            }
        });
        at
    }

    #[test]
    fn resolves_a_name_through_the_given_server() {
        let server = dns_server("results.lab.", Ipv4Addr::new(192, 0, 2, 7));
        let addrs = resolve_with("results.lab", 8080, &[server], Duration::from_secs(2)).unwrap();
        assert_eq!(addrs, vec![SocketAddr::from(([192, 0, 2, 7], 8080))]);
    }

    #[test]
    fn unknown_names_and_missing_servers_are_clear_errors() {
        let server = dns_server("results.lab.", Ipv4Addr::new(192, 0, 2, 7));
        let e = resolve_with("nosuch.lab", 80, &[server], Duration::from_secs(2)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("nosuch.lab") && text.contains("127.0.0.1"), "{text}");
        let e = resolve("results.lab", 80, &[], Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, ResolveError::NoServers { .. }), "{e}");
    }

    #[test]
    fn ip_literals_and_system_mode_need_no_resolution() {
        let url = Url::parse("http://10.0.2.2:8080/").unwrap();
        assert_eq!(name_to_resolve(&url, &Resolution::Servers(vec![])), None);
        let url = Url::parse("http://results.lab/").unwrap();
        assert_eq!(name_to_resolve(&url, &Resolution::Servers(vec![])), Some("results.lab"));
        assert_eq!(name_to_resolve(&url, &Resolution::System), None);
    }
}
