//! IR optimisation passes, run to a fixed point: local constant folding,
//! copy propagation and common-subexpression elimination by value
//! numbering; constant branches turned into jumps; jump threading;
//! unreachable-block removal; and dead-code elimination over a global
//! liveness analysis (iterative bit-vector dataflow). Owns IR-to-IR
//! rewriting; must not change what a function computes.

use super::ir::{BlockId, Function, Inst, Op, Terminator, Vreg};
use std::collections::HashMap;

/// What the passes did, for the compiler's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptStats {
    /// Instructions folded to constants.
    pub folded: u64,
    /// Instructions replaced by an earlier equal value.
    pub cse: u64,
    /// Instructions removed as dead.
    pub dead: u64,
    /// Blocks removed as unreachable.
    pub unreachable: u64,
    /// Rounds of the pass pipeline run.
    pub rounds: u64,
}

/// Live-register sets of one function, per block, as bit vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Liveness {
    /// Words per set.
    pub words: usize,
    /// Registers live on entry to each block.
    pub live_in: Vec<Vec<u64>>,
    /// Registers live on exit from each block.
    pub live_out: Vec<Vec<u64>>,
}

fn set_bit(s: &mut [u64], v: Vreg) {
    if let Some(w) = s.get_mut((v / 64) as usize) {
        *w |= 1u64 << (v % 64);
    }
}
fn clear_bit(s: &mut [u64], v: Vreg) {
    if let Some(w) = s.get_mut((v / 64) as usize) {
        *w &= !(1u64 << (v % 64));
    }
}
/// True when register `v` is in set `s`.
pub fn has_bit(s: &[u64], v: Vreg) -> bool {
    s.get((v / 64) as usize).is_some_and(|w| w & (1u64 << (v % 64)) != 0)
}

/// Computes liveness by backward dataflow until nothing changes.
pub fn liveness(f: &Function) -> Liveness {
    let words = (f.vregs as usize).div_ceil(64).max(1);
    let n = f.blocks.len();
    // use/def per block
    let mut uses = vec![vec![0u64; words]; n];
    let mut defs = vec![vec![0u64; words]; n];
    for (b, blk) in f.blocks.iter().enumerate() {
        let (Some(u), Some(d)) = (uses.get_mut(b), defs.get_mut(b)) else { continue };
        for i in &blk.insts {
            i.for_each_use(|v| {
                if !has_bit(d, v) {
                    set_bit(u, v)
                }
            });
            if let Some(v) = i.def() {
                set_bit(d, v);
            }
        }
        if let Some(v) = blk.term.used() {
            if !has_bit(d, v) {
                set_bit(u, v);
            }
        }
    }
    let succs: Vec<Vec<BlockId>> = f.blocks.iter().map(|b| b.term.successors()).collect();
    let mut live_in = vec![vec![0u64; words]; n];
    let mut live_out = vec![vec![0u64; words]; n];
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..n).rev() {
            let mut out = vec![0u64; words];
            for s in succs.get(b).into_iter().flatten() {
                if let Some(si) = live_in.get(*s) {
                    out.iter_mut().zip(si).for_each(|(o, x)| *o |= x);
                }
            }
            let (Some(u), Some(d)) = (uses.get(b), defs.get(b)) else { continue };
            let inn: Vec<u64> = out.iter().zip(u).zip(d).map(|((o, u), d)| u | (o & !d)).collect();
            if live_in.get(b) != Some(&inn) || live_out.get(b) != Some(&out) {
                changed = true;
                if let Some(x) = live_in.get_mut(b) {
                    *x = inn;
                }
                if let Some(x) = live_out.get_mut(b) {
                    *x = out;
                }
            }
        }
    }
    Liveness { words, live_in, live_out }
}

/// Value-numbering key: operation, first operand and its version, second
/// operand and its version.
type ValueKey = (Op, Vreg, u32, Vreg, u32);

