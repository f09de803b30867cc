//! The local executor: a cell as a child process of the runner, in its own
//! process group (a terminal's Ctrl-C reaches only the runner), killed
//! with the runner however it dies (PR_SET_PDEATHSIG for the child, a
//! forked watchdog for what the child started).

use std::io::BufReader;
use std::process::{Command, Stdio};
use std::sync::Arc;

use super::cell::{process_env, Cell, CellInfo, End, Reporter};
use super::executor::{Adopt, Executor, Launched, Msg, Place, StderrSource, CHANNEL_LINES};
use super::output::{self, collect_tail, LineRead};
use super::stop::signal_group;
use super::RunnerError;
use crate::experiment::group::{self, GroupReaper};
use crate::system::affinity;
use crate::system::proc::wait_with_usage;
use crate::system::Root;

/// Cells as child processes on this machine.
pub(crate) struct Local;

impl Executor for Local {
    fn job_dir(
        &self,
        _: &CellInfo,
        _: Option<&Adopt>,
    ) -> Result<Option<std::path::PathBuf>, RunnerError> {
        Ok(None)
    }

    fn launch(
        &self,
        cell: &Cell<'_>,
        _: Place<'_>,
        _: &mut dyn Reporter,
    ) -> Result<Launched, String> {
        launch(cell)
    }
}

/// Starts a cell as a child process of this runner, in its own process
/// group, with a watchdog that kills the group if the runner dies.
fn launch(cell: &Cell<'_>) -> Result<Launched, String> {
    let Cell {
        plan,
        arm,
        info,
        options,
        program,
        cell_dir,
        job_dir: _,
    } = *cell;
    let mut command = Command::new(program);
    command
        .args(&arm.args)
        .envs(process_env(plan, arm, info, cell_dir))
        .stdin(if arm.stdin_config().is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &arm.workdir {
        command.current_dir(dir);
    }
    // Own process group: a terminal's Ctrl-C goes to the runner only, which
    // then stops the whole group (grandchildren included).
    group::own_group_dying_with_us(&mut command);
    if let Some(cpus) = &arm.cpus {
        cpus.apply_to(&mut command);
    }
    let mut child = command.spawn().map_err(|e| match &arm.cpus {
        Some(cpus) if e.raw_os_error() == Some(libc::EINVAL) => format!(
            "cannot start `{}` on CPUs {cpus} (the arm's `cpus`): {e}; this host may not \
             have them",
            program.display()
        ),
        _ => format!("cannot start `{}`: {e}", program.display()),
    })?;
    // What the kernel gave the child, read back before anything can reap
    // it: the record says where the cell ran, pinned or not.
    let cpus = affinity::of_process(&Root::default(), child.id());
    if let (Some(text), Some(mut stdin)) = (arm.stdin_config(), child.stdin.take()) {
        let text = text.to_owned();
        // A thread, so that a child that never reads cannot block the
        // runner; a child that exits first makes the write fail, and its
        // exit is what the cell records.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, text.as_bytes());
        });
    }
    let group = child.id() as i32;
    // Kills the group if this runner dies before the cell ends (PDEATHSIG
    // reaches only the child, not what the child started).
    let reaper = GroupReaper::spawn(group);
    options.stop.set_child(group);
    let stderr = match child.stderr.take() {
        Some(stderr) => {
            let (tail, handle) = collect_tail(stderr);
            StderrSource::Pipe(tail, Some(handle))
        }
        None => StderrSource::Pipe(Default::default(), None),
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(CHANNEL_LINES);
    if let Some(stdout) = child.stdout.take() {
        let tx = tx.clone();
        // Detached: if something outside the group keeps the pipe open, the
        // cell ends without it (STDOUT_GRACE) and the thread ends with the pipe.
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(64 * 1024, stdout);
            loop {
                let msg = match output::read_line_bounded(&mut reader, output::MAX_LINE) {
                    Ok(LineRead::Line(bytes)) => Msg::Line(bytes),
                    Ok(LineRead::Overlong { head, bytes }) => Msg::Overlong { head, bytes },
                    Ok(LineRead::Eof) | Err(_) => {
                        let _ = tx.send(Msg::Eof);
                        return;
                    }
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        });
    } else {
        let _ = tx.send(Msg::Eof);
    }
    std::thread::spawn(move || {
        // wait4, not `Child::wait`: it also says how much CPU the child and
        // the descendants it waited for used, which tells the cell's own
        // load from the rest of the host's.
        let end = wait_with_usage(child.id() as libc::pid_t)
            .map(|(status, usage)| End {
                cpu_seconds: Some(usage.user_seconds + usage.system_seconds),
                ..exit_end(&status)
            })
            .map_err(|e| format!("waiting for the child failed: {e}"));
        drop(child);
        let _ = tx.send(Msg::Ended {
            end,
            at: std::time::Instant::now(),
        });
    });
    let stop = Arc::clone(&options.stop);
    Ok(Launched {
        rx,
        kill: Box::new(move || signal_group(group, libc::SIGKILL)),
        on_end: Box::new(move || signal_group(group, libc::SIGKILL)),
        stderr,
        finish: Box::new(move || {
            stop.clear_child();
            drop(reaper);
        }),
        host: crate::system::host::hostname(),
        job: None,
        cpus,
    })
}

/// How a child ended, as the cell loop reads any end.
fn exit_end(status: &std::process::ExitStatus) -> End {
    let (exit_code, signal, how) = describe_exit(status);
    End {
        exit_code,
        signal,
        how,
        success: status.success(),
        status: None,
        cpu_seconds: None,
    }
}

/// Describes how a child ended, for the run row.
pub(crate) fn describe_exit(
    status: &std::process::ExitStatus,
) -> (Option<i64>, Option<i64>, String) {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        (Some(i64::from(code)), None, format!("exit code {code}"))
    } else if let Some(sig) = status.signal() {
        (
            None,
            Some(i64::from(sig)),
            format!("killed by signal {sig} ({})", signal_name(sig)),
        )
    } else {
        (None, None, "ended without exit code or signal".to_string())
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn an_exit_is_described_by_its_code_or_its_signal() {
        let status = |raw| std::process::ExitStatus::from_raw(raw);
        assert_eq!(
            describe_exit(&status(3 << 8)),
            (Some(3), None, "exit code 3".into())
        );
        assert_eq!(
            describe_exit(&status(libc::SIGKILL)),
            (None, Some(9), "killed by signal 9 (SIGKILL)".into())
        );
    }
}
