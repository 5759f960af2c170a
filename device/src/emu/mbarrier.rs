//! The emulator's mbarriers ([`crate::mbarrier`]): each live barrier's
//! phase, arrivals and transaction count, kept beside shared memory (the 8
//! bytes the kernel gave it stay untouched: the object is opaque on the GPU,
//! and a plain access to them is [`Fault::Mbarrier`](super::Fault::Mbarrier)),
//! and the ordering a phase makes: the clocks its arrivals released (the
//! race detector's, `super::race`), which a wait that sees it complete
//! acquires.
//!
//! The rules, from the PTX ISA's mbarrier section: a phase completes when
//! its pending arrivals and its tx-count are both 0, and the barrier then
//! moves to the next phase with the expected arrivals pending again;
//! arrivals expected and |tx-count| are at most 2^20 − 1; a parity wait may
//! name only the current phase (false) or the one before it (true). What
//! the ISA leaves undefined is a [`MbarrierProblem`].

use super::MbarrierProblem;
use crate::mbarrier::MAX_COUNT;
use std::collections::HashMap;

/// One live barrier.
struct Barrier {
    /// The current (incomplete) phase's number; every earlier one completed.
    phase: u32,
    expected: u32,
    pending: u32,
    tx: i64,
    /// The join of the clocks this phase's releases published.
    released: Vec<u32>,
    /// What a wait on the last completed phase acquires.
    completed: Vec<u32>,
}

impl Barrier {
    /// Moves to the next phase if this one is done.
    fn complete_if_done(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.phase = self.phase.wrapping_add(1);
            self.pending = self.expected;
            self.completed = core::mem::take(&mut self.released);
        }
    }
}

/// A block's live barriers, by byte offset in its shared memory.
#[derive(Default)]
pub(crate) struct Barriers {
    live: HashMap<usize, Barrier>,
}

impl Barriers {
    fn get(&mut self, offset: usize) -> Result<&mut Barrier, MbarrierProblem> {
        self.live.get_mut(&offset).ok_or(MbarrierProblem::NotLive)
    }

    /// `init`: a fresh barrier at `offset` expecting `count` arrivals a phase.
    pub(crate) fn init(&mut self, offset: usize, count: u32) -> Result<(), MbarrierProblem> {
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(MbarrierProblem::BadCount { count });
        }
        if self.live.contains_key(&offset) {
            return Err(MbarrierProblem::InitLive);
        }
        self.live.insert(
            offset,
            Barrier {
                phase: 0,
                expected: count,
                pending: count,
                tx: 0,
                released: Vec::new(),
                completed: Vec::new(),
            },
        );
        Ok(())
    }

    /// An arrive (after raising the tx-count by `expect`), whose release
    /// `release` joins into the phase's clock.
    pub(crate) fn arrive(
        &mut self,
        offset: usize,
        expect: u32,
        release: impl FnOnce(&mut Vec<u32>),
    ) -> Result<(), MbarrierProblem> {
        let b = self.get(offset)?;
        if b.pending == 0 {
            return Err(MbarrierProblem::TooManyArrivals {
                phase: b.phase,
                expected: b.expected,
            });
        }
        add_tx(b, i64::from(expect))?;
        b.pending -= 1;
        release(&mut b.released);
        b.complete_if_done();
        Ok(())
    }

    /// `expect_tx` (`bytes` ≥ 0) or `complete_tx` (a release; `bytes` < 0).
    pub(crate) fn tx(
        &mut self,
        offset: usize,
        bytes: i64,
        release: impl FnOnce(&mut Vec<u32>),
    ) -> Result<(), MbarrierProblem> {
        let b = self.get(offset)?;
        add_tx(b, bytes)?;
        if bytes < 0 {
            release(&mut b.released);
        }
        b.complete_if_done();
        Ok(())
    }

    /// A parity wait for phase `phase`: `Some(clock to acquire)` if it has
    /// completed, `None` if it is the current one.
    pub(crate) fn wait(
        &mut self,
        offset: usize,
        phase: u32,
    ) -> Result<Option<&[u32]>, MbarrierProblem> {
        let b = self.get(offset)?;
        match b.phase.wrapping_sub(phase) {
            0 => Ok(None),
            1 => Ok(Some(&b.completed)),
            _ => Err(MbarrierProblem::PhaseNotCurrentOrPreceding {
                waited: phase,
                current: b.phase,
            }),
        }
    }

    /// `inval`.
    pub(crate) fn inval(&mut self, offset: usize) -> Result<(), MbarrierProblem> {
        self.live
            .remove(&offset)
            .map(drop)
            .ok_or(MbarrierProblem::NotLive)
    }

    /// A live barrier among bytes `offset .. offset + len`, if any.
    pub(crate) fn overlapping(&self, offset: usize, len: usize) -> Option<usize> {
        if self.live.is_empty() {
            return None;
        }
        let first = offset & !7;
        (first..offset.saturating_add(len))
            .step_by(8)
            .find(|at| self.live.contains_key(at))
    }

    /// The barrier's state for a report: (phase, pending arrivals, tx-count).
    pub(crate) fn state(&self, offset: usize) -> Option<(u32, u32, i64)> {
        self.live.get(&offset).map(|b| (b.phase, b.pending, b.tx))
    }
}

