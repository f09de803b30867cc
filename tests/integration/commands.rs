//! Timing commands as a hyperfine user would: `lcx run --command` with one
//! command or several, named, as plain words or shell strings, scanned
//! over a parameter; what `lcx run` prints when it ends; the mistakes such
//! a user makes first, each refused or explained before anything is
//! written; and every reproduce line of the report run as pasted.

use std::path::Path;
use std::process::Output;

use lcx_core::store::Store;

use crate::support::{lcx, report_text, write};

/// `lcx run ARGS --db DB` in `dir`.
fn run(dir: &Path, db: &Path, args: &[&str]) -> Output {
    lcx()
        .arg("run")
        .args(args)
        .arg("--db")
        .arg(db)
        .arg("--plain")
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `lcx ARGS --db DB` in `dir`, which must succeed; its stdout.
fn lcx_ok(dir: &Path, db: &Path, args: &[&str]) -> String {
    let out = lcx()
        .args(args)
        .arg("--db")
        .arg(db)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// The latest experiment's report as JSON.
fn report_json(dir: &Path, db: &Path) -> serde_json::Value {
    serde_json::from_str(&lcx_ok(dir, db, &["report", "--format", "json"])).unwrap()
}

/// `out` is bad input: exit 2, saying `needle`.
fn refused(out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "{err}");
}

/// The argv of each arm's first cell, by arm name.
fn argv_of(db: &Path, arm: &str) -> Vec<String> {
    let store = Store::open_read_only(db).unwrap();
    let e = store.find_experiment("latest").unwrap();
    let runs = store.runs(e.id).unwrap();
    runs.iter().find(|r| r.arm == arm).unwrap().command.clone()
}

#[test]
fn one_command_or_several_named_with_the_summary_printed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    // One command: timed, and its table printed when the run ends.
    let out = run(
        dir.path(),
        &db,
        &["--command", "sleep 0.01", "--runs", "3", "--repeats", "1"],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("| Mode") && stdout.contains("wall s"),
        "{stdout}"
    );
    assert!(stdout.contains("sleep 0.01 [baseline]"), "{stdout}");
    assert!(stdout.contains("Net result: a single arm"), "{stdout}");
    // `--runs 3` after the one warm-up: four iterations a cell.
    let store = Store::open_read_only(&db).unwrap();
    let e = store.find_experiment("latest").unwrap();
    assert_eq!((e.iterations, e.warmup), (4, 1));
    drop(store);

    // Two named commands in a named experiment: arm names, a verdict in
    // the printed summary, and `lcx history latest` on the wall time.
    let out = run(
        dir.path(),
        &db,
        &[
            "--name",
            "naps",
            "-n",
            "short",
            "--command",
            "sleep 0.01",
            "-n",
            "long",
            "--command",
            "sleep 0.05",
            "--runs",
            "3",
            "--repeats",
            "2",
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // (Which verdict depends on how busy the host is: not asserted.)
    assert!(stdout.contains("Net result: on wall s"), "{stdout}");
    assert!(stdout.contains("| long: sleep 0.05 "), "{stdout}");
    let history = lcx_ok(dir.path(), &db, &["history", "latest", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_str(&history).unwrap();
    let arms: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["arm"].as_str().unwrap())
        .collect();
    assert!(arms.contains(&"short") && arms.contains(&"long"), "{rows}");
    // The archive's plots and the site's headline are on the wall time too.
    lcx_ok(dir.path(), &db, &["report", "latest", "--archive"]);
    let plots: Vec<String> = std::fs::read_dir(dir.path().join("archive"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    assert!(
        !plots.is_empty() && plots.iter().all(|p| !p.contains("rss")),
        "{plots:?}"
    );
    assert!(plots.iter().any(|p| p.contains("wall")), "{plots:?}");
    let site = dir.path().join("site");
    lcx_ok(dir.path(), &db, &["publish", site.to_str().unwrap()]);
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains("on process/wall_seconds"), "{index}");
    assert!(!index.contains("on process/max_rss_bytes"), "{index}");
    let listed = lcx().args(["list", "--db"]).arg(&db).output().unwrap();
    assert!(
        text(&listed.stdout).contains("| naps "),
        "{}",
        text(&listed.stdout)
    );

    // A name given twice, or more names than commands, is refused.
    for args in [
        &[
            "-n",
            "a",
            "--command",
            "true",
            "-n",
            "a",
            "--command",
            "true",
        ][..],
        &["-n", "a", "-n", "b", "--command", "true"][..],
    ] {
        refused(&run(dir.path(), &db, args), "--command-name");
    }
}

/// The rows of the report's arm table (the one under `| Mode`).
fn arm_rows(report: &str) -> Vec<&str> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("| Mode"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect()
}

/// Issue 78: a name given with `-n` leads its arm's row in every table,
/// the command's text after it; an unnamed command shows its text alone.
#[test]
fn named_commands_lead_their_rows_with_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let out = run(
        dir.path(),
        &db,
        &[
            "-n",
            "old",
            "--command",
            "sleep 0.02",
            "-n",
            "new",
            "--command",
            "sleep 0.03",
            "--command",
            "sleep 0.01",
            "--runs",
            "2",
            "--repeats",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    let report = report_text(&db);
    for shown in [summary.as_str(), report.as_str()] {
        let rows = arm_rows(shown);
        assert_eq!(rows.len(), 3, "{shown}");
        assert!(rows[0].starts_with("| old: sleep 0.02 "), "{shown}");
        assert!(rows[1].starts_with("| new: sleep 0.03 "), "{shown}");
        assert!(rows[2].starts_with("| sleep 0.01 "), "{shown}");
    }
    let json = report_json(dir.path(), &db);
    let labels: Vec<&str> = json["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["old: sleep 0.02", "new: sleep 0.03", "sleep 0.01"],
        "{json}"
    );
}

/// Issue 78: one command's report gives its range and run count, as
/// hyperfine's `Range (min … max)` does: in the summary `lcx run` prints,
/// the markdown report and the JSON.
#[test]
fn one_command_reports_its_range_and_run_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let out = run(
        dir.path(),
        &db,
        &["--command", "sleep 0.01", "--runs", "10"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // 10 runs after the warm-up in each of hyperfine's default 3 repeats.
    let summary = text(&out.stdout);
    let report = report_text(&db);
    for shown in [summary.as_str(), report.as_str()] {
        let net = shown
            .lines()
            .find(|l| l.starts_with("Net result: "))
            .unwrap_or_else(|| panic!("{shown}"));
        assert!(
            net.contains("a single arm") && net.contains("on wall s, range (min … max) "),
            "{net}"
        );
        assert!(net.ends_with(" over 30 runs in 3 repeats"), "{net}");
    }
    let json = report_json(dir.path(), &db);
    assert!(
        json["net_result"]
            .as_str()
            .unwrap()
            .contains("over 30 runs"),
        "{json}"
    );
    let wall = json["arms"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "process/wall_seconds")
        .unwrap();
    // Each cell folds to its fastest run (decision 0030): `summary` is
    // over the 3 cells' values, `runs` over every run, as hyperfine's.
    assert_eq!(wall["summary"]["n"], 3, "{wall}");
    let summary = &wall["runs"];
    assert_eq!(summary["n"], 30, "{summary}");
    let (min, max) = (
        summary["min"].as_f64().unwrap(),
        summary["max"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= max, "{summary}");
}

/// A string of plain words runs without a shell; one with shell syntax
/// runs through `sh -c` with the shell's start-up measured and taken off,
/// and the report says so. An array runs as it is.
#[test]
fn shell_strings_have_the_shells_start_up_taken_off() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let out = run(
        dir.path(),
        &db,
        &[
            "-n",
            "words",
            "--command",
            "sleep 0.01",
            "-n",
            "shell",
            "--command",
            "sleep 0.01 && true",
            "--runs",
            "3",
            "--repeats",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let words = argv_of(&db, "words");
    assert_eq!(words[words.len() - 2..], ["sleep", "0.01"]);
    assert!(
        !words.contains(&"--subtract-shell".to_string()),
        "{words:?}"
    );
    let shell = argv_of(&db, "shell");
    assert!(shell.contains(&"--subtract-shell".to_string()), "{shell:?}");
    assert_eq!(shell[shell.len() - 3..], ["sh", "-c", "sleep 0.01 && true"]);
    let report = report_text(&db);
    assert!(report.contains("shell s"), "{report}");
    assert!(report.contains("Shell start-up taken off"), "{report}");
    let store = Store::open_read_only(&db).unwrap();
    let shells = store
        .query("SELECT COUNT(*) FROM metrics WHERE name = 'process/shell_seconds' AND value > 0")
        .unwrap()
        .rows;
    // Every iteration of the shell arm carries what was taken off.
    assert_eq!(format!("{:?}", shells[0][0]), "Integer(4)");
}

/// `-L` and `-P` make one arm per value through a `[sweep]` of `"{VAR}"`
/// keys, `{VAR}` standing for the value.
#[test]
fn parameter_lists_and_scans_make_an_arm_per_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let sized = ["--runs", "1", "--warmup", "0", "--repeats", "1"];
    let mut args = vec!["-L", "n", "1,2", "--command", "test {n} -gt 0"];
    args.extend(sized);
    let out = run(dir.path(), &db, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = report_json(dir.path(), &db);
    let names: Vec<&str> = json["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cmd1-n-1", "cmd1-n-2"]);
    // Each value is the command's own text: plain words stay shell-free,
    // and `$n` holds the value too.
    assert_eq!(
        argv_of(&db, "cmd1-n-2")[4..],
        ["--", "test", "2", "-gt", "0"]
    );
    // Scans take negative bounds, and several parameters cross.
    let mut args = vec![
        "-P",
        "n",
        "-1",
        "0",
        "-L",
        "w",
        "a,b",
        "--command",
        "test {n} -lt 1 -a {w} = $w",
    ];
    args.extend(sized);
    assert!(run(dir.path(), &db, &args).status.success());
    let names: Vec<String> = report_json(dir.path(), &db)["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "cmd1-n--1_w-a",
            "cmd1-n--1_w-b",
            "cmd1-n-0_w-a",
            "cmd1-n-0_w-b"
        ]
    );
    // A variable no command holds, or a scan backwards, is refused.
    for (args, said) in [
        (
            &["-L", "m", "1,2", "--command", "true"][..],
            "no --command holds `{m}`",
        ),
        (
            &["-P", "n", "3", "1", "--command", "test {n}"][..],
            "expected MIN ≤ MAX",
        ),
        (
            &["-L", "a=b", "1", "--command", "echo {a=b}"][..],
            "an environment variable name must be non-empty and hold no `=`",
        ),
        (
            &["-L", "x", "a b,a-b", "--command", "echo {x}"][..],
            "-P/-L x: two values would name their arms `…-x-a-b`",
        ),
        (
            &["-n", "old build", "--command", "true"][..],
            "--command-name",
        ),
        (
            &["--name", "", "--command", "true"][..],
            "--name: must not be empty",
        ),
    ] {
        refused(&run(dir.path(), &db, args), said);
    }
    // Nothing refused was written beside the database.
    let kept = std::fs::read_dir(dir.path().join(".lcx/commands"))
        .unwrap()
        .count();
    assert_eq!(kept, 2);
}

/// A `-P`/`-L` scan of one command is a sweep along the variable: its value
/// per point and its speed against the first, never "regressed" because a
/// bigger input costs more (issue 78); two commands are compared with each
/// other at each value.
#[test]
fn a_parameter_scan_is_reported_as_a_sweep_not_as_regressions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let sized = ["--runs", "3", "--warmup", "0", "--repeats", "2"];
    let scan = ["-L", "ms", "10,40", "--command", "sleep 0.0{ms}"];
    let out = run(dir.path(), &db, &[&scan[..], &sized[..]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    assert!(
        summary.contains("Net result: a scan of `cmd1` along `{ms}`"),
        "{summary}"
    );
    assert!(summary.contains("against the first point"), "{summary}");
    let report = lcx_ok(dir.path(), &db, &["report"]);
    for said in [&summary, &report] {
        assert!(!said.contains("regressed"), "{said}");
    }
    assert!(report.contains("## Sweep along `{ms}`"), "{report}");
    assert!(!report.contains("## Verdicts"), "{report}");
    // The sleep four times as long: its speed against the first point is
    // in the sweep's table, well below 1×.
    let json = report_json(dir.path(), &db);
    let last = &json["sweep"]["points"][1]["cells"][0];
    assert_eq!(last["run_arm"], "cmd1-ms-40");
    let scaling = last["scaling"]["ratio"].as_f64().unwrap();
    assert!(scaling < 0.5, "{last}");

    // Two commands: the second against the first at each value.
    let pair = [
        "-n",
        "short",
        "--command",
        "sleep 0.0{ms}",
        "-n",
        "long",
        "--command",
        "sleep 0.0{ms}5",
        "-L",
        "ms",
        "1,2",
    ];
    let out = run(dir.path(), &db, &[&pair[..], &sized[..]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = report_json(dir.path(), &db);
    let compared: Vec<(&str, &str)> = json["arms"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| Some((a["name"].as_str()?, a["compared_with"].as_str()?)))
        .collect();
    assert_eq!(
        compared,
        [("long-ms-1", "short-ms-1"), ("long-ms-2", "short-ms-2")]
    );
    let report = lcx_ok(dir.path(), &db, &["report"]);
    assert!(
        report.contains("## Verdicts vs `short` at each point"),
        "{report}"
    );
}

/// The generated experiment files beside `db`, by name.
fn generated(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(".lcx/commands"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// hyperfine's `-P`/`-L`: values substituted once, one way of running for
/// every arm of a command, one rule for a variable's name; lcx's `$VAR`
/// never over a variable lcx's environment has (decision 0027).
#[test]
fn scans_substitute_once_run_one_way_and_clobber_no_variable() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let sized = ["--runs", "1", "--warmup", "0", "--repeats", "1"];
    let ran = |args: &[&str]| {
        let out = run(dir.path(), &db, &[args, &sized[..]].concat());
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    };
    // A value naming another parameter keeps it: hyperfine runs `echo {w} X`.
    ran(&[
        "-L",
        "v",
        "{w}",
        "-L",
        "w",
        "X",
        "--command",
        "echo {v} {w}",
    ]);
    let argv = argv_of(&db, "cmd1-v--w-_w-X");
    assert_eq!(argv.last().unwrap(), "echo {w} X", "{argv:?}");

    // `-L PATH …` replaces `{PATH}` and leaves the PATH the command is
    // found through: `test` still runs.
    ran(&[
        "-L",
        "PATH",
        "/nonexistent",
        "--command",
        "test {PATH} = /nonexistent",
    ]);
    // A name lcx's environment lacks is still set, as `$VAR`.
    ran(&[
        "-L",
        "lcxparam",
        "7",
        "--command",
        "test {lcxparam} = $lcxparam",
    ]);

    // One value needs a shell: every arm of the command runs through one,
    // its start-up taken off alike.
    ran(&["-L", "v", "a,b;true", "--command", "echo {v}"]);
    for (arm, command) in [("cmd1-v-a", "echo a"), ("cmd1-v-b-true", "echo b;true")] {
        let argv = argv_of(&db, arm);
        assert!(argv.contains(&"--subtract-shell".to_string()), "{argv:?}");
        assert_eq!(argv[argv.len() - 3..], ["sh", "-c", command], "{argv:?}");
    }

    // The file's rule for a variable's name: `1bad` as `"env.1BAD"`.
    let out = run(
        dir.path(),
        &db,
        &["-L", "1bad", "x", "--command", "echo {1bad}", "--dry-run"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A line break in a command or a value: the flag named, the character
    // shown escaped, exit 2, nothing written.
    let before = generated(dir.path());
    for (args, said) in [
        (
            &["--command", "echo a\necho b"][..],
            r"--command 1 (`echo a\necho b`): contains \n",
        ),
        (
            &["-L", "v", "a\nb", "--command", "echo {v}"][..],
            r"--parameter-list `v`: the value `a\nb`",
        ),
    ] {
        let out = run(dir.path(), &db, args);
        refused(&out, said);
        let err = text(&out.stderr);
        assert!(!err.contains("arms[0]"), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert_eq!(generated(dir.path()), before);
}

/// `--dry-run` writes its file under the temporary folder only inside a
/// folder of lcx's own: a link planted at its name is replaced, never
/// written through, and a planted folder link is refused.
#[test]
fn a_dry_run_writes_nothing_through_a_planted_link() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let db = dir.path().join("lcx.db");
    let dry = || {
        lcx()
            .args(["run", "--command", "sleep 0.01", "--dry-run", "--db"])
            .arg(&db)
            .env("TMPDIR", &tmp)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = dry();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let folders: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    let own = &folders[0];
    let name = own.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("lcx-commands-"), "{name}");
    let mode = std::fs::metadata(own).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let files: Vec<_> = std::fs::read_dir(own)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");

    // A link at the file's name: its target stays as it was.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "mine\n").unwrap();
    std::fs::remove_file(&files[0]).unwrap();
    std::os::unix::fs::symlink(&victim, &files[0]).unwrap();
    let out = dry();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    assert!(!std::fs::symlink_metadata(&files[0]).unwrap().is_symlink());

    // The folder itself a planted link: refused, its target untouched.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::remove_dir_all(own).unwrap();
    std::os::unix::fs::symlink(&elsewhere, own).unwrap();
    let out = dry();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is a symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(!db.exists());
}

/// `LCX_HOSTNAME` follows the rule of names: a line break, a terminal
/// escape or 10 KB are refused (exit 2), shown escaped and short, before
/// anything is written; a name with a space is recorded as it is, and
/// `lcx history --host` finds it.
#[test]
fn lcx_hostname_is_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let hosted = |host: &str, args: &[&str]| {
        lcx()
            .args(args)
            .arg("--db")
            .arg(&db)
            .env("LCX_HOSTNAME", host)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let timed = [
        "run",
        "--command",
        "true",
        "--name",
        "h",
        "--runs",
        "1",
        "--repeats",
        "1",
    ];
    refused(
        &hosted("ci\nrunner", &timed),
        r"LCX_HOSTNAME (`ci\nrunner`)",
    );
    let out = hosted(&"x".repeat(10_000), &timed);
    refused(&out, "is 10000 characters long; at most 200");
    assert!(out.stderr.len() < 1_000, "{}", text(&out.stderr));
    let out = hosted("a\u{1b}[31mb", &[&timed[..], &["--dry-run"]].concat());
    refused(&out, "LCX_HOSTNAME");
    assert!(
        !text(&out.stderr).contains('\u{1b}'),
        "{}",
        text(&out.stderr)
    );
    assert!(!db.exists());
    assert!(!dir.path().join(".lcx").exists());

    let out = hosted("a b", &timed);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = lcx_ok(dir.path(), &db, &["history", "h", "--host", "a b"]);
    assert!(out.contains("| 1 "), "{out}");
}

/// The first mistakes of a hyperfine user: each is refused with the word
/// that fixes it, or, for a silent command, explained in the cell's error.
#[test]
fn first_mistakes_are_refused_or_explained() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    // A misspelt process metric in the gate: refused before anything runs.
    let file = write(
        dir.path(),
        "typo.toml",
        "name = \"typo\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 2\n\
         [[arms]]\nname = \"a\"\ncommand = [\"true\"]\n[[arms]]\nname = \"b\"\ncommand = [\"true\"]\n\
         [gate]\nmetric = \"process/wall_secs\"\nmin_speedup = 1.1\n",
    );
    let out = run(dir.path(), &db, &[file.to_str().unwrap()]);
    refused(&out, "did you mean `process/wall_seconds`?");
    assert!(!db.exists(), "a refused plan wrote the database");

    // A command that prints nothing, without `timing`: the cell says what
    // a command arm prints and that lcx can time it.
    let file = write(
        dir.path(),
        "silent.toml",
        "name = \"silent\"\nworkload = \"command\"\niterations = 2\n\
         [[arms]]\nname = \"a\"\ncommand = \"true\"\n",
    );
    let out = run(dir.path(), &db, &[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let store = Store::open_read_only(&db).unwrap();
    let e = store.find_experiment("silent").unwrap();
    let error = store.runs(e.id).unwrap()[0].error.clone().unwrap();
    assert!(error.contains("set `timing = \"process\"`"), "{error}");
    drop(store);

    // A missing program: its OS error once.
    let out = run(
        dir.path(),
        &db,
        &[
            "--command",
            "no-such-program-lcx",
            "--runs",
            "1",
            "--repeats",
            "1",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let store = Store::open_read_only(&db).unwrap();
    let e = store.find_experiment("latest").unwrap();
    let run_row = &store.runs(e.id).unwrap()[0];
    // The cell's error quotes the last line of its stderr, where the
    // timer said it once.
    for said in [&run_row.error, &run_row.stderr_tail] {
        let said = said.clone().unwrap_or_default();
        assert_eq!(said.matches("os error 2").count(), 1, "{said}");
    }
    drop(store);

    // A database in a folder that does not exist: named, nothing made.
    let nowhere = dir.path().join("nodir").join("x.db");
    for args in [
        &["--command", "true"][..],
        &[dir.path().join("silent.toml").to_str().unwrap()][..],
    ] {
        let folder = format!(
            "its folder {} does not exist",
            nowhere.parent().unwrap().display()
        );
        refused(&run(dir.path(), &nowhere, args), &folder);
        assert!(!dir.path().join("nodir").exists());
    }

    // `--runs` beside an automatic warm-up cannot be counted.
    let out = run(
        dir.path(),
        &db,
        &["--command", "true", "--runs", "3", "--warmup", "auto"],
    );
    refused(&out, "--runs");

    // A gate with no margin runs, with a warning first.
    let file = write(
        dir.path(),
        "zero.toml",
        "name = \"zero\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 2\n\
         [[arms]]\nname = \"a\"\ncommand = [\"true\"]\n[[arms]]\nname = \"b\"\ncommand = [\"true\"]\n\
         [gate]\nmetric = \"process/wall_seconds\"\nmin_speedup = 1.0\n",
    );
    let out = run(dir.path(), &db, &[file.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("warning") && text(&out.stderr).contains("max_slowdown = 0.03"),
        "{}",
        text(&out.stderr)
    );

    // Comparing an experiment with itself says so.
    let out = lcx()
        .args(["compare", "silent", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    refused(&out, "nothing to compare");
}

/// Every reproduce line of a command experiment's report runs when pasted
/// into a shell (with `lcx` on the PATH, as an installed lcx is).
#[test]
fn reproduce_lines_run_as_pasted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let out = run(
        dir.path(),
        &db,
        &[
            "--command",
            "true",
            "--command",
            "true && true",
            "--runs",
            "2",
            "--repeats",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = report_json(dir.path(), &db);
    let bin = Path::new(env!("CARGO_BIN_EXE_lcx")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut lines: Vec<String> = v["reproduce"]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[1].as_str().unwrap().to_string())
        .collect();
    assert_eq!(lines.len(), 2, "{v}");
    lines.push(v["reproduce"]["experiment"].as_str().unwrap().to_string());
    let pasted: Vec<String> = lines
        .iter()
        .map(|line| {
            let out = std::process::Command::new("sh")
                .args(["-c", line])
                .env("PATH", &path)
                .env("LCX_HOST_LOCK", crate::support::own_host_lock())
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "`{line}`: {}", text(&out.stderr));
            text(&out.stdout)
        })
        .collect();
    // Each cell line prints its iterations' metric lines.
    assert_eq!(pasted[0].lines().count(), 3, "{}", lines[0]);
}

/// hyperfine's habits: a command where the experiment file goes is
/// refused with the `--command` line that times it; `$VAR` in a command
/// is a use of `-P`/`-L`'s variable, as `{VAR}` is.
#[test]
fn hyperfine_habits_are_understood() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    for (file, said) in [
        ("sleep 0.05", "lcx run --command 'sleep 0.05'"),
        ("echo 'a b'", r"lcx run --command 'echo '\''a b'\'''"),
        ("sh", "lcx run --command 'sh'"),
    ] {
        let out = run(dir.path(), &db, &[file]);
        refused(&out, said);
        refused(&out, "cannot read experiment file");
    }
    // A missing `.toml` or a path is a missing file, with no hint.
    for file in ["missing.toml", "my runs.toml", "./no-such-thing"] {
        let out = run(dir.path(), &db, &[file]);
        refused(&out, "cannot read experiment file");
        assert!(!text(&out.stderr).contains("--command"), "{file}");
    }
    assert!(!db.exists());
    assert!(!dir.path().join(".lcx").exists());

    // `$n` holds the value (an unset `$n` would fail `test`): a use of `n`.
    let sized = ["--runs", "1", "--warmup", "0", "--repeats", "1"];
    let command = "test \"$n\" -ge 1";
    let out = run(
        dir.path(),
        &db,
        &[&["-L", "n", "1,2", "--command", command][..], &sized].concat(),
    );
    assert!(out.status.success(), "{command}: {}", text(&out.stderr));
    let out = run(
        dir.path(),
        &db,
        &["-L", "n", "1,2", "--command", "echo ${n}", "--dry-run"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A longer name is not `n`'s.
    for command in ["echo $nn", "echo ${nx}"] {
        let out = run(dir.path(), &db, &["-L", "n", "1,2", "--command", command]);
        refused(&out, "no --command holds `{n}` or `$n`");
    }
}

/// Two experiments whose fingerprints differ in the host name alone:
/// `lcx compare` names the field and both values, for experiments and
/// for runs.
#[test]
fn compare_names_the_fingerprint_fields_that_differ() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    for host in ["laptop", "ci-runner"] {
        let out = lcx()
            .args(["run", "--plain", "--command", "true", "--name", "h"])
            .args(["--runs", "1", "--warmup", "0", "--repeats", "1", "--db"])
            .arg(&db)
            .env("LCX_HOSTNAME", host)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = lcx_ok(dir.path(), &db, &["compare", "1", "2"]);
    assert!(
        out.contains("fingerprints differ (host name: laptop vs ci-runner)"),
        "{out}"
    );
    assert!(!out.contains("CPU"), "{out}");
    let out = lcx_ok(dir.path(), &db, &["compare", "run:1", "run:2"]);
    assert!(
        out.contains("the runs' fingerprints differ (host name: laptop vs ci-runner)"),
        "{out}"
    );
}
