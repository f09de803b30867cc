//! The local executor: a cell as a child process of the runner, in its own
//! process group (a terminal's Ctrl-C reaches only the runner), killed
//! with the runner however it dies (PR_SET_PDEATHSIG for the child, a
//! forked watchdog for what the child started).

use std::io::BufReader;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;

use super::cell::{process_env, Cell, CellInfo, End, Reporter};
use super::executor::{Adopt, Executor, Launched, Msg, Place, StderrSource, CHANNEL_LINES};
use super::output::{self, collect_tail, LineRead};
use super::stop::signal_group;
use super::RunnerError;

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
        .stderr(Stdio::piped())
        // Own process group: a terminal's Ctrl-C goes to the runner only,
        // which then stops the whole group (grandchildren included).
        .process_group(0);
    if let Some(dir) = &arm.workdir {
        command.current_dir(dir);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and only touches the child's own
    // process state between fork and exec.
    unsafe {
        command.pre_exec(|| {
            // If the runner dies (even by SIGKILL), its children die too
            // instead of running on unobserved.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", program.display()))?;
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
        let end = child
            .wait()
            .map(|status| exit_end(&status))
            .map_err(|e| format!("waiting for the child failed: {e}"));
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
        host: crate::store::hostname(),
        job: None,
    })
}

/// A forked watchdog that SIGKILLs a cell's process group when the runner
/// goes away without ending the cell (`kill -9`, a crash): PDEATHSIG only
/// reaches the child itself, not what it started. The runner holds the
/// write end of a pipe; the watchdog blocks reading it, and EOF (the
/// runner closed it, or died) makes it kill the group and exit. A process
/// that leaves the group (`setsid`, `setpgid`) escapes it, as it escapes
/// the runner's own group kill.
struct GroupReaper {
    pid: libc::pid_t,
    write_fd: libc::c_int,
}

impl GroupReaper {
    fn spawn(group: i32) -> Option<GroupReaper> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let [read_fd, write_fd] = fds;
        // SAFETY: after fork the watchdog calls only async-signal-safe
        // functions (close, sigaction via signal, setpgid, read, kill,
        // _exit) and touches no memory shared with the runner's threads.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above; this is the forked watchdog.
            unsafe {
                // Every inherited descriptor but our pipe goes: a copy of a
                // cell's stdin write end, say, would keep that child waiting
                // for an end of file that never comes.
                close_all_but(read_fd);
                // Terminal signals belong to the runner: the inherited Ctrl-C
                // handler would write to the runner's own signal pipe.
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                libc::setpgid(0, 0);
                let mut byte = 0u8;
                loop {
                    let n = libc::read(read_fd, (&mut byte as *mut u8).cast(), 1);
                    if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                        break;
                    }
                }
                libc::kill(-group, libc::SIGKILL);
                libc::_exit(0);
            }
        }
        // SAFETY: closing our copy of the read end, which we own.
        unsafe { libc::close(read_fd) };
        if pid < 0 {
            // SAFETY: as above, the write end is ours.
            unsafe { libc::close(write_fd) };
            return None;
        }
        Some(GroupReaper { pid, write_fd })
    }
}

/// Closes every descriptor of this process except `keep`: `close_range(2)`
/// where the kernel has it (5.9 and later), a loop over the usual range
/// otherwise. Async-signal-safe, for the forked watchdog.
///
/// # Safety
/// Only in a freshly forked child that owns no Rust objects holding
/// descriptors it will use again.
unsafe fn close_all_but(keep: libc::c_int) {
    let keep = keep as libc::c_uint;
    // SAFETY: plain syscalls on this process's own descriptor table.
    unsafe {
        let low = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
        let high = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0;
        if !(low && high) {
            for fd in 0..4096 {
                if fd != keep as libc::c_int {
                    libc::close(fd);
                }
            }
        }
    }
}

impl Drop for GroupReaper {
    fn drop(&mut self) {
        // SAFETY: the descriptor and the child pid are ours; closing the
        // pipe ends the watchdog, and waitpid reaps it.
        unsafe {
            libc::close(self.write_fd);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
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
    use std::time::{Duration, Instant};

    use super::*;

    /// Whether a process `pid` is gone (or a zombie nobody waits for).
    fn gone(pid: i32) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status.is_empty() || status.contains("State:\tZ")
    }

    #[test]
    fn the_watchdog_kills_the_whole_group_when_its_runner_lets_go() {
        // A child that starts a grandchild in its group and reports its pid.
        let mut child = Command::new("sh")
            .args(["-c", "sleep 300 & echo $!; wait"])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut pid = String::new();
        std::io::BufRead::read_line(&mut BufReader::new(child.stdout.take().unwrap()), &mut pid)
            .unwrap();
        let grandchild: i32 = pid.trim().parse().unwrap();
        let reaper = GroupReaper::spawn(child.id() as i32).expect("the watchdog forks");
        assert!(!gone(grandchild));
        // What the runner's death does: the pipe's write end closes.
        drop(reaper);
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gone(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(grandchild), "the grandchild outlived the watchdog");
    }

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
