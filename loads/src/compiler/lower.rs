//! Semantic checks and lowering from the syntax tree to IR: a symbol table
//! of functions and globals, block-scoped locals, arity checks, and
//! short-circuit operators turned into control flow. `static inline`
//! functions are lowered only when something calls them, as a C compiler
//! emits them. Owns name resolution; must not optimise.

use super::ir::{Block, BlockId, Function, Inst, Op, Terminator, UnaryOp, Vreg};
use super::parser::{self, BinOp, Expr, Stmt, UnOp, Unit};
use std::collections::{BTreeSet, HashMap};

/// A semantic error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("file #{file} line {line}: {what}")]
pub struct SemaError {
    /// File index.
    pub file: u16,
    /// Line.
    pub line: u32,
    /// What is wrong, naming the symbol.
    pub what: String,
}

#[derive(Debug, Clone)]
enum Symbol {
    Function { arity: usize, defined: bool, is_static: bool },
    Global { defined: bool },
}

/// A global variable defined by the unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDef {
    /// Symbol name.
    pub name: String,
    /// Initial value.
    pub init: i64,
    /// Visible to the linker.
    pub exported: bool,
}

/// A lowered unit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lowered {
    /// Functions to emit, in source order.
    pub functions: Vec<Function>,
    /// Globals to emit.
    pub data: Vec<DataDef>,
}

struct FnBuilder<'a> {
    symbols: &'a HashMap<String, Symbol>,
    file: u16,
    scopes: Vec<HashMap<String, Vreg>>,
    blocks: Vec<Block>,
    cur: BlockId,
    next_vreg: Vreg,
    called: &'a mut BTreeSet<String>,
}

