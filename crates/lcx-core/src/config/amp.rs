//! What `run.use_amp` runs on a CPU (decision 0029), as one rule that the
//! trainer and `lcx run --dry-run` both read.

use super::{Activation, JitMode, TrainerConfig};

/// Why AMP on a CPU cannot be lcx's bf16 training step for `c` on this
/// host (and trains in fp32 instead), or `None` where it is.
pub fn cpu_amp_blocker(c: &TrainerConfig) -> Option<String> {
    const STEP: &str = "AMP on a CPU is lcx's bf16 training step";
    if !c.optimization.native_training {
        return Some(format!(
            "{STEP}, and optimization.native_training is off (libtorch's CPU autocast is not \
             reachable through tch)"
        ));
    }
    if std::env::var_os("LCX_NATIVE_KERNEL").is_some_and(|v| v == "off") {
        return Some(format!(
            "{STEP}, and LCX_NATIVE_KERNEL=off turns lcx's kernels off"
        ));
    }
    if !has_avx2_fma() {
        return Some(format!("{STEP}, which needs AVX2 and FMA"));
    }
    if c.network.activation != Activation::Relu || c.network.jit != JitMode::None {
        return Some(format!(
            "{STEP}, which trains eager ReLU networks only (network.activation = \"relu\", \
             network.jit = \"none\")"
        ));
    }
    None
}

/// Whether the CPU has AVX2 and FMA, which lcx's kernels need (asked here
/// rather than of `bench/`, a room above this one).
fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_that_keeps_amp_off_lcx_s_kernel_is_named() {
        let base = crate::config::load(None, &[]).unwrap();
        if has_avx2_fma() && std::env::var_os("LCX_NATIVE_KERNEL").is_none_or(|v| v != "off") {
            assert_eq!(cpu_amp_blocker(&base), None);
        }
        for (set, named) in [
            (
                "optimization.native_training=false",
                "optimization.native_training",
            ),
            ("network.activation=\"gelu\"", "eager ReLU"),
            ("network.jit=\"trace\"", "eager ReLU"),
        ] {
            let c = crate::config::load(None, &[set.to_string()]).unwrap();
            let why = cpu_amp_blocker(&c).expect(set);
            assert!(why.contains(named) || !has_avx2_fma(), "{set}: {why}");
        }
    }
}
