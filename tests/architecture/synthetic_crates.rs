//! Tests of the cycle checker itself, on small crates written to a temporary
//! directory: each cycle kind it must find, and the module layouts it must
//! accept.

use std::collections::BTreeSet;

use crate::module_graph::ModuleGraph;

/// Writes `files` (path relative to the crate's src/, contents) and reads
/// the crate rooted at `lib.rs`.
fn graph_of(files: &[(&str, &str)]) -> ModuleGraph {
    let dir = tempfile::tempdir().expect("temporary directory");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a file has a directory")).expect("create directory");
        std::fs::write(&path, text).expect("write a source file");
    }
    let graph = ModuleGraph::load(&dir.path().join("lib.rs")).unwrap_or_else(|e| panic!("{e}"));
    assert!(graph.tree.missing_files.is_empty(), "{:?}", graph.tree.missing_files);
    graph
}

/// Each cycle as the sorted names of its modules.
fn cycles(graph: &ModuleGraph) -> Vec<Vec<String>> {
    let mut cycles: Vec<Vec<String>> = graph
        .cycles()
        .iter()
        .map(|c| {
            let mut names: Vec<String> = c.modules.iter().map(|&m| graph.name(m)).collect();
            names.sort();
            names
        })
        .collect();
    cycles.sort();
    cycles
}

/// The edges as `(from, to)` names.
fn edges(graph: &ModuleGraph) -> BTreeSet<(String, String)> {
    graph.edges.keys().map(|&(from, to)| (graph.name(from), graph.name(to))).collect()
}

fn pair(from: &str, to: &str) -> (String, String) {
    (from.to_string(), to.to_string())
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_use_one_way_and_a_call_back_is_a_cycle() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::X;\npub fn f() -> u8 { let _x = X; 1 }\n"),
        ("b.rs", "pub struct X;\npub fn g() -> u8 { crate::a::f() }\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::a", "crate::b"])]);
    let report = graph.describe_cycles(&graph.cycles(), std::path::Path::new("/"));
    assert!(report.contains("crate::a -> crate::b") && report.contains("a.rs:1 `crate::b::X`"), "{report}");
    assert!(report.contains("crate::b -> crate::a") && report.contains("b.rs:2 `crate::a::f`"), "{report}");
}

#[test]
fn struct_field_types_alone_make_a_cycle() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct S {\n    pub t: crate::b::T,\n}\n"),
        ("b.rs", "pub struct T;\npub struct U {\n    pub s: Option<Box<crate::a::S>>,\n}\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::a", "crate::b"])]);
}

#[test]
fn a_child_naming_super_and_a_parent_calling_the_child_is_a_cycle() {
    let graph = graph_of(&[
        ("lib.rs", "mod parent;\n"),
        ("parent/mod.rs", "mod child;\npub struct T;\npub fn run() { child::f(); }\n"),
        ("parent/child.rs", "pub fn f() -> super::T { super::T }\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::parent", "crate::parent::child"])]);
}

#[test]
fn a_parent_re_exporting_a_child_that_uses_its_types_is_a_cycle() {
    let graph = graph_of(&[
        ("lib.rs", "pub mod model;\n"),
        ("model.rs", "mod parse;\npub use parse::parse;\npub struct Doc;\n"),
        ("model/parse.rs", "use super::Doc;\npub fn parse() -> Doc { Doc }\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::model", "crate::model::parse"])]);
}

#[test]
fn paths_in_macro_arguments_make_a_cycle() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub fn f() -> String { format!(\"{}\", crate::b::g()) }\n"),
        ("b.rs", "pub fn g() -> u8 { 1 }\npub fn h() { assert!(!crate::a::f().is_empty(), \"empty\"); }\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::a", "crate::b"])]);
}

#[test]
fn paths_in_macro_tokens_that_are_not_expressions_count() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub fn f() -> Vec<u8> { vec![crate::b::g(); 3] }\n"),
        ("b.rs", "pub fn g() -> u8 { 1 }\nmacro_rules! m { () => { $crate::a::f() }; }\npub fn h() { m!(); }\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::a", "crate::b"])]);
}

