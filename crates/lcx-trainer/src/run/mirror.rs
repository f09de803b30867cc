//! A GPU's copy of one reservoir memory (`memory.on_device`): kept in step
//! with the rows each iteration wrote ([`Reservoir::take_changes`]) and
//! gathered from on the device, so that a training step's batch crosses the
//! bus as its row indices only. The host still draws the slots, with the
//! reservoir's own generator: a GPU arm trains on the batches a CPU arm
//! draws.

use tch::{Device, Kind, Tensor};

use crate::TrainerError;
use lcx_core::cfr::memory::{Batch, Reservoir};
use lcx_core::cfr::regret::ACTIONS;

/// The reservoir's rows on the device, the first `rows` of each buffer.
pub(crate) struct DeviceMirror {
    /// The reservoir this copy follows (0: none yet).
    instance: u64,
    rows: usize,
    dim: usize,
    device: Device,
    /// [capacity, dim] f32, [capacity, ACTIONS] f32, [capacity] i32 (the
    /// legal masks' bits), [capacity] i64.
    states: Tensor,
    targets: Tensor,
    masks: Tensor,
    iterations: Tensor,
}

impl std::fmt::Debug for DeviceMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMirror")
            .field("rows", &self.rows)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

/// A batch's tensors on the device: `x` [steps, rows, dim], `y` and the 0/1
/// legal mask `m` [steps, rows, ACTIONS], the iterations `it` [steps, rows].
pub(crate) struct Batches {
    pub x: Tensor,
    pub y: Tensor,
    pub m: Tensor,
    pub it: Tensor,
}

impl Batches {
    /// Step `s`'s batch (views: no copy, no kernel).
    pub fn step(&self, s: i64) -> Result<(Tensor, Tensor, Tensor, Tensor), TrainerError> {
        Ok((
            self.x.f_select(0, s)?,
            self.y.f_select(0, s)?,
            self.m.f_select(0, s)?,
            self.it.f_select(0, s)?,
        ))
    }
}

/// 0/1 floats [..., ACTIONS] from legal masks' bits (i32 [...]), on their
/// device.
pub(crate) fn expand_masks(bits: &Tensor) -> Result<Tensor, TrainerError> {
    let shifts = Tensor::f_arange(ACTIONS as i64, (Kind::Int, bits.device()))?;
    Ok(bits
        .f_unsqueeze(-1)?
        .f_bitwise_right_shift(&shifts)?
        .f_bitwise_and(1)?
        .f_to_kind(Kind::Float)?)
}

/// Host values of a reservoir's rows as tensors on `device` (asynchronous
/// copies from pageable memory: CUDA stages them before the call returns).
fn upload(
    states: &[f32],
    targets: &[f32],
    masks: &[u32],
    iterations: &[u32],
    dim: usize,
    device: Device,
) -> Result<[Tensor; 4], TrainerError> {
    let rows = masks.len() as i64;
    let to = |t: Tensor| -> Result<Tensor, TrainerError> {
        let kind = t.kind();
        Ok(t.f_to_device_(device, kind, true, false)?)
    };
    // A mask holds ACTIONS (22) bits, so it fits an i32 as it is.
    let bits: Vec<i32> = masks.iter().map(|&m| m as i32).collect();
    let its: Vec<i64> = iterations.iter().map(|&i| i64::from(i)).collect();
    Ok([
        to(Tensor::f_from_slice(states)?.f_view([rows, dim as i64])?)?,
        to(Tensor::f_from_slice(targets)?.f_view([rows, ACTIONS as i64])?)?,
        to(Tensor::f_from_slice(&bits)?)?,
        to(Tensor::f_from_slice(&its)?)?,
    ])
}

