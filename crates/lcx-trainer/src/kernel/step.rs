//! lcx's CPU training step in the precision a run asked for: f32
//! ([`NativeTrainer`]) or bf16 mixed precision ([`Bf16Trainer`], AMP on a
//! CPU). The run loop holds one of these and does not care which.

use crate::kernel::bf16::Bf16Kernel;
use crate::kernel::bf16_train::Bf16Trainer;
use crate::kernel::native_train::{Loss, NativeTrainer};
use crate::nn::optim::{NetTrainer, StepOutcome, Weighting};
use crate::TrainerError;
use lcx_core::cfr::memory::Batch;

/// One network's state on lcx's kernel.
#[derive(Debug)]
pub enum LcxStep {
    F32(NativeTrainer),
    Bf16(Bf16Trainer),
}

impl LcxStep {
    /// `trainer`'s state copied for the f32 step, or for the bf16 step on
    /// `bf16`; `None` where lcx's kernel does not compute this network.
    pub fn load(
        trainer: &NetTrainer,
        bf16: Option<Bf16Kernel>,
        threads: usize,
    ) -> Result<Option<Self>, TrainerError> {
        Ok(match bf16 {
            Some(kernel) => Bf16Trainer::load(trainer, kernel, threads)?.map(LcxStep::Bf16),
            None => NativeTrainer::load(trainer, threads)?.map(LcxStep::F32),
        })
    }

    pub fn step(
        &mut self,
        batch: &Batch,
        loss: Loss,
        weighting: Weighting,
        current: u64,
        grad_clip: f64,
    ) -> Result<StepOutcome, TrainerError> {
        match self {
            LcxStep::F32(n) => n.step(batch, loss, weighting, current, grad_clip),
            LcxStep::Bf16(n) => n.step(batch, loss, weighting, current, grad_clip),
        }
    }

    pub fn store(&self, trainer: &mut NetTrainer) -> Result<(), TrainerError> {
        match self {
            LcxStep::F32(n) => n.store(trainer),
            LcxStep::Bf16(n) => n.store(trainer),
        }
    }
}