/// Local folding, copy propagation and value numbering in each block.
/// Registers are not in SSA form, so every fact carries the version of the
/// registers it depends on and is ignored once one was redefined.
fn fold_block_local(f: &mut Function, st: &mut OptStats) -> bool {
    let mut changed = false;
    let n = f.vregs as usize;
    for blk in &mut f.blocks {
        let mut ver = vec![0u32; n];
        let mut consts: HashMap<Vreg, (i64, u32)> = HashMap::new();
        let mut copies: HashMap<Vreg, (Vreg, u32, u32)> = HashMap::new();
        let mut values: HashMap<ValueKey, (Vreg, u32)> = HashMap::new();
        let cur = |ver: &[u32], v: Vreg| ver.get(v as usize).copied().unwrap_or(0);
        for inst in &mut blk.insts {
            // Copy propagation into operands.
            inst.map_uses(|v| match copies.get(&v) {
                Some(&(src, sv, dv)) if cur(&ver, src) == sv && cur(&ver, v) == dv => src,
                _ => v,
            });
            let konst = |v: Vreg, ver: &[u32]| match consts.get(&v) {
                Some(&(c, cv)) if cur(ver, v) == cv => Some(c),
                _ => None,
            };
            let replacement = match &*inst {
                Inst::Bin { op, dst, a, b } => match (konst(*a, &ver), konst(*b, &ver)) {
                    (Some(x), Some(y)) => Some(Inst::Const { dst: *dst, value: op.eval(x, y) }),
                    _ => {
                        let (a, b) = if op.commutes() && a > b { (*b, *a) } else { (*a, *b) };
                        let key = (*op, a, cur(&ver, a), b, cur(&ver, b));
                        match values.get(&key) {
                            Some(&(v, vv)) if cur(&ver, v) == vv && v != *dst => {
                                st.cse += 1;
                                Some(Inst::Copy { dst: *dst, src: v })
                            }
                            _ => None,
                        }
                    }
                },
                Inst::Unary { op, dst, a } => konst(*a, &ver).map(|x| Inst::Const { dst: *dst, value: op.eval(x) }),
                Inst::Copy { dst, src } => konst(*src, &ver).map(|x| Inst::Const { dst: *dst, value: x }),
                _ => None,
            };
            if let Some(r) = replacement {
                if matches!(r, Inst::Const { .. }) {
                    st.folded += 1;
                }
                if r != *inst {
                    *inst = r;
                    changed = true;
                }
            }
            // Record what the instruction defines.
            if let Some(d) = inst.def() {
                if let Some(x) = ver.get_mut(d as usize) {
                    *x = x.wrapping_add(1);
                }
                let dv = cur(&ver, d);
                consts.remove(&d);
                copies.remove(&d);
                match &*inst {
                    Inst::Const { value, .. } => {
                        consts.insert(d, (*value, dv));
                    }
                    Inst::Copy { src, .. } if *src != d => {
                        copies.insert(d, (*src, cur(&ver, *src), dv));
                    }
                    Inst::Bin { op, a, b, .. } if *a != d && *b != d => {
                        let (a, b) = if op.commutes() && a > b { (*b, *a) } else { (*a, *b) };
                        values.insert((*op, a, cur(&ver, a), b, cur(&ver, b)), (d, dv));
                    }
                    _ => {}
                }
            }
        }
        // A branch on a known constant becomes a jump.
        if let Terminator::Branch { cond, then, els } = blk.term {
            if let Some(&(c, cv)) = consts.get(&cond) {
                if cur(&ver, cond) == cv {
                    blk.term = Terminator::Jump(if c != 0 { then } else { els });
                    st.folded += 1;
                    changed = true;
                }
            }
        }
    }
    changed
}

/// Redirects jumps to empty blocks that only jump on.
fn thread_jumps(f: &mut Function) -> bool {
    let n = f.blocks.len();
    let target = |f: &Function, mut b: BlockId| {
        for _ in 0..n {
            match f.blocks.get(b) {
                Some(blk) if blk.insts.is_empty() => match blk.term {
                    Terminator::Jump(t) if t != b => b = t,
                    _ => break,
                },
                _ => break,
            }
        }
        b
    };
    let mut changed = false;
    for i in 0..n {
        let Some(term) = f.blocks.get(i).map(|b| b.term.clone()) else { continue };
        let new = match term {
            Terminator::Jump(t) => Terminator::Jump(target(f, t)),
            Terminator::Branch { cond, then, els } => {
                let (t, e) = (target(f, then), target(f, els));
                if t == e {
                    Terminator::Jump(t)
                } else {
                    Terminator::Branch { cond, then: t, els: e }
                }
            }
            r => r,
        };
        if let Some(b) = f.blocks.get_mut(i) {
            if b.term != new {
                b.term = new;
                changed = true;
            }
        }
    }
    changed
}

