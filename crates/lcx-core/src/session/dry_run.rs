//! What `lcx run --dry-run` prints, from the plan alone: nothing runs and
//! nothing is written.

use crate::experiment::plan::{self, Plan};
use crate::experiment::revision::Planned;
use crate::experiment::{Order, Requirement};

/// What this host can run, for [`dry_run_text`]'s summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCan {
    /// Whether the lcx that runs the cells sees a CUDA device (`None`:
    /// not asked, or it did not say).
    pub cuda: Option<bool>,
}

/// `arm`'s resolved config where the arm asks for AMP (`run.use_amp`, or
/// `--amp` to a bench).
fn amp_config(arm: &plan::Arm) -> Option<crate::config::TrainerConfig> {
    let text = arm.config_toml.as_deref()?;
    let config = crate::config::from_toml_str(text, &arm.name, &[]).ok()?;
    (config.run.use_amp || arm.args.iter().any(|a| a == "--amp")).then_some(config)
}

/// Whether what [`on_this_host`] says of `arm` depends on [`HostCan::cuda`]:
/// it requires CUDA, or asks for AMP on `run.device = "auto"`. Only then is
/// the lcx that runs the cells asked (`lcx version --json` loads libtorch).
pub fn asks_about_cuda(arm: &plan::Arm) -> bool {
    arm.requires.is_some()
        || amp_config(arm).is_some_and(|c| c.run.device == crate::config::DeviceSpec::Auto)
}

/// What a cell of `arm` does on this host, where that is not simply "runs
/// as asked": skipped (it requires CUDA), or AMP in another form (bf16 on
/// a CPU, or fp32 with the reason).
pub fn on_this_host(arm: &plan::Arm, host: HostCan) -> Option<String> {
    if arm.requires == Some(Requirement::Cuda) {
        return match host.cuda {
            Some(true) => None,
            Some(false) => Some("skipped: requires CUDA, and no CUDA device is available".into()),
            None => {
                Some("requires CUDA: skipped if `lcx version --json` sees no CUDA device".into())
            }
        };
    }
    let config = amp_config(arm)?;
    let on_cuda = match config.run.device {
        crate::config::DeviceSpec::Cpu => false,
        crate::config::DeviceSpec::Auto => host.cuda == Some(true),
        _ => true,
    };
    Some(if on_cuda {
        "AMP as fp16 autocast with a grad scaler on CUDA".into()
    } else {
        match crate::config::amp::cpu_amp_blocker(&config) {
            None => "AMP on the CPU: bf16 on lcx's kernel (decision 0029)".into(),
            Some(why) => format!("AMP requested, runs fp32: {why}"),
        }
    })
}

/// What `lcx run --dry-run` prints: what this host will run, skip or run
/// in another precision (and why), the cells, each arm's environment and
/// revision, the Slurm flags and the builds it would make; with `verbose`,
/// each arm's resolved config too.
pub fn dry_run_text(plan: &Plan, builds: &[Planned], host: HostCan, verbose: bool) -> String {
    use crate::text::counted;
    use std::fmt::Write as _;
    let mut out = String::new();
    // Writing to a String cannot fail.
    let mut line = |text: String| {
        let _ = writeln!(out, "{text}");
    };
    line(format!(
        "experiment `{}` ({}): {} × {}, {} ({} warm-up), {} order, baseline `{}`",
        plan.name,
        plan.workload.as_str(),
        counted(plan.arms.len() as u64, "arm"),
        counted(u64::from(plan.repeats), "repeat"),
        counted(u64::from(plan.iterations), "iteration"),
        plan.warmup,
        match plan.order {
            Order::Interleaved => "interleaved".to_string(),
            Order::Sequential => "sequential".to_string(),
            Order::Randomized => format!("randomized (seed {})", plan.order_seed),
        },
        plan.baseline
    ));
    if let Some(sweep) = &plan.sweep {
        match sweep_heading(plan, sweep) {
            Some(text) => line(text),
            None => return out,
        }
    }
    let cells = plan.cells();
    for text in host_summary(plan, host, cells.len()) {
        line(text);
    }
    for (i, cell) in cells.into_iter().enumerate() {
        let arm = &plan.arms[cell.arm];
        let requires = match arm.requires {
            Some(Requirement::Cuda) => " (requires cuda)",
            None => "",
        };
        let point = match (&plan.sweep, &arm.sweep) {
            (Some(sweep), Some(at)) => format!(" [{} at {}]", at.arm, sweep.label(&at.values)),
            _ => String::new(),
        };
        line(format!(
            "cell {}: {}{point} #{} — {}{requires}",
            i + 1,
            arm.name,
            cell.repeat,
            shell_words(&arm.command_line())
        ));
        for (k, v) in &arm.env {
            line(format!("    env {k}={v}"));
        }
        if let Some(b) = builds.iter().find(|b| b.arm == arm.name) {
            line(format!("    at revision {}", b.revision.describe()));
        }
        if let (Some(_), Some(sha)) = (arm.stdin_config(), &arm.config_sha256) {
            let short: String = sha.chars().take(12).collect();
            line(format!(
                "    stdin: the resolved config of arm `{}` (sha256 {short}…)",
                arm.name
            ));
        }
    }
    if let plan::Executor::Slurm(slurm) = &plan.executor {
        line(format!(
            "\nexecutor: slurm, placement {}",
            match slurm.placement {
                plan::Placement::SameNode => "same-node",
                plan::Placement::Spread => "spread",
                plan::Placement::Any => "any",
            }
        ));
        for arm in &plan.arms {
            let options = slurm.for_arm(&arm.slurm);
            let mut flags = options.sbatch.flags();
            if arm.requires == Some(Requirement::Cuda) && options.sbatch.gres.is_none() {
                flags.push("--gres=gpu:1".into());
            }
            line(format!(
                "  arm `{}`: sbatch {}",
                arm.name,
                shell_words(&flags)
            ));
        }
    }
    if let Some(first) = builds.first() {
        line(format!(
            "\nrevisions (build cache {}):",
            first
                .entry
                .parent()
                .map_or_else(String::new, |p| p.display().to_string())
        ));
        for b in builds {
            let what = if b.cached {
                "cached".to_string()
            } else if b.command.is_empty() {
                "would check out (nothing to build)".to_string()
            } else {
                format!("would build with `{}`", b.command)
            };
            line(format!(
                "  {} (arm `{}`): {what}",
                b.revision.describe(),
                b.arm
            ));
        }
    }
    for arm in &plan.arms {
        if arm.revision.is_some() && arm.config_toml.is_none() {
            line(format!(
                "\n# arm `{}`: its config is resolved by its revision's own lcx once built (set: {})",
                arm.name,
                arm.revision
                    .as_ref()
                    .map_or_else(String::new, |r| r.config_sets.join(" "))
            ));
        }
        if let Some(config) = &arm.config_toml {
            if verbose {
                line(format!("\n# resolved config of arm `{}`", arm.name));
                line(config.clone());
            }
        }
    }
    let configs = plan.arms.iter().filter(|a| a.config_toml.is_some()).count();
    if configs > 0 && !verbose {
        line(format!(
            "\n(the resolved configs of {}: add --verbose)",
            counted(configs as u64, "arm")
        ));
    }
    out
}

