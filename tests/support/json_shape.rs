//! The shape of a JSON document, for snapshot tests that must catch a
//! change of schema or keys without depending on measured values: every key
//! path with the JSON types seen there, one per line, sorted. Elements of an
//! array share the path `name[]`, so the shape is the union over elements.
//! Objects whose keys are data, not schema (e.g. /proc/vmstat's entries, one
//! per counter that changed), are named by the caller and collapse to
//! `name{*}`.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The shape of `value`, one `path: types` line per key path. A path in
/// `data_keyed` (written as in the output, e.g. `boots[].result.system{*}` is
/// named `boots[].result.system`) has data for keys: its members share one
/// path `PATH{*}`.
pub fn json_shape(value: &Value, data_keyed: &[&str]) -> String {
    let mut seen: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    walk(value, String::new(), data_keyed, &mut seen);
    let mut out = String::new();
    for (path, types) in seen {
        let types: Vec<&str> = types.into_iter().collect();
        out.push_str(&format!("{} : {}\n", if path.is_empty() { "." } else { &path }, types.join("|")));
    }
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn walk(v: &Value, path: String, data_keyed: &[&str], seen: &mut BTreeMap<String, BTreeSet<&'static str>>) {
    seen.entry(path.clone()).or_default().insert(type_name(v));
    match v {
        Value::Array(items) => {
            for item in items {
                walk(item, format!("{path}[]"), data_keyed, seen);
            }
        }
        Value::Object(map) => {
            let keyed_by_data = data_keyed.contains(&path.as_str());
            for (k, member) in map {
                let child = if keyed_by_data {
                    format!("{path}{{*}}")
                } else if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(member, child, data_keyed, seen);
            }
        }
        _ => {}
    }
}
