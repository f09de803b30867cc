//! Reservoir memories of training samples (docs/deep-cfr.md §7), stored compactly.
//!
//! Storage choice: info states are kept as f32 (bit-exact with what the
//! traversal encoded, so recursive/interleaved parity can compare samples and
//! training sees exactly the encoded values); legal masks are bit sets (u32);
//! targets are f32. One classic sample (297-dim) costs 297·4 + 22·4 + 4 + 4 +
//! 2 ≈ 1.3 KB, so the three default 2 M-sample memories peak at ≈ 7.6 GB —
//! within the ~8 GiB budget — and only grow as samples arrive.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::seq::index;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::regret::ACTIONS;

/// A sample on its way into memory (borrowed from the traversal's buffers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRef<'a> {
    pub info_state: &'a [f32],
    pub target: &'a [f32; ACTIONS],
    pub mask: u32,
    pub iteration: u32,
    pub player: u8,
    pub is_first_open: bool,
}

/// Errors of the memories.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryError {
    #[error("cannot sample from an empty memory")]
    Empty,
    #[error("sample has {got} input features, memory holds {expected}")]
    WrongDim { expected: usize, got: usize },
}

/// A fixed-capacity reservoir: after `seen` additions every sample so far had
/// the same chance, capacity/seen, of being kept.
#[derive(Debug, Clone)]
pub struct Reservoir {
    dim: usize,
    capacity: usize,
    seen: u64,
    states: Vec<f32>,
    targets: Vec<f32>,
    masks: Vec<u32>,
    iterations: Vec<u32>,
    players: Vec<u8>,
    first_open: Vec<bool>,
    /// Slots holding first-open samples, kept in step with replacements.
    first_open_slots: Vec<u32>,
    /// Position of each slot in `first_open_slots` (u32::MAX = not there).
    first_open_pos: Vec<u32>,
    rng: ChaCha8Rng,
    /// What changed since the last [`Reservoir::take_changes`].
    log: ChangeLog,
}

/// One reservoir's identity, for a copy of its rows kept elsewhere (a GPU's
/// mirror): every reservoir gets its own, and so does every clone, whose
/// rows then go their own way.
#[derive(Debug)]
struct Instance(u64);

