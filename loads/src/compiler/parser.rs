//! Recursive-descent parser of the build workload's C-like language, from
//! preprocessed tokens to a syntax tree. Owns the grammar; must not resolve
//! names (the lowering does).
//!
//! ```text
//! unit     := item*
//! item     := ['extern'] 'int' NAME ';'                        global declaration
//!           | ['static'] 'int' NAME ['=' ['-'] NUM] ';'        global definition
//!           | ['extern'] 'int' NAME '(' params ')' ';'         prototype
//!           | ['static' ['inline']] 'int' NAME '(' params ')' block
//! params   := 'void' | 'int' NAME (',' 'int' NAME)*
//! stmt     := 'int' NAME '=' expr ';' | NAME '=' expr ';' | 'return' expr ';'
//!           | 'if' '(' expr ')' block ['else' (block | if-stmt)]
//!           | 'while' '(' expr ')' block
//!           | 'for' '(' NAME '=' expr ';' expr ';' NAME '=' expr ')' block
//!           | expr ';'
//! expr     := C's binary operators with C's precedence, unary - ! ~,
//!             NUM, NAME, NAME '(' args ')', '(' expr ')'
//! ```

use super::lexer::{Punct, Tok, Token};

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&` (short-circuit)
    LogAnd,
    /// `||` (short-circuit)
    LogOr,
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-`
    Neg,
    /// `!`
    Not,
    /// `~`
    BitNot,
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Integer literal.
    Num(i64),
    /// A variable (local, parameter or global).
    Var(String, u32),
    /// A call, with its line.
    Call(String, Vec<Expr>, u32),
    /// Unary operation.
    Unary(UnOp, Box<Expr>),
    /// Binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `int name = expr;` with its line.
    Decl(String, Expr, u32),
    /// `name = expr;` with its line.
    Assign(String, Expr, u32),
    /// `if (c) {..} else {..}`.
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    /// `while (c) {..}`.
    While(Expr, Vec<Stmt>),
    /// `for (init; cond; step) {..}`.
    For(Box<Stmt>, Expr, Box<Stmt>, Vec<Stmt>),
    /// `return expr;`.
    Return(Expr),
    /// An expression evaluated for its effect.
    Expr(Expr),
}

/// A function definition or prototype.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Name.
    pub name: String,
    /// Parameter names.
    pub params: Vec<String>,
    /// Body; `None` for a prototype.
    pub body: Option<Vec<Stmt>>,
    /// `static`: not visible to the linker.
    pub is_static: bool,
    /// `static inline`: emitted only when used.
    pub is_inline: bool,
    /// Line of the name.
    pub line: u32,
    /// File index of the name.
    pub file: u16,
}

/// A global variable definition or declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Global {
    /// Name.
    pub name: String,
    /// Initial value (definitions only).
    pub init: i64,
    /// `extern`: declared here, defined elsewhere.
    pub is_extern: bool,
    /// `static`: not visible to the linker.
    pub is_static: bool,
    /// Line.
    pub line: u32,
    /// File index.
    pub file: u16,
}

/// A parsed translation unit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unit {
    /// Functions in source order.
    pub functions: Vec<Function>,
    /// Globals in source order.
    pub globals: Vec<Global>,
}

/// A syntax error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("file #{file} line {line}: expected {expected}, found {found}")]
pub struct ParseError {
    /// File index (the compiler maps it to a path).
    pub file: u16,
    /// Line.
    pub line: u32,
    /// What the grammar wanted.
    pub expected: String,
    /// What was there.
    pub found: String,
}

struct Parser<'a> {
    toks: &'a [Token],
    pos: usize,
}

fn describe(t: Option<&Token>) -> String {
    match t.map(|t| &t.tok) {
        None => "end of input".into(),
        Some(Tok::Ident(s)) => format!("'{s}'"),
        Some(Tok::Num(n)) => n.to_string(),
        Some(Tok::Str(s)) => format!("{s:?}"),
        Some(Tok::Punct(p)) => format!("{p:?}"),
    }
}

