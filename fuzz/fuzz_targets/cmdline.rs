//! The kernel cmdline as the init reads it (`CmdlineConfig::parse_for`),
//! with the splitting, the redaction of secrets, and the overrides applied
//! to a built-in suite. Invariants: the words re-joined with the kernel's
//! quoting split and parse to the same result (the parse round-trips
//! through its own words); a redacted cmdline keeps no secret value; an
//! accepted config applied to a suite gives one that validates and whose
//! JSON round-trips.
#![no_main]

use bootbench_fuzz::{bounded_alloc, join_cmdline_words};
use libfuzzer_sys::fuzz_target;
use loads::suite::{redact_secrets, secret_values, split_cmdline, CmdlineConfig, Suite, REDACTED};
use loads::workloads::NAMES;

fuzz_target!(|data: &[u8]| {
    let Ok(cmdline) = std::str::from_utf8(data) else { return };
    let parsed = bounded_alloc("cmdline parse", data.len(), || CmdlineConfig::parse_for(cmdline, NAMES));

    let words = split_cmdline(cmdline);
    let rejoined = join_cmdline_words(&words);
    assert_eq!(split_cmdline(&rejoined), words, "re-joined words split differently: {rejoined:?}");
    let again = CmdlineConfig::parse_for(&rejoined, NAMES);
    match (&parsed, &again) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the same words parsed differently: {rejoined:?}"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("the same words parsed {parsed:?} once and {again:?} re-joined as {rejoined:?}"),
    }

    let redacted = redact_secrets(cmdline);
    for value in secret_values(&redacted) {
        assert_eq!(value, REDACTED, "a secret survived redaction in {redacted:?}");
    }

    if let Ok(cfg) = parsed {
        let quick = Suite::builtin_for("quick", std::env::consts::ARCH).expect("the quick suite is built in");
        if let Ok(suite) = cfg.apply_for(quick, NAMES) {
            suite.validate_for(NAMES).expect("apply_for returned a suite that does not validate");
            let back = Suite::from_json_for("applied", &suite.to_json(), NAMES).expect("the applied suite's JSON");
            assert_eq!(back, suite, "the applied suite's JSON does not round-trip");
        }
    }
});
