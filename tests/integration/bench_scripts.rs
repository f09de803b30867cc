//! The benchmark scripts at toy sizes, so that the scripts behind the
//! README's figures cannot rot between the runs that produce them. Their
//! timings are not looked at: only that every row came out.

use std::path::Path;
use std::process::Command;

fn script(name: &str, args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts").join(name))
        .args(args)
        .env_remove("LCX_DB");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_scaling_script_measures_every_row() {
    let table = script("bench-scaling.sh", &["--quick", env!("CARGO_BIN_EXE_lcx")]);
    for row in [
        "| start-up | `lcx --version` | ",
        "| start-up | `lcx --help` | ",
        "| per cell | `lcx run` of one cell printing one line | ",
        "| per cell | each further cell (5 cells: ",
        "| per line | ingesting 20000 lines of two metrics | ",
        "| report | `lcx report` over 100000 rows | ",
        "| trainer | traversal with 1 worker(s), 2 traversals per player | ",
        "| trainer | traversal with 2 worker(s), 2 traversals per player | ",
        "| trainer | training at batch 16 (256 rows per network) | ",
        "| trainer | training at batch 64 (256 rows per network) | ",
    ] {
        assert!(table.contains(row), "no `{row}` in\n{table}");
    }
    assert!(
        table.contains(" GFLOP/s, ") && table.contains(" nodes/s |"),
        "{table}"
    );
}

#[test]
fn the_publish_benchmark_publishes_three_times() {
    let table = script("bench-publish.sh", &["10", env!("CARGO_BIN_EXE_lcx")]);
    assert!(table.contains("generated 10 experiments"), "{table}");
    assert!(
        table.contains("| again, nothing changed | ")
            && table.contains(" 0 file(s) written, 30 page(s) unchanged"),
        "{table}"
    );
    assert!(table.contains("| after one more experiment | "), "{table}");
}

#[test]
fn the_command_overhead_benchmark_probes_nothing() {
    // The 50 ms limit is for a quiet host; at toy size only the rows and
    // the absence of a probe are looked at.
    let table = script(
        "bench-command-overhead.sh",
        &["2", env!("CARGO_BIN_EXE_lcx"), "100000"],
    );
    for row in [
        "| `lcx run` of two cells of `true`, whole | ",
        "| the two cells, as the runner timed them | ",
        "| overhead (whole − cells) | ",
        "| runs that probed the ceiling | 0 |",
    ] {
        assert!(table.contains(row), "no `{row}` in\n{table}");
    }
}

#[test]
fn the_sweep_crossover_script_counts_both_kinds() {
    let table = script(
        "bench-sweep-crossover.sh",
        &["2", env!("CARGO_BIN_EXE_lcx")],
    );
    for row in [
        "| planted: 1.0× below n = 4, 1.3× from it; crossover at 4 | 2 | ",
        "| flat A/A: no crossover | 2 | ",
        "| spikes, cells' means: planted, crossover at 4 | 2 | ",
        "| spikes, cells' medians: flat A/A, no crossover | 2 | ",
    ] {
        assert!(table.contains(row), "no `{row}` in\n{table}");
    }
}

#[test]
fn the_import_benchmark_round_trips() {
    let table = script("bench-import.sh", &["50", env!("CARGO_BIN_EXE_lcx")]);
    for row in [
        "| `lcx import` of the database into a new one | ",
        "| the same again (everything here already) | ",
        "| `lcx export --format json` | ",
        "| `lcx import` of that export into a new database | ",
        "| the copy's report is the original's (apart from the database path) | yes |",
    ] {
        assert!(table.contains(row), "no `{row}` in\n{table}");
    }
}

/// The busy-host benchmark at one experiment per row: every row comes
/// out, and the instruction counts decide right beside the planted load
/// (what load cannot move is right at any size; the time rows are only
/// looked at for their presence).
#[test]
fn the_busy_host_benchmark_decides_on_counts_under_its_load() {
    let bin = Path::new(env!("CARGO_BIN_EXE_lcx")).parent().unwrap();
    if lcx_core::bench::cachegrind::find_valgrind(std::env::var_os("PATH").as_deref()).is_none() {
        eprintln!("valgrind is not installed: skipped");
        return;
    }
    let table = script(
        "bench-busy-host.sh",
        &["--quick", "--bin", bin.to_str().unwrap()],
    );
    for row in [
        "| process, interleaved, mean | A/A | 1 | ",
        "| process, interleaved, mean | 15 % slower | 1 | ",
        "| process, randomized, median | A/A | 1 | ",
        "| process, randomized, min | 15 % slower | 1 | ",
        "| instructions | A/A | 1 | 0 / 0 / 1 / 0 | 1 | 1 / 0 / 0 | 1 of 1 |",
        "| instructions | 1 % more | 1 | 0 / 1 / 0 / 0 | 1 | 0 / 1 / 0 | 1 of 1 |",
    ] {
        assert!(table.contains(row), "no `{row}` in\n{table}");
    }
}