/// Binding power of binary operators (higher binds tighter), as in C.
fn binop(t: Option<&Tok>) -> Option<(BinOp, u8)> {
    let Some(Tok::Punct(p)) = t else { return None };
    Some(match p {
        Punct::OrOr => (BinOp::LogOr, 1),
        Punct::AndAnd => (BinOp::LogAnd, 2),
        Punct::Pipe => (BinOp::Or, 3),
        Punct::Caret => (BinOp::Xor, 4),
        Punct::Amp => (BinOp::And, 5),
        Punct::EqEq => (BinOp::Eq, 6),
        Punct::Ne => (BinOp::Ne, 6),
        Punct::Lt => (BinOp::Lt, 7),
        Punct::Le => (BinOp::Le, 7),
        Punct::Gt => (BinOp::Gt, 7),
        Punct::Ge => (BinOp::Ge, 7),
        Punct::Shl => (BinOp::Shl, 8),
        Punct::Shr => (BinOp::Shr, 8),
        Punct::Plus => (BinOp::Add, 9),
        Punct::Minus => (BinOp::Sub, 9),
        Punct::Star => (BinOp::Mul, 10),
        Punct::Slash => (BinOp::Div, 10),
        Punct::Percent => (BinOp::Rem, 10),
        _ => return None,
    })
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a Token> {
        self.toks.get(self.pos)
    }
    fn peek_tok(&self) -> Option<&'a Tok> {
        self.peek().map(|t| &t.tok)
    }
    fn peek2_tok(&self) -> Option<&'a Tok> {
        self.toks.get(self.pos + 1).map(|t| &t.tok)
    }
    fn err(&self, expected: &str) -> ParseError {
        let (file, line) = self.peek().or_else(|| self.toks.last()).map(|t| (t.file, t.line)).unwrap_or((0, 0));
        ParseError { file, line, expected: expected.to_string(), found: describe(self.peek()) }
    }
    fn line(&self) -> (u16, u32) {
        self.peek().or_else(|| self.toks.last()).map(|t| (t.file, t.line)).unwrap_or((0, 0))
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek_tok(), Some(Tok::Ident(s)) if s == kw)
    }
    fn eat_kw(&mut self, kw: &str) -> bool {
        let yes = self.is_kw(kw);
        if yes {
            self.pos += 1;
        }
        yes
    }
    fn expect_kw(&mut self, kw: &str) -> Result<(), ParseError> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.err(&format!("'{kw}'")))
        }
    }
    fn eat(&mut self, p: Punct) -> bool {
        let yes = self.peek_tok() == Some(&Tok::Punct(p));
        if yes {
            self.pos += 1;
        }
        yes
    }
    fn expect(&mut self, p: Punct) -> Result<(), ParseError> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(self.err(&format!("{p:?}")))
        }
    }
    fn name(&mut self) -> Result<String, ParseError> {
        match self.peek_tok() {
            Some(Tok::Ident(s)) if !is_keyword(s) => {
                self.pos += 1;
                Ok(s.clone())
            }
            _ => Err(self.err("a name")),
        }
    }

    fn unit(&mut self) -> Result<Unit, ParseError> {
        let mut u = Unit::default();
        while self.peek().is_some() {
            let is_extern = self.eat_kw("extern");
            let is_static = !is_extern && self.eat_kw("static");
            let is_inline = is_static && self.eat_kw("inline");
            self.expect_kw("int")?;
            let (file, line) = self.line();
            let name = self.name()?;
            if self.eat(Punct::LParen) {
                let params = self.params()?;
                let body = if self.eat(Punct::Semi) {
                    None
                } else if is_extern {
                    return Err(self.err("';' after an extern prototype"));
                } else {
                    Some(self.block()?)
                };
                u.functions.push(Function { name, params, body, is_static, is_inline, line, file });
            } else {
                if is_inline {
                    return Err(self.err("'(' (inline applies to functions)"));
                }
                let mut init = 0;
                if !is_extern && self.eat(Punct::Assign) {
                    let neg = self.eat(Punct::Minus);
                    match self.peek_tok() {
                        Some(Tok::Num(n)) => {
                            init = if neg { n.wrapping_neg() } else { *n };
                            self.pos += 1;
                        }
                        _ => return Err(self.err("an integer initialiser")),
                    }
                }
                self.expect(Punct::Semi)?;
                u.globals.push(Global { name, init, is_extern, is_static, line, file });
            }
        }
        Ok(u)
    }

    fn params(&mut self) -> Result<Vec<String>, ParseError> {
        let mut ps = Vec::new();
        if self.eat_kw("void") {
            self.expect(Punct::RParen)?;
            return Ok(ps);
        }
        if self.eat(Punct::RParen) {
            return Ok(ps);
        }
        loop {
            self.expect_kw("int")?;
            ps.push(self.name()?);
            if self.eat(Punct::RParen) {
                return Ok(ps);
            }
            self.expect(Punct::Comma)?;
        }
    }

    fn block(&mut self) -> Result<Vec<Stmt>, ParseError> {
        self.expect(Punct::LBrace)?;
        let mut v = Vec::new();
        while !self.eat(Punct::RBrace) {
            if self.peek().is_none() {
                return Err(self.err("'}'"));
            }
            v.push(self.stmt()?);
        }
        Ok(v)
    }

    fn simple_assign(&mut self) -> Result<Stmt, ParseError> {
        let (_, line) = self.line();
        let n = self.name()?;
        self.expect(Punct::Assign)?;
        Ok(Stmt::Assign(n, self.expr(0)?, line))
    }

    fn stmt(&mut self) -> Result<Stmt, ParseError> {
        let (_, line) = self.line();
        if self.eat_kw("int") {
            let n = self.name()?;
            self.expect(Punct::Assign)?;
            let e = self.expr(0)?;
            self.expect(Punct::Semi)?;
            return Ok(Stmt::Decl(n, e, line));
        }
        if self.eat_kw("return") {
            let e = self.expr(0)?;
            self.expect(Punct::Semi)?;
            return Ok(Stmt::Return(e));
        }
        if self.eat_kw("if") {
            self.expect(Punct::LParen)?;
            let c = self.expr(0)?;
            self.expect(Punct::RParen)?;
            let then = self.block()?;
            let els = if self.eat_kw("else") {
                if self.is_kw("if") {
                    vec![self.stmt()?]
                } else {
                    self.block()?
                }
            } else {
                Vec::new()
            };
            return Ok(Stmt::If(c, then, els));
        }
        if self.eat_kw("while") {
            self.expect(Punct::LParen)?;
            let c = self.expr(0)?;
            self.expect(Punct::RParen)?;
            return Ok(Stmt::While(c, self.block()?));
        }
        if self.eat_kw("for") {
            self.expect(Punct::LParen)?;
            let init = self.simple_assign()?;
            self.expect(Punct::Semi)?;
            let c = self.expr(0)?;
            self.expect(Punct::Semi)?;
            let step = self.simple_assign()?;
            self.expect(Punct::RParen)?;
            return Ok(Stmt::For(Box::new(init), c, Box::new(step), self.block()?));
        }
        if matches!(self.peek_tok(), Some(Tok::Ident(_))) && self.peek2_tok() == Some(&Tok::Punct(Punct::Assign)) {
            let s = self.simple_assign()?;
            self.expect(Punct::Semi)?;
            return Ok(s);
        }
        let e = self.expr(0)?;
        self.expect(Punct::Semi)?;
        Ok(Stmt::Expr(e))
    }

    /// Precedence climbing: parses operators binding tighter than `min`.
    fn expr(&mut self, min: u8) -> Result<Expr, ParseError> {
        let mut lhs = self.unary()?;
        while let Some((op, bp)) = binop(self.peek_tok()) {
            if bp <= min {
                break;
            }
            self.pos += 1;
            let rhs = self.expr(bp)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let op = match self.peek_tok() {
            Some(Tok::Punct(Punct::Minus)) => Some(UnOp::Neg),
            Some(Tok::Punct(Punct::Bang)) => Some(UnOp::Not),
            Some(Tok::Punct(Punct::Tilde)) => Some(UnOp::BitNot),
            _ => None,
        };
        if let Some(op) = op {
            self.pos += 1;
            return Ok(Expr::Unary(op, Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let (_, line) = self.line();
        match self.peek_tok() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Expr::Num(*n))
            }
            Some(Tok::Punct(Punct::LParen)) => {
                self.pos += 1;
                let e = self.expr(0)?;
                self.expect(Punct::RParen)?;
                Ok(e)
            }
            Some(Tok::Ident(_)) => {
                let n = self.name()?;
                if self.eat(Punct::LParen) {
                    let mut args = Vec::new();
                    if !self.eat(Punct::RParen) {
                        loop {
                            args.push(self.expr(0)?);
                            if self.eat(Punct::RParen) {
                                break;
                            }
                            self.expect(Punct::Comma)?;
                        }
                    }
                    Ok(Expr::Call(n, args, line))
                } else {
                    Ok(Expr::Var(n, line))
                }
            }
            _ => Err(self.err("an expression")),
        }
    }
}