/// The line that says what a sweep runs: its axis, points and what each
/// is compared with; `None` without an axis to run along.
fn sweep_heading(plan: &Plan, sweep: &plan::Sweep) -> Option<String> {
    use crate::text::counted;
    let points = sweep.points();
    let along = sweep.along_axis()?;
    let compared = if plan.sweeps_one_arm() {
        format!(
            "each point compared with {} {}",
            along.short,
            along.values.first().map_or("", String::as_str)
        )
    } else {
        format!(
            "each arm compared with `{}` at the same point",
            plan.baseline
        )
    };
    Some(format!(
        "sweep along `{}`: {} ({}), {compared}",
        along.key,
        counted(points.len() as u64, "point"),
        sweep
            .axes
            .iter()
            .map(|a| format!("{} {}", a.key, a.values.join("/")))
            .collect::<Vec<_>>()
            .join(" × "),
    ))
}

/// The dry run's first lines after its heading: how many cells and arms
/// run on this host, and each note of [`on_this_host`] once, with the arms
/// it holds for.
fn host_summary(plan: &Plan, host: HostCan, cells: usize) -> Vec<String> {
    use crate::text::counted;
    let mut out = Vec::new();
    // Each note once, with the arms it holds for, in arm order.
    let mut notes: Vec<(String, Vec<&str>)> = Vec::new();
    let (mut skipped, mut fp32) = (0, 0);
    for arm in &plan.arms {
        let Some(note) = on_this_host(arm, host) else {
            continue;
        };
        skipped += usize::from(note.starts_with("skipped"));
        fp32 += usize::from(note.starts_with("AMP requested, runs fp32"));
        match notes.iter_mut().find(|(n, _)| *n == note) {
            Some((_, arms)) => arms.push(&arm.name),
            None => notes.push((note, vec![&arm.name])),
        }
    }
    let mut head = format!(
        "on this host: {}, {} of {} run",
        counted(cells as u64, "cell"),
        plan.arms.len() - skipped,
        counted(plan.arms.len() as u64, "arm")
    );
    if skipped > 0 {
        head.push_str(&format!(", {skipped} skipped"));
    }
    if fp32 > 0 {
        head.push_str(&format!(", {fp32} in fp32 where AMP was asked for"));
    }
    out.push(head);
    for (note, arms) in &notes {
        let arms: Vec<String> = arms.iter().map(|a| format!("`{a}`")).collect();
        out.push(format!("  - {}: {note}", arms.join(", ")));
    }
    out
}

/// Quotes argv for display so it can be pasted into a shell.
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::experiment::plan::{from_str, Overrides};

    #[test]
    fn the_dry_run_shows_each_cell_as_a_shell_would_take_it() {
        let text = "name = \"s\"\nworkload = \"command\"\niterations = 1\n\
                    [[arms]]\nname = \"a\"\ncommand = 'echo \"{\\\"t\\\": 1}\"'\n\
                    env = { K = \"v\" }\n";
        let plan = from_str(text, Path::new("s.toml"), &Overrides::default()).unwrap();
        let text = dry_run_text(&plan, &[], HostCan::default(), false);
        assert!(
            text.starts_with("experiment `s` (command): 1 arm × 1 repeat"),
            "{text}"
        );
        assert!(
            text.contains(r#"cell 1: a #1 — sh -c 'echo "{\"t\": 1}"'"#),
            "{text}"
        );
        assert!(text.contains("    env K=v\n"), "{text}");
        assert_eq!(
            shell_words(&["a b".into(), "it's".into(), "x=1".into()]),
            r#"'a b' 'it'\''s' x=1"#
        );
    }
}
