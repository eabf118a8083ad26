//! A results file or a guest document written by another bootbench
//! version, read through the schema migration
//! (`results::migration::migrate_results`, `migrate_document`), as
//! `compare`, `report`, `upload` and the results store read them.
//! Invariants: what is accepted is written back (pretty JSON, as
//! `ResultsFile::write` writes it) and read again unchanged, and a
//! migrated document reads back as itself.
#![no_main]

use bootbench::results::migration::{migrate_document, migrate_results};
use bootbench::results::ResultsFile;
use bootbench_fuzz::bounded_alloc;
use libfuzzer_sys::fuzz_target;

fn check_file(file: &ResultsFile) {
    let text = serde_json::to_vec_pretty(file).expect("a results file serialises");
    let value = serde_json::from_slice(&text).expect("a written results file is JSON");
    let back = migrate_results(value, "written").expect("a written results file reads back");
    assert_eq!(&back, file, "a results file changed through writing and reading");
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    if value.get("format").is_some() {
        if let Ok(file) = bounded_alloc("results migration", data.len(), || migrate_results(value, "fuzz")) {
            check_file(&file);
        }
    } else if let Ok(doc) = bounded_alloc("document migration", data.len(), || migrate_document(value, "fuzz")) {
        let text = serde_json::to_vec(&doc).expect("a document serialises");
        let value = serde_json::from_slice(&text).expect("a written document is JSON");
        let back = migrate_document(value, "written").expect("a written document reads back");
        assert_eq!(back, doc, "a document changed through writing and reading");
    }
});
