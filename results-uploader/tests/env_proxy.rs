//! A proxy from the environment is never used for a receiver on loopback.
//! Alone in its test binary: it sets the proxy variables for the whole
//! process, which no other test may see while it builds its clients.

use results_uploader::{acknowledgement, upload, UploadRequest, UploadSettings, Verdict};
use std::io::{Read, Write};
use std::net::TcpListener;

const BODY: &[u8] = br#"{"schema_version":1,"run_id":"run-1"}"#;

/// A receiver on 127.0.0.1 that reads one request and acknowledges it.
fn one_shot_receiver() -> (String, std::thread::JoinHandle<bool>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let served = std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return false };
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        // The request ends with the body, which ends the JSON.
        while !got.ends_with(BODY) {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        let ack = serde_json::Value::Object(acknowledgement("run-1", BODY)).to_string();
        let reply = format!("HTTP/1.1 201 Created\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{ack}", ack.len());
        s.write_all(reply.as_bytes()).is_ok()
    });
    (url, served)
}

#[test]
fn a_proxy_from_the_environment_is_not_used_for_a_receiver_on_loopback() {
    // A proxy that refuses every connection: an upload through it could
    // not arrive (and one on loopback would be the proxy's own).
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        std::env::set_var(var, &proxy);
    }
    std::env::remove_var("no_proxy");
    std::env::remove_var("NO_PROXY");
    let mut settings = UploadSettings::host();
    settings.policy.max_attempts = 1;
    for host in ["127.0.0.1", "localhost"] {
        let (url, served) = one_shot_receiver();
        let url = url.replace("127.0.0.1", host);
        let o = upload(&UploadRequest { base_url: &url, token: "s3cret", run_id: "run-1", body: BODY }, &settings);
        assert_eq!(o.verdict, Verdict::Stored, "{host}: {o:?}");
        assert!(served.join().unwrap(), "{host}: the receiver itself answered");
    }
}
