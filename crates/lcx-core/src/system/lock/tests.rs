//! The host lock between threads of one process: `flock` locks belong to
//! an open file, so two opens contend as two processes would.

use super::*;

fn never() -> bool {
    false
}

fn take(lock: &mut HostLock) -> Held {
    match lock.acquire(&never, &mut |_| {}).unwrap() {
        Acquired::Held(held) => held,
        Acquired::Stopped => panic!("stopped without a stop"),
    }
}

#[test]
fn a_second_taker_names_the_holder_waits_and_gets_the_lock_when_it_is_let_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep/er/host.lock");
    let mut first = HostLock::new(&path, "quiet-one");
    let held = take(&mut first);
    assert_eq!(
        first.holder(),
        Some(Holder {
            pid: std::process::id(),
            experiment: "quiet-one".into()
        })
    );
    let (told_tx, told_rx) = mpsc::channel();
    let (got_tx, got_rx) = mpsc::channel();
    let waiter_path = path.clone();
    let waiter = std::thread::spawn(move || {
        let mut second = HostLock::new(waiter_path, "second");
        let taken = second.acquire(&never, &mut |h| {
            let _ = told_tx.send(h.cloned());
        });
        let _ = got_tx.send(matches!(taken, Ok(Acquired::Held(_))));
    });
    let told = told_rx.recv().unwrap();
    assert_eq!(
        told.map(|h| h.to_string()),
        Some(format!(
            "experiment `quiet-one` (pid {})",
            std::process::id()
        ))
    );
    // Still waiting: the first holds it.
    assert!(got_rx.try_recv().is_err());
    drop(held);
    assert!(got_rx.recv().unwrap(), "the waiter got the lock");
    waiter.join().unwrap();
    // Let go, the file names nobody.
    assert_eq!(first.holder(), None);
}

#[test]
fn a_stop_ends_the_wait_and_the_abandoned_wait_does_not_keep_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.lock");
    let held = take(&mut HostLock::new(&path, "holder"));
    let mut told = 0;
    let stop = || true;
    let got = HostLock::new(&path, "stopped")
        .acquire(&stop, &mut |_| told += 1)
        .unwrap();
    assert!(matches!(got, Acquired::Stopped));
    assert_eq!(told, 1);
    drop(held);
    // The stopped waiter's thread may take the lock when it is let
    // go; it lets go at once, so a third taker gets it.
    let _third = take(&mut HostLock::new(&path, "third"));
}

#[test]
fn the_same_holder_is_announced_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.lock");
    let mut waiter = HostLock::new(&path, "w");
    let mut told = Vec::new();
    for _ in 0..2 {
        let held = take(&mut HostLock::new(&path, "busy"));
        let stop = || true;
        let _ = waiter
            .acquire(&stop, &mut |h| told.push(h.cloned()))
            .unwrap();
        drop(held);
    }
    assert_eq!(told.len(), 1, "{told:?}");
}

#[test]
fn a_lock_that_cannot_be_made_names_its_file_and_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let err = HostLock::new(blocker.join("host.lock"), "x")
        .acquire(&never, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("a-file/host.lock"), "{err}");
    assert!(
        err.contains("--no-host-lock") && err.contains(LOCK_ENV),
        "{err}"
    );
}

#[test]
fn the_file_is_named_by_the_variable_else_the_runtime_cache_or_tmp_folder() {
    let all = [
        (LOCK_ENV, "/x/my.lock"),
        ("XDG_RUNTIME_DIR", "/run/user/7"),
        ("XDG_CACHE_HOME", "/c"),
        ("HOME", "/home/u"),
    ];
    let cases: [(&[(&str, &str)], &str); 6] = [
        (&all, "/x/my.lock"),
        (&all[1..], "/run/user/7/lcx/host.lock"),
        (&all[2..], "/c/lcx/host.lock"),
        (&all[3..], "/home/u/.cache/lcx/host.lock"),
        (&[], "/tmp/lcx-7/host.lock"),
        // Set but empty is unset.
        (&[(LOCK_ENV, ""), ("HOME", "/h")], "/h/.cache/lcx/host.lock"),
    ];
    for (pairs, want) in cases {
        let env = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| std::ffi::OsString::from(v))
        };
        assert_eq!(path_from(&env, 7), PathBuf::from(want), "{pairs:?}");
    }
}

#[test]
fn a_half_written_holder_is_nobody() {
    assert_eq!(Holder::parse(""), None);
    assert_eq!(Holder::parse("pid 12\n"), None);
    assert_eq!(
        Holder::parse("pid 12\nexperiment a b\n"),
        Some(Holder {
            pid: 12,
            experiment: "a b".into()
        })
    );
}
