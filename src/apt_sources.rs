//! apt's one-line sources format (`deb [options] URI SUITE COMPONENTS...`),
//! read by the kernel fetcher (its private apt configuration's base suite)
//! and the pack builder (the machine's mirror). Pure text; no I/O.

/// One `deb` source: a URI serving a suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebSource {
    /// The archive URI.
    pub uri: String,
    /// The suite.
    pub suite: String,
}

/// The `deb` sources of one-line sources.list text (`deb [options] URI
/// SUITE COMPONENTS...`).
pub fn parse_one_line(text: &str) -> Vec<DebSource> {
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            if words.next()? != "deb" {
                return None;
            }
            let mut uri = words.next()?;
            if uri.starts_with('[') {
                while !uri.ends_with(']') {
                    uri = words.next()?;
                }
                uri = words.next()?;
            }
            Some(DebSource { uri: uri.to_string(), suite: words.next()?.to_string() })
        })
        .collect()
}
