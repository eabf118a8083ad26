//! An upload as the receiver sees it, without a socket: the
//! `Authorization` header (`service::receiver::parse_authorization`), the
//! run id of `PUT /runs/{id}`, and the body (`service::store::validate`).
//! The input is the header's value, the id and the body, separated by NUL
//! bytes. Invariants: a credential re-encoded as Bearer and as HTTP Basic
//! reads back the same token; an accepted body keeps its bytes, carries the
//! URL's run id, is hashed as `canonical_sha256` hashes it (the same for
//! any formatting of the same JSON), and reads back through the results
//! migration as what it was accepted as.
#![no_main]

use bootbench::results::migration::{migrate_document, migrate_results};
use bootbench::service::receiver::parse_authorization;
use bootbench::service::store::{canonical_sha256, validate, RunKind};
use bootbench_fuzz::{bounded_alloc, split_parts};
use libfuzzer_sys::fuzz_target;

fn check_authorization(value: &[u8]) {
    let Some(given) = parse_authorization(value) else { return };
    let bearer = format!("Bearer {}", given.token);
    if !given.token.is_empty() && given.token.trim() == given.token {
        let again = parse_authorization(bearer.as_bytes()).expect("a Bearer header parses");
        assert_eq!(again.token, given.token, "the token changed through a Bearer header");
        assert!(!again.basic);
    }
    use base64::Engine as _;
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("user:{}", given.token)));
    let again = parse_authorization(basic.as_bytes()).expect("an HTTP Basic header parses");
    assert_eq!(again.token, given.token, "the token changed through HTTP Basic");
    assert!(again.basic);
}

fuzz_target!(|data: &[u8]| {
    let parts = split_parts(data, 3);
    check_authorization(parts[0]);
    let Ok(url_id) = std::str::from_utf8(parts[1]) else { return };
    let body = parts[2].to_vec();
    let Ok(run) = bounded_alloc("upload validation", body.len(), || validate(body.clone(), url_id)) else { return };
    assert_eq!(run.run_id, url_id, "accepted a body for another run than the URL names");
    assert_eq!(run.body, body, "the body changed on the way to the store");
    assert_eq!(Some(&run.sha256), canonical_sha256(&body).as_ref(), "the stored sha256 is not the body's");
    let value: serde_json::Value = serde_json::from_slice(&body).expect("an accepted body is JSON");
    let pretty = serde_json::to_vec_pretty(&value).expect("JSON re-serialises");
    assert_eq!(
        canonical_sha256(&pretty).as_ref(),
        Some(&run.sha256),
        "the same JSON, formatted otherwise, hashes otherwise"
    );
    match run.kind {
        RunKind::Document => {
            let doc = migrate_document(value, "stored").expect("a stored document reads back");
            assert_eq!(doc.run_id, run.run_id);
        }
        RunKind::Envelope => {
            let file = migrate_results(value, "stored").expect("a stored envelope reads back");
            assert_eq!(file.boots.len(), 1, "a stored envelope holds one boot");
        }
    }
    let again = validate(body, url_id).expect("validation is deterministic");
    assert_eq!(again.sha256, run.sha256);
});
