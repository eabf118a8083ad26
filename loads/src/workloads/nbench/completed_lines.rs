//! Test support: an independent account of the bytes a client counted.
//! A client replays the loadfile from its first line, pass after pass,
//! and (without a warmup) counts every line it completes until the timed
//! phase ends; so its bytes are those of a prefix of the lines it carries
//! out, and the lengths of the clients' prefixes add up to the operations
//! counted. A count that adds, drops or doubles bytes fits no such
//! prefixes.

use super::loadfile::{Loadfile, Op};
use std::ops::RangeInclusive;

/// The lengths of the prefixes (lines carried out, counted across passes)
/// whose bytes add up to `bytes`, or `None` when none does. `carried`
/// says which lines the replayer carries out (Sleep never is), `counted`
/// what each adds.
pub fn prefixes_with_bytes(
    lf: &Loadfile,
    carried: impl Fn(&Op) -> bool,
    counted: impl Fn(&Op) -> u64,
    bytes: u64,
) -> Option<RangeInclusive<u64>> {
    let per_line: Vec<u64> = lf
        .lines
        .iter()
        .filter(|l| !matches!(l.op, Op::Sleep { .. }) && carried(&l.op))
        .map(|l| counted(&l.op))
        .collect();
    let n = per_line.len();
    if per_line.iter().all(|&b| b == 0) {
        // Any number of lines moves nothing.
        return (bytes == 0).then_some(0..=u64::MAX);
    }
    let at = |k: u64| per_line.get((k % n as u64) as usize).copied().unwrap_or(0);
    let (mut k, mut sum) = (0u64, 0u64);
    while sum < bytes {
        sum += at(k);
        k += 1;
    }
    if sum != bytes {
        return None;
    }
    let lo = k;
    while at(k) == 0 {
        k += 1;
    }
    Some(lo..=k)
}

/// Checks an iteration's detail against the loadfile: each client's bytes
/// (from its throughput) are a prefix's, and the prefixes' lengths can
/// add up to the operations counted. Returns the clients' ranges.
pub fn check_iteration(
    detail: &serde_json::Map<String, serde_json::Value>,
    lf: &Loadfile,
    carried: impl Fn(&Op) -> bool,
    counted: impl Fn(&Op) -> u64,
) -> Vec<RangeInclusive<u64>> {
    let secs = detail["measured_s"].as_f64().unwrap();
    let operations = detail["operations"].as_u64().unwrap();
    let per_client: Vec<u64> = detail["client_throughput_mb_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v.as_f64().unwrap() * 1e6 * secs).round() as u64)
        .collect();
    assert_eq!(per_client.iter().sum::<u64>(), detail["bytes"].as_u64().unwrap(), "{detail:?}");
    let ranges: Vec<RangeInclusive<u64>> = per_client
        .iter()
        .map(|&b| {
            prefixes_with_bytes(lf, &carried, &counted, b)
                .unwrap_or_else(|| panic!("{b} bytes are no prefix's of {}: {detail:?}", lf.name))
        })
        .collect();
    let lo: u64 = ranges.iter().map(|r| r.start()).sum();
    let hi: u64 = ranges.iter().map(|r| r.end()).sum();
    assert!(
        (lo..=hi).contains(&operations),
        "{operations} operations counted, but the clients' bytes need {lo}..={hi} lines: {ranges:?}"
    );
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_found_across_passes_and_misfits_are_not() {
        let lf = Loadfile::parse(
            "t",
            b"Close 1 NT_STATUS_OK\nReadX 1 0 10 10 NT_STATUS_OK\nSleep 5 NT_STATUS_OK\nWriteX 1 0 3 3 NT_STATUS_OK\nFlush 1 NT_STATUS_OK\n",
        )
        .unwrap();
        let p = |b| prefixes_with_bytes(&lf, |_| true, Op::payload_bytes, b);
        assert_eq!(p(0), Some(0..=1));
        assert_eq!(p(10), Some(2..=2));
        assert_eq!(p(13), Some(3..=5), "Flush, then the next pass's Close");
        assert_eq!(p(26), Some(7..=9));
        assert_eq!(p(11), None);
        assert_eq!(prefixes_with_bytes(&lf, |op| !matches!(op, Op::Close { .. }), Op::payload_bytes, 13), Some(2..=3));
    }
}