impl<'a> FnBuilder<'a> {
    fn err(&self, line: u32, what: String) -> SemaError {
        SemaError { file: self.file, line, what }
    }
    fn vreg(&mut self) -> Vreg {
        let v = self.next_vreg;
        self.next_vreg += 1;
        v
    }
    fn new_block(&mut self) -> BlockId {
        self.blocks.push(Block { insts: Vec::new(), term: Terminator::Return(0) });
        self.blocks.len() - 1
    }
    fn emit(&mut self, i: Inst) {
        if let Some(b) = self.blocks.get_mut(self.cur) {
            b.insts.push(i);
        }
    }
    fn terminate(&mut self, t: Terminator) {
        if let Some(b) = self.blocks.get_mut(self.cur) {
            b.term = t;
        }
    }
    fn lookup(&self, name: &str) -> Option<Vreg> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }
    fn constant(&mut self, value: i64) -> Vreg {
        let dst = self.vreg();
        self.emit(Inst::Const { dst, value });
        dst
    }

    fn expr(&mut self, e: &Expr) -> Result<Vreg, SemaError> {
        Ok(match e {
            Expr::Num(n) => self.constant(*n),
            Expr::Var(name, line) => {
                if let Some(v) = self.lookup(name) {
                    v
                } else {
                    match self.symbols.get(name) {
                        Some(Symbol::Global { .. }) => {
                            let dst = self.vreg();
                            self.emit(Inst::Load { dst, global: name.clone() });
                            dst
                        }
                        Some(Symbol::Function { .. }) => {
                            return Err(self.err(*line, format!("function '{name}' used as a value")))
                        }
                        None => return Err(self.err(*line, format!("'{name}' undeclared"))),
                    }
                }
            }
            Expr::Call(name, args, line) => {
                if self.lookup(name).is_some() {
                    return Err(self.err(*line, format!("'{name}' is a variable, not a function")));
                }
                match self.symbols.get(name) {
                    Some(Symbol::Function { arity, .. }) if *arity == args.len() => {}
                    Some(Symbol::Function { arity, .. }) => {
                        return Err(
                            self.err(*line, format!("'{name}' takes {arity} arguments, called with {}", args.len()))
                        )
                    }
                    Some(Symbol::Global { .. }) => {
                        return Err(self.err(*line, format!("'{name}' is a variable, not a function")))
                    }
                    None => return Err(self.err(*line, format!("implicit declaration of function '{name}'"))),
                }
                let mut vs = Vec::with_capacity(args.len());
                for a in args {
                    vs.push(self.expr(a)?);
                }
                self.called.insert(name.clone());
                let dst = self.vreg();
                self.emit(Inst::Call { dst, callee: name.clone(), args: vs });
                dst
            }
            Expr::Unary(op, a) => {
                let a = self.expr(a)?;
                let dst = self.vreg();
                let op = match op {
                    UnOp::Neg => UnaryOp::Neg,
                    UnOp::Not => UnaryOp::Not,
                    UnOp::BitNot => UnaryOp::BitNot,
                };
                self.emit(Inst::Unary { op, dst, a });
                dst
            }
            Expr::Binary(op @ (BinOp::LogAnd | BinOp::LogOr), a, b) => {
                // dst = a ? (b != 0) : 0   for &&,   a ? 1 : (b != 0)   for ||
                let dst = self.vreg();
                let av = self.expr(a)?;
                let rhs = self.new_block();
                let short = self.new_block();
                let join = self.new_block();
                let (then, els) = if *op == BinOp::LogAnd { (rhs, short) } else { (short, rhs) };
                self.terminate(Terminator::Branch { cond: av, then, els });
                self.cur = short;
                let v = self.constant((*op == BinOp::LogOr) as i64);
                self.emit(Inst::Copy { dst, src: v });
                self.terminate(Terminator::Jump(join));
                self.cur = rhs;
                let bv = self.expr(b)?;
                let zero = self.constant(0);
                self.emit(Inst::Bin { op: Op::Ne, dst, a: bv, b: zero });
                self.terminate(Terminator::Jump(join));
                self.cur = join;
                dst
            }
            Expr::Binary(op, a, b) => {
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                let dst = self.vreg();
                let op = Op::from_binop(*op).unwrap_or(Op::Add);
                self.emit(Inst::Bin { op, dst, a, b });
                dst
            }
        })
    }

    fn assign(&mut self, name: &str, e: &Expr, line: u32) -> Result<(), SemaError> {
        let v = self.expr(e)?;
        if let Some(dst) = self.lookup(name) {
            self.emit(Inst::Copy { dst, src: v });
            return Ok(());
        }
        match self.symbols.get(name) {
            Some(Symbol::Global { .. }) => {
                self.emit(Inst::Store { global: name.to_string(), src: v });
                Ok(())
            }
            Some(Symbol::Function { .. }) => Err(self.err(line, format!("cannot assign to function '{name}'"))),
            None => Err(self.err(line, format!("'{name}' undeclared"))),
        }
    }

    fn stmts(&mut self, body: &[Stmt]) -> Result<(), SemaError> {
        self.scopes.push(HashMap::new());
        for s in body {
            self.stmt(s)?;
        }
        self.scopes.pop();
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), SemaError> {
        match s {
            Stmt::Decl(name, e, line) => {
                let v = self.expr(e)?;
                let dst = self.vreg();
                self.emit(Inst::Copy { dst, src: v });
                let dup = self.scopes.last_mut().and_then(|s| s.insert(name.clone(), dst)).is_some();
                if dup {
                    return Err(self.err(*line, format!("redeclaration of '{name}'")));
                }
            }
            Stmt::Assign(name, e, line) => self.assign(name, e, *line)?,
            Stmt::Expr(e) => {
                self.expr(e)?;
            }
            Stmt::Return(e) => {
                let v = self.expr(e)?;
                self.terminate(Terminator::Return(v));
                // Code after a return is unreachable; it still gets checked.
                self.cur = self.new_block();
            }
            Stmt::If(c, then, els) => {
                let cv = self.expr(c)?;
                let tb = self.new_block();
                let eb = self.new_block();
                let join = self.new_block();
                self.terminate(Terminator::Branch { cond: cv, then: tb, els: eb });
                self.cur = tb;
                self.stmts(then)?;
                self.terminate(Terminator::Jump(join));
                self.cur = eb;
                self.stmts(els)?;
                self.terminate(Terminator::Jump(join));
                self.cur = join;
            }
            Stmt::While(c, body) => {
                let head = self.new_block();
                let body_b = self.new_block();
                let exit = self.new_block();
                self.terminate(Terminator::Jump(head));
                self.cur = head;
                let cv = self.expr(c)?;
                self.terminate(Terminator::Branch { cond: cv, then: body_b, els: exit });
                self.cur = body_b;
                self.stmts(body)?;
                self.terminate(Terminator::Jump(head));
                self.cur = exit;
            }
            Stmt::For(init, c, step, body) => {
                self.stmt(init)?;
                let head = self.new_block();
                let body_b = self.new_block();
                let exit = self.new_block();
                self.terminate(Terminator::Jump(head));
                self.cur = head;
                let cv = self.expr(c)?;
                self.terminate(Terminator::Branch { cond: cv, then: body_b, els: exit });
                self.cur = body_b;
                self.stmts(body)?;
                self.stmt(step)?;
                self.terminate(Terminator::Jump(head));
                self.cur = exit;
            }
        }
        Ok(())
    }
}

