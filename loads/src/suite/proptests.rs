//! Property tests of the cmdline keys and suite files: the invariants the
//! `cmdline` and `suite_json` fuzz targets (`fuzz/`) assert, checked on
//! every `cargo test`. A parse round-trips through the words it read, a
//! redacted cmdline keeps no secret, and a suite's canonical JSON reads
//! back as the same suite with the same sha256.

use super::*;
use crate::workloads::NAMES;
use proptest::prelude::*;

/// Keys with values that exercise every branch of the parser, quotes and
/// whitespace included, beside words of any printable text.
fn word() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "suite",
        "iterations",
        "warmup",
        "workloads",
        "seed",
        "watchdog",
        "accel",
        "modules",
        "port",
        "upload",
        "token",
        "ip",
        "gw",
        "dns",
        "iface",
        "scratch",
        "swap",
        "zram",
        "alive",
        "lava",
        "test_fault",
        "fork.count",
        "dbench.clients",
        "lab.api_token",
        "x.password",
    ]);
    prop_oneof![
        (key, "[a-z0-9./:\" \t,=_-]{0,14}").prop_map(|(k, v)| format!("bootbench.{k}={v}")),
        "[ -~\t]{0,16}",
        Just("bootbench.token=\"s3 cret\"".to_string()),
    ]
}

fn cmdline() -> impl Strategy<Value = String> {
    prop::collection::vec((word(), prop::sample::select(vec![" ", "\t", "  ", "\""])), 0..8)
        .prop_map(|ws| ws.into_iter().map(|(w, sep)| w + sep).collect())
}

/// The words joined with the kernel's quoting, so that they split back
/// unchanged.
fn join(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| if w.is_empty() || w.chars().any(char::is_whitespace) { format!("\"{w}\"") } else { w.clone() })
        .collect();
    quoted.join(" ")
}

fn param_value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        any::<i64>().prop_map(serde_json::Value::from),
        any::<bool>().prop_map(serde_json::Value::from),
        "[ -~]{0,8}".prop_map(serde_json::Value::from),
        prop::num::f64::NORMAL.prop_map(serde_json::Value::from),
    ]
}

fn suite() -> impl Strategy<Value = Suite> {
    let spec = (
        prop::sample::select(NAMES.to_vec()),
        prop::option::of(1u32..=100_000),
        prop::option::of(0u32..=10_000),
        prop::collection::btree_map("[a-z_]{1,8}", param_value(), 0..3),
    )
        .prop_map(|(name, iterations, warmup, params)| WorkloadSpec {
            name: name.to_string(),
            iterations,
            warmup,
            params: params.into_iter().collect(),
        });
    (
        "[ -~]{0,12}",
        any::<u64>(),
        1u32..=100_000,
        0u32..=10_000,
        1u64..=7 * 24 * 3600,
        prop::collection::vec(spec, 1..4),
    )
        .prop_map(|(name, seed, iterations, warmup, watchdog_s, workloads)| Suite {
            name,
            seed,
            iterations,
            warmup,
            watchdog_s,
            workloads,
        })
}

proptest! {
    #[test]
    fn a_cmdline_parses_the_same_from_its_own_words(c in cmdline()) {
        let words = split_cmdline(&c);
        let rejoined = join(&words);
        prop_assert_eq!(&split_cmdline(&rejoined), &words);
        match (CmdlineConfig::parse_for(&c, NAMES), CmdlineConfig::parse_for(&rejoined, NAMES)) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "{c:?} parsed {a:?}, its words {rejoined:?} {b:?}"),
        }
    }

    #[test]
    fn a_redacted_cmdline_keeps_no_secret(c in cmdline()) {
        let redacted = redact_secrets(&c);
        for value in secret_values(&redacted) {
            prop_assert_eq!(value, REDACTED, "in {:?} from {:?}", redacted, c);
        }
    }

    #[test]
    fn an_accepted_cmdline_applies_to_a_suite_that_validates(c in cmdline()) {
        if let Ok(cfg) = CmdlineConfig::parse_for(&c, NAMES) {
            if let Ok(s) = cfg.apply_for(Suite::builtin("quick").unwrap(), NAMES) {
                s.validate_for(NAMES).unwrap();
                prop_assert_eq!(Suite::from_json_for("applied", &s.to_json(), NAMES).unwrap(), s);
            }
        }
    }

    #[test]
    fn a_suite_reads_back_from_its_canonical_json(s in suite()) {
        let json = s.to_json();
        let back = Suite::from_json_for("s.json", &json, NAMES).unwrap();
        prop_assert_eq!(back.sha256(), s.sha256());
        prop_assert_eq!(back, s);
    }
}