/// tx-count += `bytes`, within ±(2^20 − 1).
fn add_tx(b: &mut Barrier, bytes: i64) -> Result<(), MbarrierProblem> {
    let tx = b.tx + bytes;
    if tx.abs() > i64::from(MAX_COUNT) {
        return Err(MbarrierProblem::TxOutOfRange { tx });
    }
    b.tx = tx;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Phases complete when arrivals and bytes are both in, in either order;
    /// the parity protocol answers only for the current and preceding phase.
    #[test]
    fn phases_complete_on_arrivals_and_bytes() {
        let mut b = Barriers::default();
        b.init(8, 2).unwrap();
        assert_eq!(b.init(8, 2), Err(MbarrierProblem::InitLive));
        // Phase 0: two arrivals, one expecting 64 bytes that land last.
        assert_eq!(b.wait(8, 0).unwrap(), None);
        assert!(
            b.wait(8, u32::MAX).unwrap().is_some(),
            "the phase before the first"
        );
        b.arrive(8, 64, |_| {}).unwrap();
        b.arrive(8, 0, |_| {}).unwrap();
        assert_eq!(b.state(8), Some((0, 0, 64)), "arrivals in, bytes pending");
        b.tx(8, -64, |_| {}).unwrap();
        assert_eq!(b.state(8), Some((1, 2, 0)));
        assert!(b.wait(8, 0).unwrap().is_some());
        // Phase 1: bytes land before they are expected (tx-count negative).
        b.tx(8, -16, |_| {}).unwrap();
        b.arrive(8, 16, |_| {}).unwrap();
        assert_eq!(b.state(8), Some((1, 1, 0)));
        b.arrive(8, 0, |_| {}).unwrap();
        assert_eq!(b.state(8), Some((2, 2, 0)));
        assert_eq!(
            b.wait(8, 0).unwrap_err(),
            MbarrierProblem::PhaseNotCurrentOrPreceding {
                waited: 0,
                current: 2
            }
        );
        assert_eq!(b.overlapping(12, 4), Some(8));
        assert_eq!(b.overlapping(16, 8), None);
        b.inval(8).unwrap();
        assert_eq!(b.wait(8, 2).unwrap_err(), MbarrierProblem::NotLive);
    }

    /// The ranges the ISA gives: counts 1 ..= 2^20 − 1, |tx| ≤ 2^20 − 1, and
    /// no arrival beyond the expected ones.
    #[test]
    fn counts_out_of_range_are_problems() {
        let mut b = Barriers::default();
        assert_eq!(b.init(0, 0), Err(MbarrierProblem::BadCount { count: 0 }));
        assert_eq!(
            b.init(0, 1 << 20),
            Err(MbarrierProblem::BadCount { count: 1 << 20 })
        );
        b.init(0, 1).unwrap();
        assert_eq!(
            b.tx(0, 1 << 20, |_| {}),
            Err(MbarrierProblem::TxOutOfRange { tx: 1 << 20 })
        );
        b.tx(0, 8, |_| {}).unwrap();
        b.arrive(0, 0, |_| {}).unwrap();
        assert_eq!(
            b.arrive(0, 0, |_| {}),
            Err(MbarrierProblem::TooManyArrivals {
                phase: 0,
                expected: 1
            })
        );
    }

    /// A completed phase hands its waiters the join of what its arrivals
    /// released, and the next phase starts with nothing released.
    #[test]
    fn a_phase_publishes_the_join_of_its_releases() {
        let mut b = Barriers::default();
        b.init(0, 2).unwrap();
        fn join(c: &[u32]) -> impl FnOnce(&mut Vec<u32>) + '_ {
            move |into: &mut Vec<u32>| {
                into.resize(c.len().max(into.len()), 0);
                for (i, &x) in c.iter().enumerate() {
                    into[i] = into[i].max(x);
                }
            }
        }
        b.arrive(0, 0, join(&[3, 0, 1])).unwrap();
        b.arrive(0, 0, join(&[1, 5, 0])).unwrap();
        assert_eq!(b.wait(0, 0).unwrap(), Some(&[3, 5, 1][..]));
        b.arrive(0, 0, join(&[0, 0, 9])).unwrap();
        assert_eq!(
            b.wait(0, 0).unwrap(),
            Some(&[3, 5, 1][..]),
            "phase 1 is not done"
        );
    }
}