/// [`upload`] of a batch's rows, shaped [steps, rows, ...], with the masks
/// expanded: the batches of a chunk of steps drawn on the host.
pub(crate) fn upload_batches(
    host: &Batch,
    steps: usize,
    rows: usize,
    device: Device,
) -> Result<Batches, TrainerError> {
    let [x, y, bits, it] = upload(
        &host.states,
        &host.targets,
        &host.masks,
        &host.iterations,
        host.dim,
        device,
    )?;
    let (s, r) = (steps as i64, rows as i64);
    Ok(Batches {
        x: x.f_view([s, r, host.dim as i64])?,
        y: y.f_view([s, r, ACTIONS as i64])?,
        m: expand_masks(&bits.f_view([s, r])?)?,
        it: it.f_view([s, r])?,
    })
}

impl DeviceMirror {
    /// An empty copy for `dim`-feature rows on `device`; it allocates on
    /// its first [`DeviceMirror::sync`].
    pub fn new(dim: usize, device: Device) -> Result<Self, TrainerError> {
        let empty = |cols: Option<usize>, kind: Kind| -> Result<Tensor, TrainerError> {
            let shape: Vec<i64> = cols.map_or(vec![0], |c| vec![0, c as i64]);
            Ok(Tensor::f_zeros(shape.as_slice(), (kind, device))?)
        };
        Ok(Self {
            instance: 0,
            rows: 0,
            dim,
            device,
            states: empty(Some(dim), Kind::Float)?,
            targets: empty(Some(ACTIONS), Kind::Float)?,
            masks: empty(None, Kind::Int)?,
            iterations: empty(None, Kind::Int64)?,
        })
    }

    /// Rows held.
    #[cfg(test)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Brings the copy in step with `mem`: the rows it appended and the
    /// slots it replaced since the last sync, or every row when the copy
    /// followed another reservoir (or none) until now.
    pub fn sync(&mut self, mem: &mut Reservoir) -> Result<(), TrainerError> {
        let changes = mem.take_changes();
        let (appended, replaced) = if changes.instance == self.instance {
            (changes.appended, changes.replaced)
        } else {
            self.instance = changes.instance;
            self.rows = 0;
            (0..mem.len(), Vec::new())
        };
        self.reserve(mem.len(), mem.capacity())?;
        if !appended.is_empty() {
            let (states, targets, masks, its) = mem.rows(appended.clone());
            let rows = upload(states, targets, masks, its, self.dim, self.device)?;
            let (start, n) = (appended.start as i64, appended.len() as i64);
            for (dst, src) in self.buffers().into_iter().zip(rows) {
                dst.f_narrow(0, start, n)?.f_copy_(&src)?;
            }
        }
        if !replaced.is_empty() {
            let mut rows = Batch::default();
            mem.gather_append(&replaced, &mut rows);
            let values = upload(
                &rows.states,
                &rows.targets,
                &rows.masks,
                &rows.iterations,
                self.dim,
                self.device,
            )?;
            let slots: Vec<i64> = replaced.iter().map(|&s| i64::from(s)).collect();
            let slots = Tensor::f_from_slice(&slots)?.f_to_device(self.device)?;
            for (mut dst, src) in self.buffers().into_iter().zip(values) {
                let _ = dst.f_index_copy_(0, &slots, &src)?;
            }
        }
        self.rows = mem.len();
        Ok(())
    }

    /// Shallow handles to the four buffers, in [`upload`]'s order.
    fn buffers(&self) -> [Tensor; 4] {
        [
            self.states.shallow_clone(),
            self.targets.shallow_clone(),
            self.masks.shallow_clone(),
            self.iterations.shallow_clone(),
        ]
    }

