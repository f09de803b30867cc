//! A child process group that dies with this process: the child in its own
//! group (so a terminal's Ctrl-C reaches only lcx, which then decides),
//! killed by the kernel if lcx dies (`PR_SET_PDEATHSIG`), and a forked
//! watchdog that kills the rest of the group (what the child started),
//! which PDEATHSIG does not reach. Cells and revision builds both run so.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes `command`'s child the leader of its own process group, SIGKILLed
/// by the kernel when this process dies (even by SIGKILL).
pub(crate) fn own_group_dying_with_us(command: &mut Command) {
    command.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and only touches the child's own
    // process state between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// A forked watchdog that SIGKILLs a child's process group when lcx goes
/// away first (`kill -9`, a crash): PDEATHSIG reaches only the child itself,
/// not what it started. lcx holds the write end of a pipe; the watchdog
/// blocks reading it, and EOF (lcx dropped the reaper, or died) makes it
/// kill the group and exit. A process that leaves the group (`setsid`,
/// `setpgid`) escapes it, as it escapes lcx's own group kill.
pub(crate) struct GroupReaper {
    pid: libc::pid_t,
    write_fd: libc::c_int,
}

impl GroupReaper {
    pub(crate) fn spawn(group: i32) -> Option<GroupReaper> {
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

#[cfg(test)]
mod tests {
    use std::io::BufReader;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
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
}