fn lower_function(
    f: &parser::Function,
    symbols: &HashMap<String, Symbol>,
    called: &mut BTreeSet<String>,
) -> Result<Function, SemaError> {
    let mut b = FnBuilder {
        symbols,
        file: f.file,
        scopes: vec![HashMap::new()],
        blocks: Vec::new(),
        cur: 0,
        next_vreg: 0,
        called,
    };
    b.new_block();
    let mut params = Vec::with_capacity(f.params.len());
    for p in &f.params {
        let v = b.vreg();
        params.push(v);
        if b.scopes.last_mut().and_then(|s| s.insert(p.clone(), v)).is_some() {
            return Err(b.err(f.line, format!("duplicate parameter '{p}' of '{}'", f.name)));
        }
    }
    b.stmts(f.body.as_deref().unwrap_or_default())?;
    // Falling off the end returns 0, as `main` does in C.
    let zero = b.constant(0);
    b.terminate(Terminator::Return(zero));
    Ok(Function { name: f.name.clone(), exported: !f.is_static, params, blocks: b.blocks, vregs: b.next_vreg })
}

/// Checks `unit` and lowers it.
pub fn lower(unit: &Unit) -> Result<Lowered, SemaError> {
    let mut symbols: HashMap<String, Symbol> = HashMap::new();
    for g in &unit.globals {
        let defined = !g.is_extern;
        match symbols.get_mut(&g.name) {
            Some(Symbol::Global { defined: d, .. }) => {
                if *d && defined {
                    return Err(SemaError {
                        file: g.file,
                        line: g.line,
                        what: format!("redefinition of '{}'", g.name),
                    });
                }
                *d |= defined;
            }
            Some(Symbol::Function { .. }) => {
                return Err(SemaError {
                    file: g.file,
                    line: g.line,
                    what: format!("'{}' redeclared as a different kind of symbol", g.name),
                })
            }
            None => {
                symbols.insert(g.name.clone(), Symbol::Global { defined });
            }
        }
    }
    for f in &unit.functions {
        let defined = f.body.is_some();
        let err = |what: String| SemaError { file: f.file, line: f.line, what };
        match symbols.get_mut(&f.name) {
            Some(Symbol::Function { arity, defined: d, .. }) => {
                if *arity != f.params.len() {
                    return Err(err(format!("conflicting types for '{}'", f.name)));
                }
                if *d && defined {
                    return Err(err(format!("redefinition of '{}'", f.name)));
                }
                *d |= defined;
            }
            Some(Symbol::Global { .. }) => {
                return Err(err(format!("'{}' redeclared as a different kind of symbol", f.name)))
            }
            None => {
                symbols.insert(
                    f.name.clone(),
                    Symbol::Function { arity: f.params.len(), defined, is_static: f.is_static },
                );
            }
        }
    }
    // Static symbols must be defined in this unit.
    for f in &unit.functions {
        if let Some(Symbol::Function { defined: false, is_static: true, .. }) = symbols.get(&f.name) {
            return Err(SemaError {
                file: f.file,
                line: f.line,
                what: format!("static function '{}' declared but never defined", f.name),
            });
        }
    }
    let mut out = Lowered::default();
    let mut called = BTreeSet::new();
    let mut lowered_inline = BTreeSet::new();
    for f in unit.functions.iter().filter(|f| f.body.is_some() && !f.is_inline) {
        out.functions.push(lower_function(f, &symbols, &mut called)?);
    }
    // Inline functions are checked always, emitted when called (also by
    // other inline functions).
    let inline: Vec<&parser::Function> = unit.functions.iter().filter(|f| f.body.is_some() && f.is_inline).collect();
    let mut checked = Vec::with_capacity(inline.len());
    for f in &inline {
        let mut sink = BTreeSet::new();
        checked.push((f, lower_function(f, &symbols, &mut sink)?, sink));
    }
    loop {
        let mut progress = false;
        for (f, lowered, calls) in &checked {
            if called.contains(&f.name) && !lowered_inline.contains(&f.name) {
                lowered_inline.insert(f.name.clone());
                called.extend(calls.iter().cloned());
                out.functions.push(lowered.clone());
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    for g in unit.globals.iter().filter(|g| !g.is_extern) {
        out.data.push(DataDef { name: g.name.clone(), init: g.init, exported: !g.is_static });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::lexer::lex;
    use crate::compiler::parser::parse;

    fn low(s: &str) -> Result<Lowered, SemaError> {
        lower(&parse(&lex(s, 0).unwrap()).unwrap())
    }

    #[test]
    fn lowers_control_flow_and_emits_used_inlines_only() {
        let l = low("int g = 2; int ext(int a);\n\
                     static inline int used(int x) { return helper(x); }\n\
                     static inline int helper(int x) { return x + 1; }\n\
                     static inline int unused(int x) { return x; }\n\
                     int f(int a) { int b = a && g; if (b) { g = used(b); } while (a < 3) { a = a + ext(a); } return a || b; }")
        .unwrap();
        let names: Vec<_> = l.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["f", "used", "helper"]);
        let f = &l.functions[0];
        assert!(f.exported && !l.functions[1].exported);
        assert!(f.blocks.len() > 8, "{}", f.blocks.len());
        assert!(f
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .any(|i| matches!(i, Inst::Store { global, .. } if global == "g")));
        assert_eq!(l.data, vec![DataDef { name: "g".into(), init: 2, exported: true }]);
    }

    #[test]
    fn errors_name_the_symbol() {
        for (src, want) in [
            ("int f(void) { return x; }", "'x' undeclared"),
            ("int f(void) { return g(1); }", "implicit declaration of function 'g'"),
            ("int g(int a); int f(void) { return g(); }", "'g' takes 1 arguments, called with 0"),
            ("int f(void) { int a = 1; int a = 2; return a; }", "redeclaration of 'a'"),
            ("int f(void) { return 1; } int f(void) { return 2; }", "redefinition of 'f'"),
            ("int f(int a); int f(int a, int b) { return a; }", "conflicting types for 'f'"),
            ("static int s(void); int f(void) { return s(); }", "static function 's' declared but never defined"),
            ("int f(void) { f = 1; return 0; }", "cannot assign to function 'f'"),
        ] {
            let e = low(src).unwrap_err().to_string();
            assert!(e.contains(want), "{src}: {e}");
        }
    }

    #[test]
    fn inner_scopes_end() {
        let e = low("int f(int a) { if (a) { int t = 1; } return t; }").unwrap_err();
        assert!(e.what.contains("'t' undeclared"));
    }
}