/// Drops blocks not reachable from the entry and renumbers the rest.
fn remove_unreachable(f: &mut Function, st: &mut OptStats) -> bool {
    let n = f.blocks.len();
    let mut seen = vec![false; n];
    let mut stack = vec![0usize];
    while let Some(b) = stack.pop() {
        match seen.get_mut(b) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        if let Some(blk) = f.blocks.get(b) {
            stack.extend(blk.term.successors());
        }
    }
    if seen.iter().all(|&s| s) {
        return false;
    }
    let mut map = vec![usize::MAX; n];
    let mut next = 0;
    for (i, s) in seen.iter().enumerate() {
        if *s {
            if let Some(m) = map.get_mut(i) {
                *m = next;
            }
            next += 1;
        }
    }
    let old = std::mem::take(&mut f.blocks);
    for (i, mut blk) in old.into_iter().enumerate() {
        if !seen.get(i).copied().unwrap_or(false) {
            st.unreachable += 1;
            continue;
        }
        let m = |b: BlockId| map.get(b).copied().unwrap_or(0);
        blk.term = match blk.term {
            Terminator::Jump(t) => Terminator::Jump(m(t)),
            Terminator::Branch { cond, then, els } => Terminator::Branch { cond, then: m(then), els: m(els) },
            r => r,
        };
        f.blocks.push(blk);
    }
    true
}

/// Removes pure instructions whose result is never read.
fn eliminate_dead(f: &mut Function, st: &mut OptStats) -> bool {
    let live = liveness(f);
    let mut changed = false;
    for (b, blk) in f.blocks.iter_mut().enumerate() {
        let mut l = live.live_out.get(b).cloned().unwrap_or_default();
        if let Some(v) = blk.term.used() {
            set_bit(&mut l, v);
        }
        let mut keep = vec![true; blk.insts.len()];
        for (i, inst) in blk.insts.iter().enumerate().rev() {
            let d = inst.def();
            if inst.is_pure() && d.is_some_and(|d| !has_bit(&l, d)) {
                if let Some(k) = keep.get_mut(i) {
                    *k = false;
                }
                st.dead += 1;
                changed = true;
                continue;
            }
            if let Some(d) = d {
                clear_bit(&mut l, d);
            }
            inst.for_each_use(|v| set_bit(&mut l, v));
        }
        let mut it = keep.iter();
        blk.insts.retain(|_| it.next().copied().unwrap_or(true));
    }
    changed
}

/// Runs the pipeline until it changes nothing (at most `max_rounds`).
pub fn optimize(f: &mut Function, max_rounds: u32) -> OptStats {
    let mut st = OptStats::default();
    for _ in 0..max_rounds {
        st.rounds += 1;
        let mut changed = fold_block_local(f, &mut st);
        changed |= thread_jumps(f);
        changed |= remove_unreachable(f, &mut st);
        changed |= eliminate_dead(f, &mut st);
        if !changed {
            break;
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::lexer::lex;
    use crate::compiler::lower::lower;
    use crate::compiler::parser::parse;

    fn func(s: &str) -> Function {
        lower(&parse(&lex(s, 0).unwrap()).unwrap()).unwrap().functions.remove(0)
    }

    #[test]
    fn folds_constants_and_branches_away() {
        let mut f = func("int f(int a) { int x = 2 * 3 + 1; if (x > 5) { return a + x; } return 99; }");
        let before = f.size();
        let st = optimize(&mut f, 8);
        assert!(st.folded >= 3, "{st:?}");
        assert!(st.unreachable >= 1, "{st:?}");
        assert!(f.size() < before / 2, "{} -> {}", before, f.size());
        assert!(!f.blocks.iter().flat_map(|b| &b.insts).any(|i| matches!(i, Inst::Const { value: 99, .. })));
    }

    #[test]
    fn cse_and_dead_code() {
        let mut f = func("int f(int a, int b) { int x = a * b; int y = b * a; int z = a - b; return x + y; }");
        let st = optimize(&mut f, 8);
        assert!(st.cse >= 1, "{st:?}");
        let muls =
            f.blocks.iter().flat_map(|b| &b.insts).filter(|i| matches!(i, Inst::Bin { op: Op::Mul, .. })).count();
        let subs =
            f.blocks.iter().flat_map(|b| &b.insts).filter(|i| matches!(i, Inst::Bin { op: Op::Sub, .. })).count();
        assert_eq!((muls, subs), (1, 0));
    }

    #[test]
    fn keeps_side_effects_and_loops() {
        let mut f = func(
            "int g = 0; int h(int v); int f(int n) { int i = 0; while (i < n) { h(i); i = i + 1; } g = 1; return 0; }",
        );
        optimize(&mut f, 8);
        let insts: Vec<_> = f.blocks.iter().flat_map(|b| &b.insts).collect();
        assert!(insts.iter().any(|i| matches!(i, Inst::Call { .. })));
        assert!(insts.iter().any(|i| matches!(i, Inst::Store { .. })));
        let live = liveness(&f);
        // The loop counter is live around the loop.
        assert!(live.live_in.iter().filter(|s| s.iter().any(|w| *w != 0)).count() >= 2);
    }
}
