//! A LAVA job's log (and, after a NUL byte, its job definition) as
//! `bootbench lava import` reads them (`lava::log::JobLog`,
//! `lava::import::import`). Invariants: an imported boot's document is the
//! one the log's console carries, intact (the scanner accepts it, and it
//! migrates to the same document); the results file written from an
//! import reads back unchanged.
#![no_main]

use bootbench::lava::import::{import, ImportArgs, JobSource};
use bootbench::lava::log::{seconds_between, JobLog};
use bootbench::results::migration::{migrate_document, migrate_results};
use bootbench_fuzz::{bounded_alloc, split_parts};
use libfuzzer_sys::fuzz_target;
use qemu::console_scan::ConsoleScan;

fuzz_target!(|data: &[u8]| {
    let parts = split_parts(data, 2);
    let Ok(log) = std::str::from_utf8(parts[0]) else { return };
    let definition = std::str::from_utf8(parts[1]).ok().filter(|d| !d.is_empty()).map(str::to_string);
    let Ok(parsed) = bounded_alloc("LAVA log parse", data.len(), || JobLog::parse("fuzz.log", log)) else { return };
    let console = parsed.console_text();
    let _ = (parsed.results(), parsed.downloads(), parsed.job_result(), parsed.span_s());
    for pair in parsed.entries.windows(2) {
        if let (Some(a), Some(b)) = (&pair[0].dt, &pair[1].dt) {
            let _ = seconds_between(a, b);
        }
    }
    let source = JobSource {
        name: "fuzz.log".into(),
        log: log.to_string(),
        definition,
        definition_name: "fuzz.yaml".into(),
        ..JobSource::default()
    };
    let Ok(file) = bounded_alloc("LAVA import", data.len(), || import(&source, &ImportArgs::default())) else { return };
    assert_eq!(file.boots.len(), 1, "one job is one boot");
    if let Some(doc) = &file.boots[0].result {
        let mut scan = ConsoleScan::new();
        scan.feed_bytes(console.as_bytes());
        scan.finish();
        let text = scan.decoder().last_document().expect("an imported document came from an intact stream");
        let value = serde_json::from_str(&text).expect("the stream's document is JSON");
        let carried = migrate_document(value, "console").expect("the stream's document migrates");
        assert_eq!(&carried, doc, "the imported document is not the one the console carried");
    }
    let text = serde_json::to_vec_pretty(&file).expect("a results file serialises");
    let back = migrate_results(serde_json::from_slice(&text).expect("JSON"), "written").expect("reads back");
    assert_eq!(back, file, "an imported results file changed through writing and reading");
});