    /// Room for `rows` rows: a buffer that must grow doubles (up to the
    /// reservoir's `capacity`), keeping the rows in step.
    fn reserve(&mut self, rows: usize, capacity: usize) -> Result<(), TrainerError> {
        let have = self.states.size()[0] as usize;
        if rows <= have {
            return Ok(());
        }
        let want = (2 * have).max(rows).min(capacity.max(rows)) as i64;
        let keep = self.rows as i64;
        let grow = |old: &Tensor| -> Result<Tensor, TrainerError> {
            let mut shape = old.size();
            shape[0] = want;
            let new = Tensor::f_zeros(shape.as_slice(), (old.kind(), self.device))?;
            if keep > 0 {
                new.f_narrow(0, 0, keep)?
                    .f_copy_(&old.f_narrow(0, 0, keep)?)?;
            }
            Ok(new)
        };
        self.states = grow(&self.states)?;
        self.targets = grow(&self.targets)?;
        self.masks = grow(&self.masks)?;
        self.iterations = grow(&self.iterations)?;
        Ok(())
    }

    /// The rows of `slots` (`steps` batches of `rows` slots end to end,
    /// each below [`DeviceMirror::rows`]) gathered on the device.
    pub fn gather(
        &self,
        slots: &[u32],
        steps: usize,
        rows: usize,
    ) -> Result<Batches, TrainerError> {
        let idx: Vec<i64> = slots.iter().map(|&s| i64::from(s)).collect();
        let idx =
            Tensor::f_from_slice(&idx)?.f_to_device_(self.device, Kind::Int64, true, false)?;
        let (s, r) = (steps as i64, rows as i64);
        Ok(Batches {
            x: self
                .states
                .f_index_select(0, &idx)?
                .f_view([s, r, self.dim as i64])?,
            y: self
                .targets
                .f_index_select(0, &idx)?
                .f_view([s, r, ACTIONS as i64])?,
            m: expand_masks(&self.masks.f_index_select(0, &idx)?.f_view([s, r])?)?,
            it: self.iterations.f_index_select(0, &idx)?.f_view([s, r])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcx_core::cfr::memory::SampleRef;

    fn add(m: &mut Reservoir, value: f32) {
        let state = [value; 5];
        let mut target = [0.0; ACTIONS];
        target[0] = value;
        m.add(SampleRef {
            info_state: &state,
            target: &target,
            mask: (value as u32) & 0x3f_ffff | 1,
            iteration: value as u32,
            player: 0,
            is_first_open: false,
        })
        .unwrap();
    }

    /// Gathering from the copy gives the batches the host copies out of the
    /// reservoir, through growth, appends, replacements and a new reservoir.
    #[test]
    fn the_copy_gathers_what_the_host_samples() {
        let mut mem = Reservoir::new(5, 300, 3);
        let mut mirror = DeviceMirror::new(5, Device::Cpu).unwrap();
        let mut twin = mem.clone();
        let mut logged = false;
        // Filling, full with a few replacements (listed), another
        // reservoir, then many replacements (past the list's bound).
        for (round, adds) in [20, 140, 150, 30, 500].into_iter().enumerate() {
            for i in 0..adds {
                let v = (1000 * round + i) as f32;
                add(&mut mem, v);
                add(&mut twin, v);
            }
            if round == 3 {
                // Another reservoir: the copy starts over from its rows.
                mem = twin.clone();
            }
            logged |= !mem.clone().take_changes().replaced.is_empty();
            mirror.sync(&mut mem).unwrap();
            assert_eq!(mirror.rows(), mem.len());
            let mut slots = Vec::new();
            let mut host = Batch::default();
            let mut probe = mem.clone();
            for _ in 0..3 {
                probe.draw_slots(8, &mut slots).unwrap();
            }
            mem.gather_append(&slots, &mut host);
            let rows = 8.min(mem.len());
            let got = mirror.gather(&slots, 3, rows).unwrap();
            let want = upload_batches(&host, 3, rows, Device::Cpu).unwrap();
            for (a, b) in [
                (&got.x, &want.x),
                (&got.y, &want.y),
                (&got.m, &want.m),
                (&got.it, &want.it),
            ] {
                assert!(a.equal(b), "round {round}");
            }
        }
        assert!(logged, "no sync took listed replacements");
    }
}