#[test]
fn a_cfg_test_module_using_its_parent_is_not_a_cycle() {
    // Counted as a's own code, the test's use of b would close a cycle.
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub fn f() -> u8 { 1 }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(f(), crate::b::helper()); }\n}\n",
        ),
        ("b.rs", "pub fn helper() -> u8 { crate::a::f() }\n"),
    ]);
    assert_eq!(cycles(&graph), Vec::<Vec<String>>::new());
    assert_eq!(
        edges(&graph),
        BTreeSet::from([
            pair("crate::a::tests [cfg(test)]", "crate::a"),
            pair("crate::a::tests [cfg(test)]", "crate::b"),
            pair("crate::b", "crate::a"),
        ])
    );
}

#[test]
fn a_mod_declaration_and_a_child_naming_super_is_not_a_cycle() {
    let graph = graph_of(&[
        ("lib.rs", "mod parent;\n"),
        ("parent.rs", "mod child;\npub struct T;\n"),
        ("parent/child.rs", "pub fn f() -> super::T { super::T }\n"),
    ]);
    assert_eq!(cycles(&graph), Vec::<Vec<String>>::new());
    assert_eq!(edges(&graph), BTreeSet::from([pair("crate::parent::child", "crate::parent")]));
}

#[test]
fn a_three_module_cycle_is_found_with_all_three() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "pub fn f() { crate::b::f() }\n"),
        ("b.rs", "use crate::c;\npub fn f() { c::f() }\n"),
        ("c.rs", "pub fn f() { super::a::f(); crate::d::f() }\n"),
        ("d.rs", "pub fn f() {}\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::a", "crate::b", "crate::c"])]);
}

#[test]
fn group_uses_count_each_leaf() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::{b::X, c::Y as Z};\npub fn g() {}\n"),
        ("b.rs", "pub struct X;\npub fn f() { crate::a::g() }\n"),
        ("c.rs", "pub struct Y;\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::a", "crate::b"])]);
    assert!(edges(&graph).contains(&pair("crate::a", "crate::c")));
}

#[test]
fn glob_imports_resolve_names_as_the_glob_module_sees_them() {
    let graph = graph_of(&[
        ("lib.rs", "mod m;\nmod model;\n"),
        ("m/mod.rs", "use crate::model::Thing;\nmod child;\n"),
        ("m/child.rs", "use super::*;\npub fn f() -> Thing { Thing }\npub fn g() -> String { String::new() }\n"),
        ("model.rs", "pub struct Thing;\n"),
    ]);
    let edges = edges(&graph);
    assert!(edges.contains(&pair("crate::m::child", "crate::m")), "{edges:?}");
    assert!(edges.contains(&pair("crate::m::child", "crate::model")), "{edges:?}");
}

#[test]
fn inline_modules_and_path_attributes_are_followed() {
    let graph = graph_of(&[
        ("lib.rs", "#[path = \"elsewhere/other.rs\"]\nmod a;\nmod b;\n"),
        ("elsewhere/other.rs", "pub mod inner {\n    pub fn f() { crate::b::g() }\n}\n"),
        ("b.rs", "pub fn g() {}\npub fn h() { crate::a::inner::f() }\n"),
    ]);
    assert_eq!(cycles(&graph), vec![names(&["crate::a::inner", "crate::b"])]);
}

#[test]
fn locals_named_like_modules_and_other_crates_are_not_edges() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\npub fn top(a: u8) -> u8 { a }\n"),
        (
            "a.rs",
            "use std::collections::HashMap;\npub fn f(b: u8) -> u8 { let _m: HashMap<u8, u8> = HashMap::new(); b }\n",
        ),
        ("b.rs", "pub(crate) fn g() -> u8 { crate::a::f(1) }\n"),
    ]);
    assert_eq!(edges(&graph), BTreeSet::from([pair("crate::b", "crate::a")]));
}