/// Words that cannot name anything.
pub fn is_keyword(s: &str) -> bool {
    matches!(s, "int" | "void" | "static" | "inline" | "extern" | "if" | "else" | "while" | "for" | "return")
}

/// Parses a preprocessed token stream.
pub fn parse(toks: &[Token]) -> Result<Unit, ParseError> {
    Parser { toks, pos: 0 }.unit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::lexer::lex;

    fn p(s: &str) -> Result<Unit, ParseError> {
        parse(&lex(s, 0).unwrap())
    }

    #[test]
    fn parses_items_and_precedence() {
        let u = p("extern int g; static int h = -3; int f(int a, int b);\n\
                   static inline int sq(int x) { return x * x; }\n\
                   int f(int a, int b) { int c = a + b * 2 << 1; if (c > 3 && !b) { c = -c; } else if (a) { c = 1; }\n\
                   while (c) { c = c - 1; } for (a = 0; a < 4; a = a + 1) { sq(a); } return c; }")
        .unwrap();
        assert_eq!(u.globals.len(), 2);
        assert_eq!(u.globals[1].init, -3);
        assert!(u.globals[0].is_extern && u.globals[1].is_static);
        assert_eq!(u.functions.len(), 3);
        assert!(u.functions[0].body.is_none());
        assert!(u.functions[1].is_inline);
        let body = u.functions[2].body.as_ref().unwrap();
        let Stmt::Decl(_, e, _) = &body[0] else { panic!() };
        // (a + (b * 2)) << 1
        let Expr::Binary(BinOp::Shl, l, _) = e else { panic!("{e:?}") };
        assert!(matches!(**l, Expr::Binary(BinOp::Add, _, _)));
        assert!(matches!(body[1], Stmt::If(_, _, ref els) if matches!(els[0], Stmt::If(..))));
        assert!(matches!(body[3], Stmt::For(..)));
    }

    #[test]
    fn errors_say_what_was_expected() {
        let e = p("int f(int a) { return a +; }").unwrap_err();
        assert_eq!((e.line, e.expected.as_str(), e.found.as_str()), (1, "an expression", "Semi"));
        let e = p("int f(int a) {\n a = 1;\n").unwrap_err();
        assert_eq!(e.found, "end of input");
        assert!(p("int if = 3;").is_err());
        assert!(p("extern int f(void) { return 1; }").is_err());
    }
}