impl Instance {
    fn next() -> Instance {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Instance(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The rows written since the log was last taken: those appended (from
/// `synced_len` on) and the slots replaced below it. Past a quarter of the
/// rows the replaced slots are no longer listed (`all`): a copy then takes
/// every row, and a reservoir no copy follows keeps a bounded log.
#[derive(Debug, Clone)]
struct ChangeLog {
    instance: Instance,
    synced_len: usize,
    replaced: Vec<u32>,
    all: bool,
}

impl Clone for Instance {
    fn clone(&self) -> Instance {
        Instance::next()
    }
}

/// What [`Reservoir::take_changes`] reports: the rows a copy that was in
/// step at the previous call must take to be in step again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    /// The reservoir these changes belong to (see [`Reservoir::instance`]).
    pub instance: u64,
    /// Rows to copy as they are (appended, or every row after `all`).
    pub appended: Range<usize>,
    /// Slots below `appended.start` that were replaced, ascending, once each.
    pub replaced: Vec<u32>,
}

/// A training batch copied out of memory (row-major).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub rows: usize,
    pub dim: usize,
    pub states: Vec<f32>,
    pub targets: Vec<f32>,
    pub masks: Vec<u32>,
    pub iterations: Vec<u32>,
}

impl Batch {
    /// No rows, the buffers kept for reuse.
    pub fn clear(&mut self) {
        self.rows = 0;
        self.states.clear();
        self.targets.clear();
        self.masks.clear();
        self.iterations.clear();
    }

    /// Legal mask of row `r` expanded to 0/1 floats.
    pub fn mask_row_f32(&self, r: usize) -> [f32; ACTIONS] {
        let mut out = [0.0; ACTIONS];
        for (a, o) in out.iter_mut().enumerate() {
            *o = f32::from(u8::from(self.masks[r] >> a & 1 == 1));
        }
        out
    }
}

impl Reservoir {
    /// An empty memory for `dim`-feature samples, seeded for replacement and
    /// sampling decisions.
    pub fn new(dim: usize, capacity: usize, seed: u64) -> Self {
        Self {
            dim,
            capacity,
            seen: 0,
            states: Vec::new(),
            targets: Vec::new(),
            masks: Vec::new(),
            iterations: Vec::new(),
            players: Vec::new(),
            first_open: Vec::new(),
            first_open_slots: Vec::new(),
            first_open_pos: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            log: ChangeLog {
                instance: Instance::next(),
                synced_len: 0,
                replaced: Vec::new(),
                all: false,
            },
        }
    }

    /// This reservoir's identity: unique in the process, and new for a
    /// clone.
    pub fn instance(&self) -> u64 {
        self.log.instance.0
    }

    /// The rows written since the previous call (since creation at the
    /// first), and a fresh log: a copy of the rows kept elsewhere stays in
    /// step by taking these.
    pub fn take_changes(&mut self) -> Changes {
        let len = self.len();
        let start = if self.log.all { 0 } else { self.log.synced_len };
        let mut replaced = std::mem::take(&mut self.log.replaced);
        replaced.retain(|&slot| (slot as usize) < start);
        replaced.sort_unstable();
        replaced.dedup();
        self.log.synced_len = len;
        self.log.all = false;
        Changes {
            instance: self.instance(),
            appended: start..len,
            replaced,
        }
    }

    /// Rows `range`'s stored values, contiguous: (states, targets, masks,
    /// iterations).
    pub fn rows(&self, range: Range<usize>) -> (&[f32], &[f32], &[u32], &[u32]) {
        (
            &self.states[range.start * self.dim..range.end * self.dim],
            &self.targets[range.start * ACTIONS..range.end * ACTIONS],
            &self.masks[range.clone()],
            &self.iterations[range],
        )
    }

    pub fn len(&self) -> usize {
        self.masks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.masks.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Additions so far, kept or not.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Stored samples flagged first-open.
    pub fn first_open_count(&self) -> usize {
        self.first_open_slots.len()
    }

    /// Adds a sample: appended while there is room, afterwards it replaces a
    /// uniformly drawn slot j ∈ [0, seen) when j < capacity.
    pub fn add(&mut self, s: SampleRef<'_>) -> Result<(), MemoryError> {
        if s.info_state.len() != self.dim {
            return Err(MemoryError::WrongDim {
                expected: self.dim,
                got: s.info_state.len(),
            });
        }
        self.seen += 1;
        if self.len() < self.capacity {
            self.states.extend_from_slice(s.info_state);
            self.targets.extend_from_slice(s.target);
            self.masks.push(s.mask);
            self.iterations.push(s.iteration);
            self.players.push(s.player);
            self.first_open.push(false);
            self.first_open_pos.push(u32::MAX);
            self.set_first_open(self.len() - 1, s.is_first_open);
            return Ok(());
        }
        let j = self.rng.random_range(0..self.seen);
        if let Ok(slot) = usize::try_from(j) {
            if slot < self.capacity {
                self.states[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(s.info_state);
                self.targets[slot * ACTIONS..(slot + 1) * ACTIONS].copy_from_slice(s.target);
                self.masks[slot] = s.mask;
                self.iterations[slot] = s.iteration;
                self.players[slot] = s.player;
                self.set_first_open(slot, s.is_first_open);
                self.log_replaced(slot);
            }
        }
        Ok(())
    }

    fn log_replaced(&mut self, slot: usize) {
        if self.log.all || slot >= self.log.synced_len {
            return;
        }
        if self.log.replaced.len() >= (self.len() / 4).max(16) {
            self.log.all = true;
            self.log.replaced = Vec::new();
            return;
        }
        self.log.replaced.push(slot as u32);
    }

    fn set_first_open(&mut self, slot: usize, flag: bool) {
        let was = self.first_open[slot];
        self.first_open[slot] = flag;
        if was == flag {
            return;
        }
        if flag {
            self.first_open_pos[slot] = self.first_open_slots.len() as u32;
            self.first_open_slots.push(slot as u32);
        } else {
            // Swap-remove keeps the index list dense in O(1).
            let pos = self.first_open_pos[slot] as usize;
            let last = self.first_open_slots.len() - 1;
            self.first_open_slots.swap(pos, last);
            let moved = self.first_open_slots[pos] as usize;
            self.first_open_pos[moved] = pos as u32;
            self.first_open_slots.pop();
            self.first_open_pos[slot] = u32::MAX;
        }
    }

    /// min(n, len) distinct slots drawn uniformly without replacement,
    /// copied into a batch.
    pub fn sample(&mut self, n: usize) -> Result<Batch, MemoryError> {
        let mut batch = Batch::default();
        self.sample_into(n, &mut batch)?;
        Ok(batch)
    }

    /// [`Reservoir::sample`] into `batch`, reusing its buffers: a training
    /// loop then allocates nothing per step (the same draws either way).
    pub fn sample_into(&mut self, n: usize, batch: &mut Batch) -> Result<(), MemoryError> {
        batch.clear();
        self.sample_append(n, batch)
    }

    /// One more draw of [`Reservoir::sample`], appended to the rows already
    /// in `batch`: `steps` calls leave the rows of `steps` consecutive
    /// [`Reservoir::sample_into`] batches end to end (the same draws in the
    /// same order), which a GPU copies to the device in one transfer.
    pub fn sample_append(&mut self, n: usize, batch: &mut Batch) -> Result<(), MemoryError> {
        let picks = self.draw(n)?;
        self.gather(picks.iter(), batch);
        Ok(())
    }

    /// The slots one [`Reservoir::sample`] draw picks (min(n, len), without
    /// replacement), appended to `slots`: the same draws as `sample_append`,
    /// for a copy of the rows that gathers them itself.
    pub fn draw_slots(&mut self, n: usize, slots: &mut Vec<u32>) -> Result<(), MemoryError> {
        slots.extend(self.draw(n)?.iter().map(|slot| slot as u32));
        Ok(())
    }

    /// The rows of `slots` (each below `len`), appended to `batch`.
    pub fn gather_append(&self, slots: &[u32], batch: &mut Batch) {
        self.gather(slots.iter().map(|&slot| slot as usize), batch);
    }

    /// One draw of min(n, len) distinct slots.
    fn draw(&mut self, n: usize) -> Result<index::IndexVec, MemoryError> {
        if self.is_empty() {
            return Err(MemoryError::Empty);
        }
        let len = self.len();
        Ok(index::sample(&mut self.rng, len, n.min(len)))
    }

    /// The rows of `slots`, appended to `batch`.
    fn gather(&self, slots: impl ExactSizeIterator<Item = usize>, batch: &mut Batch) {
        let k = slots.len();
        batch.rows += k;
        batch.dim = self.dim;
        batch.states.reserve(k * self.dim);
        batch.targets.reserve(k * ACTIONS);
        batch.masks.reserve(k);
        batch.iterations.reserve(k);
        for slot in slots {
            batch
                .states
                .extend_from_slice(&self.states[slot * self.dim..(slot + 1) * self.dim]);
            batch
                .targets
                .extend_from_slice(&self.targets[slot * ACTIONS..(slot + 1) * ACTIONS]);
            batch.masks.push(self.masks[slot]);
            batch.iterations.push(self.iterations[slot]);
        }
    }

    /// Slot `i`'s stored values (for tests and inspection).
    pub fn get(&self, i: usize) -> Option<SampleRef<'_>> {
        if i >= self.len() {
            return None;
        }
        let target: &[f32; ACTIONS] = self.targets[i * ACTIONS..(i + 1) * ACTIONS]
            .try_into()
            .ok()?;
        Some(SampleRef {
            info_state: &self.states[i * self.dim..(i + 1) * self.dim],
            target,
            mask: self.masks[i],
            iteration: self.iterations[i],
            player: self.players[i],
            is_first_open: self.first_open[i],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(m: &mut Reservoir, value: f32, first_open: bool) {
        let state = [value; 3];
        let target = [value; ACTIONS];
        m.add(SampleRef {
            info_state: &state,
            target: &target,
            mask: 0b101,
            iteration: value as u32,
            player: 0,
            is_first_open: first_open,
        })
        .unwrap();
    }

    #[test]
    fn keeps_capacity_and_counts_seen() {
        let mut m = Reservoir::new(3, 3, 7);
        for i in 0..10 {
            add(&mut m, i as f32, false);
        }
        assert_eq!(m.len(), 3);
        assert_eq!(m.seen(), 10);
        for i in 0..3 {
            let s = m.get(i).unwrap();
            assert_eq!(s.info_state[0] as u32, s.iteration);
            assert!(s.info_state.iter().all(|&x| x == s.info_state[0]));
        }
    }

    #[test]
    fn first_open_index_follows_replacement() {
        let mut m = Reservoir::new(3, 4, 11);
        for i in 0..200 {
            add(&mut m, i as f32, i % 3 == 0);
            let flagged = (0..m.len())
                .filter(|&j| m.get(j).unwrap().is_first_open)
                .count();
            assert_eq!(m.first_open_count(), flagged, "after {i} adds");
            for &slot in &m.first_open_slots {
                assert!(m.get(slot as usize).unwrap().is_first_open);
            }
        }
    }

    /// Sampling into a reused batch draws what `sample` draws and leaves
    /// nothing of the previous contents behind.
    #[test]
    fn sample_into_reuses_a_batch_and_draws_the_same() {
        let mut a = Reservoir::new(3, 50, 7);
        let mut b = Reservoir::new(3, 50, 7);
        for i in 0..40 {
            add(&mut a, i as f32, false);
            add(&mut b, i as f32, false);
        }
        let mut reused = Batch::default();
        for n in [16, 5, 40, 64] {
            b.sample_into(n, &mut reused).unwrap();
            assert_eq!(reused, a.sample(n).unwrap(), "n = {n}");
        }
        let mut empty = Reservoir::new(3, 5, 1);
        assert_eq!(empty.sample_into(2, &mut reused), Err(MemoryError::Empty));
    }

    /// Appended draws lay the batches of consecutive `sample_into` calls
    /// end to end: a GPU's one upload per chunk trains on the batches the
    /// CPU path trains on.
    #[test]
    fn appended_draws_are_the_consecutive_batches_end_to_end() {
        let mut a = Reservoir::new(3, 50, 9);
        let mut b = Reservoir::new(3, 50, 9);
        for i in 0..40 {
            add(&mut a, i as f32, false);
            add(&mut b, i as f32, false);
        }
        let mut end_to_end = Batch::default();
        let mut expected = Batch::default();
        for _ in 0..3 {
            b.sample_append(16, &mut end_to_end).unwrap();
            let one = a.sample(16).unwrap();
            expected.rows += one.rows;
            expected.dim = one.dim;
            expected.states.extend(one.states);
            expected.targets.extend(one.targets);
            expected.masks.extend(one.masks);
            expected.iterations.extend(one.iterations);
        }
        assert_eq!(end_to_end.rows, 48);
        assert_eq!(end_to_end, expected);
    }

    /// A copy that applies every `take_changes` holds the reservoir's rows,
    /// through appends, replacements (logged or, past the bound, all) and a
    /// clone, which is a reservoir of its own.
    #[test]
    fn a_copy_taking_the_changes_stays_in_step() {
        let mut m = Reservoir::new(3, 40, 5);
        let mut copy: Vec<f32> = Vec::new();
        let apply = |m: &mut Reservoir, copy: &mut Vec<f32>| {
            let ch = m.take_changes();
            copy.resize(m.len() * 3, f32::NAN);
            let (states, ..) = m.rows(ch.appended.clone());
            copy[ch.appended.start * 3..ch.appended.end * 3].copy_from_slice(states);
            for &slot in &ch.replaced {
                assert!((slot as usize) < ch.appended.start);
                let (row, ..) = m.rows(slot as usize..slot as usize + 1);
                copy[slot as usize * 3..slot as usize * 3 + 3].copy_from_slice(row);
            }
            ch
        };
        for round in 0..6 {
            for i in 0..(10 + 2_000 * (round / 5)) {
                add(&mut m, (100 * round + i) as f32, false);
            }
            let ch = apply(&mut m, &mut copy);
            let (states, ..) = m.rows(0..m.len());
            assert_eq!(copy, states, "round {round}");
            let sorted = ch.replaced.windows(2).all(|w| w[0] < w[1]);
            assert!(sorted, "round {round}: {:?}", ch.replaced);
            if round == 5 {
                // 2,000 replacements of 40 rows overflow the log: every row.
                assert_eq!(ch.appended, 0..40);
            }
        }
        let nothing = m.take_changes();
        assert_eq!((nothing.appended.len(), nothing.replaced.len()), (0, 0));
        let mut twin = m.clone();
        assert_ne!(twin.instance(), m.instance());
        assert_eq!(twin.take_changes().instance, twin.instance());
    }

    #[test]
    fn sampling_is_without_replacement_and_errors_when_empty() {
        let mut m = Reservoir::new(3, 10, 1);
        assert_eq!(m.sample(2), Err(MemoryError::Empty));
        for i in 0..4 {
            add(&mut m, i as f32, false);
        }
        // Oversampling returns every stored sample once.
        let b = m.sample(10).unwrap();
        assert_eq!(b.rows, 4);
        let mut its = b.iterations.clone();
        its.sort();
        assert_eq!(its, vec![0, 1, 2, 3]);
        assert_eq!(b.mask_row_f32(0)[..3], [1.0, 0.0, 1.0]);
        let b = m.sample(2).unwrap();
        assert_eq!(b.rows, 2);
        assert_ne!(b.iterations[0], b.iterations[1]);
        let wrong = m.add(SampleRef {
            info_state: &[0.0; 2],
            target: &[0.0; ACTIONS],
            mask: 0,
            iteration: 0,
            player: 0,
            is_first_open: false,
        });
        assert_eq!(
            wrong,
            Err(MemoryError::WrongDim {
                expected: 3,
                got: 2
            })
        );
    }

    #[test]
    fn reservoir_keeps_early_and_late_samples_alike() {
        // Over many seeds, each of 20 additions survives in a 5-slot memory
        // about 5/20 of the time, whether it came early or late.
        let mut early = 0;
        let mut late = 0;
        for seed in 0..400 {
            let mut m = Reservoir::new(3, 5, seed);
            for i in 0..20 {
                add(&mut m, i as f32, false);
            }
            for j in 0..5 {
                let it = m.get(j).unwrap().iteration;
                if it < 5 {
                    early += 1;
                } else if it >= 15 {
                    late += 1;
                }
            }
        }
        // Expected 400 · 5 · 5/20 = 500 each.
        assert!((400..600).contains(&early), "early {early}");
        assert!((400..600).contains(&late), "late {late}");
    }
}
