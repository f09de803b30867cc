//! An arm's `setup`, `prepare` and `cleanup` commands: run on the runner's
//! host around the arm's cells, never inside a cell's recorded time.
//!
//! `setup` runs once, before the arm's first cell of this invocation;
//! `prepare` before each cell; `cleanup` once at the end for every arm that
//! had a cell, also after a stop (Ctrl-C) or a failed setup. A hook runs in
//! its own process group that dies with the runner (as a cell does), with
//! the cell's environment, and is killed at the arm's `timeout` or a stop.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cell::{process_env, CellInfo};
use super::local::describe_exit;
use super::output::collect_tail;
use super::stop::{signal_group, StopSignal};
use crate::experiment::group::{self, GroupReaper};
use crate::experiment::plan::{Arm, Plan};

/// Which hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    Setup,
    Prepare,
    Cleanup,
}

impl Hook {
    fn key(self) -> &'static str {
        match self {
            Hook::Setup => "setup",
            Hook::Prepare => "prepare",
            Hook::Cleanup => "cleanup",
        }
    }

    fn argv(self, arm: &Arm) -> Option<&Vec<String>> {
        arm.hooks.get(self.key())
    }
}

/// Runs `arm`'s `hook`, if it has one, to its end. `Err` says why it
/// failed, in a form a cell's error can carry ("prepare `make warm`
/// exited with exit code 2: no rule to make target").
pub(crate) fn run_hook(
    plan: &Plan,
    arm: &Arm,
    hook: Hook,
    info: &CellInfo,
    stop: &Arc<StopSignal>,
) -> Result<(), String> {
    let Some(argv) = hook.argv(arm) else {
        return Ok(());
    };
    let shown = shown(argv);
    let failed = |how: String| format!("{} {shown} {how}", hook.key());
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| failed("is empty".into()))?;
    let mut env: BTreeMap<String, String> = process_env(plan, arm, info, None);
    env.insert("LCX_HOOK".into(), hook.key().into());
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &arm.workdir {
        command.current_dir(dir);
    }
    group::own_group_dying_with_us(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| failed(format!("could not start: {e}")))?;
    let group = child.id() as i32;
    let reaper = GroupReaper::spawn(group);
    // A setup or prepare ends with the run; the cleanup a stopped run owes
    // runs anyway (a further Ctrl-C still reaches it).
    let owed = hook == Hook::Cleanup;
    if owed {
        stop.set_child_after_stop(group);
    } else {
        stop.set_child(group);
    }
    // Both streams into one tail: a hook's error may go to either.
    let out = child.stdout.take().map(collect_tail);
    let err = child.stderr.take().map(collect_tail);
    let started = Instant::now();
    let timeout = arm.timeout();
    let mut killed: Option<String> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if killed.is_none() {
            if stop.is_stopped() && !owed {
                killed = Some("was stopped (the run was interrupted)".into());
            } else if let Some(limit) = timeout.filter(|t| started.elapsed() >= *t) {
                killed = Some(format!(
                    "timed out after {} (the arm's `timeout`)",
                    crate::text::duration_words(limit)
                ));
            }
            if killed.is_some() {
                signal_group(group, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    stop.clear_child();
    // What the hook left running in its group goes with it.
    signal_group(group, libc::SIGKILL);
    drop(reaper);
    let mut last = None;
    for (tail, handle) in [err, out].into_iter().flatten() {
        let _ = handle.join();
        if last.is_none() {
            last = tail
                .lock()
                .ok()
                .and_then(|t| t.last_line().map(str::to_string));
        }
    }
    if let Some(why) = killed {
        return Err(failed(why));
    }
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => {
            let (_, _, how) = describe_exit(&status);
            Err(failed(match last {
                Some(line) => format!("exited with {how}: {line}"),
                None => format!("exited with {how}"),
            }))
        }
        Err(e) => Err(failed(format!("could not be waited for: {e}"))),
    }
}

/// The argv as the user wrote it: a shell string as itself, an array
/// joined by spaces, in backticks.
fn shown(argv: &[String]) -> String {
    match argv {
        [sh, c, script] if sh == "sh" && c == "-c" => format!("`{script}`"),
        _ => format!("`{}`", argv.join(" ")),
    }
}

/// An invocation's hooks: which arms' setups ran and how they went, so
/// that each runs once and each such arm is cleaned up at the end, also
/// when the schedule ends early with an error (then on drop, its warnings
/// on stderr).
pub(crate) struct ArmHooks<'p> {
    plan: &'p Plan,
    stop: Arc<StopSignal>,
    /// Arm index → (the first cell it ran for, its setup's result).
    started: BTreeMap<usize, (CellInfo, Result<(), String>)>,
}

impl<'p> ArmHooks<'p> {
    pub(crate) fn new(plan: &'p Plan, stop: &Arc<StopSignal>) -> Self {
        ArmHooks {
            plan,
            stop: Arc::clone(stop),
            started: BTreeMap::new(),
        }
    }

    /// What must run before a cell of `arm_index`: the arm's setup before
    /// its first cell of this invocation (later cells get the first one's
    /// result: a failed setup fails them all), then its prepare.
    pub(crate) fn before_cell(&mut self, arm_index: usize, info: &CellInfo) -> Result<(), String> {
        let (plan, stop) = (self.plan, &self.stop);
        let arm = &plan.arms[arm_index];
        self.started
            .entry(arm_index)
            .or_insert_with(|| (info.clone(), run_hook(plan, arm, Hook::Setup, info, stop)))
            .1
            .clone()?;
        run_hook(plan, arm, Hook::Prepare, info, stop)
    }

    /// Every started arm's cleanup, in plan order; failures go to `warn`
    /// (the cells' records stand). Runs after a stop too.
    pub(crate) fn finish(mut self, warn: &mut dyn FnMut(&CellInfo, String)) {
        self.cleanup(warn);
    }

    fn cleanup(&mut self, warn: &mut dyn FnMut(&CellInfo, String)) {
        for (arm_index, (info, _)) in std::mem::take(&mut self.started) {
            let arm = &self.plan.arms[arm_index];
            if let Err(message) = run_hook(self.plan, arm, Hook::Cleanup, &info, &self.stop) {
                warn(&info, message);
            }
        }
    }
}

impl Drop for ArmHooks<'_> {
    fn drop(&mut self) {
        self.cleanup(&mut |_, message| eprintln!("lcx: warning: {message}"));
    }
}
