//! A suite file's JSON (`Suite::from_json_for`), as `bootbench run --suite
//! FILE` and the init read it. Invariants: an accepted suite validates,
//! its canonical JSON parses back to the same suite with the same sha256
//! (the hash the results record), and the guest's cmdline overrides apply
//! to it without a panic.
#![no_main]

use bootbench_fuzz::bounded_alloc;
use libfuzzer_sys::fuzz_target;
use loads::suite::{CmdlineConfig, Suite};
use loads::workloads::NAMES;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = std::str::from_utf8(data) else { return };
    let Ok(suite) = bounded_alloc("suite parse", data.len(), || Suite::from_json_for("fuzz", json, NAMES)) else {
        return;
    };
    suite.validate_for(NAMES).expect("an accepted suite validates");
    let canonical = suite.to_json();
    let back = Suite::from_json_for("fuzz", &canonical, NAMES).expect("a suite's canonical JSON parses");
    assert_eq!(back, suite, "the suite's canonical JSON does not round-trip: {canonical}");
    assert_eq!(back.sha256(), suite.sha256(), "the suite's sha256 changed through its JSON");
    assert_eq!(back.to_json(), canonical, "the canonical JSON is not a fixed point");
    for spec in &suite.workloads {
        let _ = (suite.iterations_for(spec), suite.warmup_for(spec));
    }
    let cfg = CmdlineConfig::parse_for("bootbench.iterations=2 bootbench.warmup=0", NAMES).expect("a fixed cmdline");
    let _ = cfg.apply_for(suite, NAMES);
});
