//! Checkpoints (docs/deep-cfr.md §8.6): the three networks and their AdamW states in one
//! safetensors file, plus a JSON sidecar with the iteration and the config.
//! Both are written to a temporary name and renamed, so an interrupted save
//! leaves the previous checkpoint whole.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::nn::optim::NetTrainer;
use crate::TrainerError;

/// The JSON sidecar.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckpointMeta {
    pub iteration: u64,
    pub input_dim: usize,
    pub action_size: usize,
    /// What a resume restores: memories, RNGs and the scaler start fresh.
    pub resume_semantics: String,
    /// The resolved trainer config, as TOML.
    pub config: String,
    pub lcx_version: String,
}

/// Errors of checkpoint files.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(transparent)]
    Torch(#[from] TrainerError),
}

fn tensors_of(prefix: &str, t: &NetTrainer, out: &mut Vec<(String, Tensor)>) {
    let mut vars: Vec<(String, Tensor)> = t.vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, tensor) in vars {
        out.push((format!("{prefix}/{name}"), tensor));
    }
    for (i, (m, v)) in t.opt.moments.iter().enumerate() {
        out.push((format!("{prefix}/adamw/m{i}"), m.shallow_clone()));
        out.push((format!("{prefix}/adamw/v{i}"), v.shallow_clone()));
    }
    out.push((
        format!("{prefix}/adamw/step"),
        Tensor::from_slice(&[t.opt.step]),
    ));
}

/// The two files of checkpoint `stem` (e.g. `latest`) in `dir`.
pub fn paths(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{stem}.safetensors")),
        dir.join(format!("{stem}.json")),
    )
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `<stem>.safetensors` and `<stem>.json` atomically.
pub fn save(
    dir: &Path,
    stem: &str,
    nets: [&NetTrainer; 3],
    meta: &CheckpointMeta,
) -> Result<(), CheckpointError> {
    let (weights, sidecar) = paths(dir, stem);
    let mut tensors = Vec::new();
    for (prefix, net) in ["adv0", "adv1", "strategy"].iter().zip(nets) {
        tensors_of(prefix, net, &mut tensors);
    }
    let tmp = dir.join(format!(".{stem}.safetensors.tmp"));
    Tensor::write_safetensors(&tensors, &tmp).map_err(TrainerError::from)?;
    std::fs::rename(&tmp, &weights).map_err(io(&weights))?;
    let json = serde_json::to_string_pretty(meta).map_err(|e| CheckpointError::Invalid {
        path: sidecar.clone(),
        message: e.to_string(),
    })?;
    let tmp = dir.join(format!(".{stem}.json.tmp"));
    std::fs::write(&tmp, json).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &sidecar).map_err(io(&sidecar))?;
    Ok(())
}

/// Reads a sidecar given either file of a checkpoint (or its stem path).
pub fn read_meta(path: &Path) -> Result<(CheckpointMeta, PathBuf), CheckpointError> {
    let weights = path.with_extension("safetensors");
    let sidecar = path.with_extension("json");
    let text = std::fs::read_to_string(&sidecar).map_err(io(&sidecar))?;
    let meta = serde_json::from_str(&text).map_err(|e| CheckpointError::Invalid {
        path: sidecar.clone(),
        message: format!("not a checkpoint sidecar: {e}"),
    })?;
    Ok((meta, weights))
}

/// Copies the checkpoint's tensors into `nets` (same shapes required).
pub fn load_into(weights: &Path, nets: [&mut NetTrainer; 3]) -> Result<(), CheckpointError> {
    let tensors = Tensor::read_safetensors(weights).map_err(TrainerError::from)?;
    let map: std::collections::HashMap<String, Tensor> = tensors.into_iter().collect();
    let invalid = |message: String| CheckpointError::Invalid {
        path: weights.to_path_buf(),
        message,
    };
    let _guard = tch::no_grad_guard();
    for (prefix, net) in ["adv0", "adv1", "strategy"].iter().zip(nets) {
        let mut names: Vec<(String, Tensor)> = net.vs.variables().into_iter().collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, mut var) in names {
            let key = format!("{prefix}/{name}");
            let src = map
                .get(&key)
                .ok_or_else(|| invalid(format!("missing tensor {key}")))?;
            if src.size() != var.size() {
                return Err(invalid(format!(
                    "{key} has shape {:?}, the config needs {:?}",
                    src.size(),
                    var.size()
                )));
            }
            var.f_copy_(src).map_err(TrainerError::from)?;
        }
        for (i, (m, v)) in net.opt.moments.iter_mut().enumerate() {
            for (tag, dst) in [("m", m), ("v", v)] {
                let key = format!("{prefix}/adamw/{tag}{i}");
                let src = map
                    .get(&key)
                    .ok_or_else(|| invalid(format!("missing tensor {key}")))?;
                dst.f_copy_(src).map_err(TrainerError::from)?;
            }
        }
        let key = format!("{prefix}/adamw/step");
        let step = map
            .get(&key)
            .ok_or_else(|| invalid(format!("missing tensor {key}")))?;
        net.opt.step = i64::try_from(step).map_err(TrainerError::from)?;
    }
    Ok(())
}
