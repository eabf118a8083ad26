//! The shape of a JSON document, for snapshot tests that must catch a
//! change of schema or keys without depending on measured values: every key
//! path with the JSON types seen there, one per line, sorted. Elements of an
//! array share the path `name[]`, so the shape is the union over elements,
//! unless the caller names the array as one whose elements are told apart
//! by their `name` member (`workloads[fork]`). What is data rather than
//! schema is named by the caller too: objects whose keys are data collapse
//! to `name{*}`, keys that carry data in a known suffix to `*suffix`, and
//! opaque paths record only their own type. Values that are schema (format
//! names, versions, units, directions) are recorded with their value.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// What of a document is data, not schema, and which values are schema.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShapeRules<'a> {
    /// Objects whose keys are data: their members share one path `PATH{*}`.
    pub data_keyed: &'a [&'a str],
    /// `(object path, suffix)`: members of that object whose key ends in the
    /// suffix share one path `PATH.*SUFFIX` (e.g. one latency per operation).
    pub data_suffixes: &'a [(&'a str, &'a str)],
    /// Arrays whose elements are told apart by their string `name` member:
    /// each element gets the path `PATH[NAME]`.
    pub named_arrays: &'a [&'a str],
    /// Paths whose content is data: only their own type is recorded.
    pub opaque: &'a [&'a str],
    /// Scalars whose values are schema, recorded as `= VALUE`: a full path
    /// (`format`, `boots[].result.schema_version`), or `*.KEY` for every
    /// member named KEY (`*.unit`).
    pub pinned: &'a [&'a str],
}

/// The shape of `value` under `rules`, one `path : types` line per path.
pub fn json_shape(value: &Value, rules: &ShapeRules<'_>) -> String {
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    walk(value, String::new(), None, rules, &mut seen);
    let mut out = String::new();
    for (path, types) in seen {
        let types: Vec<String> = types.into_iter().collect();
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

fn walk(
    v: &Value,
    path: String,
    key: Option<&str>,
    rules: &ShapeRules<'_>,
    seen: &mut BTreeMap<String, BTreeSet<String>>,
) {
    let pinned = rules.pinned.iter().any(|p| match p.strip_prefix("*.") {
        Some(name) => key == Some(name),
        None => *p == path,
    }) && !matches!(v, Value::Array(_) | Value::Object(_));
    let ty = if pinned { format!("{} = {v}", type_name(v)) } else { type_name(v).to_string() };
    seen.entry(path.clone()).or_default().insert(ty);
    if rules.opaque.contains(&path.as_str()) {
        return;
    }
    match v {
        Value::Array(items) => {
            let named = rules.named_arrays.contains(&path.as_str());
            for item in items {
                let element = match item.get("name").and_then(Value::as_str) {
                    Some(name) if named => format!("{path}[{name}]"),
                    _ => format!("{path}[]"),
                };
                walk(item, element, None, rules, seen);
            }
        }
        Value::Object(map) => {
            let keyed_by_data = rules.data_keyed.contains(&path.as_str());
            for (k, member) in map {
                let suffix = rules.data_suffixes.iter().find(|(p, s)| *p == path && k.ends_with(s)).map(|(_, s)| *s);
                let child = if keyed_by_data {
                    format!("{path}{{*}}")
                } else if let Some(s) = suffix {
                    format!("{path}.*{s}")
                } else if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(member, child, Some(k), rules, seen);
            }
        }
        _ => {}
    }
}
