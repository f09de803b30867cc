//! `lcx publish` and `lcx export` on a database lcx recorded: what lands
//! in the site's folder, what a second publish rewrites, what a removed
//! experiment leaves, and the export's warm-up flags. (The site in a real
//! browser: tests/browser/.)

use crate::support::{lcx, succeed, write};

/// Two runs of one experiment (iterations 1 and 2 of 4 are warm-up).
fn recorded(dir: &std::path::Path) -> std::path::PathBuf {
    let file = write(
        dir,
        "pub.toml",
        "name = \"pub\"\nworkload = \"command\"\niterations = 4\nwarmup = 2\n\n\
         [[arms]]\nname = \"a\"\ncommand = 'for i in 1 2 3 4; do echo \"{\\\"t\\\": $i}\"; done'\n\n\
         [[arms]]\nname = \"b\"\ncommand = 'for i in 1 2 3 4; do echo \"{\\\"t\\\": 0.5}\"; done'\n",
    );
    let db = dir.join("lcx.db");
    for _ in 0..2 {
        succeed(lcx().arg("run").arg(&file).arg("--db").arg(&db));
    }
    db
}

#[test]
fn publish_writes_a_site_and_a_second_one_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let db = recorded(dir.path());
    let site = dir.path().join("site");
    let out = succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    assert!(
        out.contains("published 2 experiment(s) and 2 history page(s)"),
        "{out}"
    );
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains("href=\"e/1.html\"") && index.contains("href=\"e/2.html\""));
    assert!(index.contains("<p>2 experiments of 1 name."), "{index}");
    let second = std::fs::read_to_string(site.join("e/2.html")).unwrap();
    // No gate or guard: the check is whether every cell completed.
    assert!(
        second.contains(
            "completed</span> (no gate or guard: nothing was judged, the check says only \
             whether every cell completed)"
        ),
        "{second}"
    );
    // Its previous run, the diff against it, the file as run, history links.
    assert!(second.contains("href=\"1.html\""), "{second}");
    assert!(second.contains("id=\"diff\""));
    assert!(second.contains("name = &quot;pub&quot;"));
    assert!(second.contains("../h/pub--a--t-"));
    for path in ["assets/site.css", "assets/site.js", ".lcx-site.json"] {
        assert!(site.join(path).exists(), "{path}");
    }
    // Nothing outside the folder: no http(s) reference in any page.
    for entry in walk(&site) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(
            !text.contains("src=\"http") && !text.contains("href=\"http"),
            "{}",
            entry.display()
        );
    }

    let again = succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    assert!(
        again.contains(" 0 file(s) written, 4 page(s) unchanged"),
        "{again}"
    );

    // The previous run changed (as a resume changes it: a value, its
    // finish): the next run's page diffs against it, so it is rebuilt too.
    let before = std::fs::read_to_string(site.join("e/2.html")).unwrap();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "UPDATE metrics SET value = value * 10 WHERE run_id IN
               (SELECT id FROM runs WHERE experiment_id = 1 AND arm = 'a');
             UPDATE experiments SET finished_at = '2030-01-01T00:00:00.000Z' WHERE id = 1;",
        )
        .unwrap();
    }
    succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    let after_resume = std::fs::read_to_string(site.join("e/2.html")).unwrap();
    assert_ne!(after_resume, before, "the next run's diff was left stale");

    // A removed experiment's pages go; the other's page changes (no next).
    succeed(lcx().args(["rm", "2", "--db"]).arg(&db));
    let after = succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    assert!(!site.join("e/2.html").exists(), "{after}");
    assert!(after.contains("removed"), "{after}");
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(!index.contains("href=\"e/2.html\""));
}

#[test]
fn publish_refuses_a_folder_that_is_not_its_site() {
    let dir = tempfile::tempdir().unwrap();
    let db = recorded(dir.path());
    let site = dir.path().join("mine");
    std::fs::create_dir(&site).unwrap();
    std::fs::write(site.join("notes.txt"), "keep me").unwrap();
    let out = lcx()
        .arg("publish")
        .arg(&site)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("holds no lcx site"), "{stderr}");
    assert_eq!(std::fs::read_dir(&site).unwrap().count(), 1);
}

#[test]
fn a_first_publish_that_fails_leaves_no_half_site_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let db = recorded(dir.path());
    // A row no reader takes (written by hand, past every import check).
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE runs SET node_json = 'x' WHERE id = 1", [])
        .unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for site in [dir.path().join("new"), empty.clone()] {
        let out = lcx()
            .arg("publish")
            .arg(&site)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(!site.exists() || std::fs::read_dir(&site).unwrap().count() == 0);
    }
    assert!(empty.is_dir(), "a folder the user made stays");
    // Mended, the same folder takes the site.
    conn.execute("UPDATE runs SET node_json = NULL WHERE id = 1", [])
        .unwrap();
    succeed(lcx().arg("publish").arg(&empty).arg("--db").arg(&db));
}

#[test]
fn export_flags_the_warm_up_and_the_cells_status() {
    let dir = tempfile::tempdir().unwrap();
    let db = recorded(dir.path());
    let csv = succeed(lcx().args(["export", "1", "--db"]).arg(&db));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "experiment_id,experiment,run_id,arm,repeat,status,iteration,metric,value,warmup,\
         host,date,commit"
    );
    assert_eq!(lines.len(), 1 + 2 * 4, "{csv}");
    assert!(
        lines[1].starts_with("1,pub,1,a,1,completed,1,t,1,true,"),
        "{csv}"
    );
    assert!(
        lines[3].starts_with("1,pub,1,a,1,completed,3,t,3,false,"),
        "{csv}"
    );
    // The mean of the rows left is the report's: arm a 3.5.
    let kept: Vec<f64> = lines[1..]
        .iter()
        .filter(|l| l.contains(",a,") && l.split(',').nth(9) == Some("false"))
        .map(|l| l.split(',').nth(8).unwrap().parse().unwrap())
        .collect();
    assert_eq!(kept.iter().sum::<f64>() / kept.len() as f64, 3.5);
    let json = succeed(
        lcx()
            .args(["export", "pub", "--format", "json", "--db"])
            .arg(&db),
    );
    // The value lines; the others carry the stored rows for `lcx import`.
    let values: Vec<&str> = json
        .lines()
        .filter(|l| l.starts_with(r#"{"record":"value","#))
        .collect();
    assert_eq!(values.len(), 2 * 2 * 4);
    let first: serde_json::Value = serde_json::from_str(values[0]).unwrap();
    assert_eq!(first["warmup"], serde_json::Value::Bool(true));
    assert_eq!(first["metric"], "t");
}

/// The files of `dir` (not recursing), by name, but for the side files
/// SQLite keeps beside `lcx.db` while it is open.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("lcx.db-"))
        .collect();
    names.sort();
    names
}

/// No output lands on a database (issue 73): `-o` naming the `--db` file,
/// a link to it, one of its side files or any SQLite file is refused
/// (exit 2, the flag and path named) with nothing written; an output is
/// renamed into place whole, leaving no temporary file.
#[test]
fn an_output_never_lands_on_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = recorded(dir.path());
    let before = std::fs::read(&db).unwrap();
    let link = dir.path().join("values.csv");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let copy = dir.path().join("copy.sqlite");
    std::fs::copy(&db, &copy).unwrap();
    let files = names(dir.path());
    for (format, output, said) in [
        ("json", db.clone(), "is the database lcx has open"),
        ("csv", db.clone(), "is the database lcx has open"),
        ("csv", link.clone(), "is the database lcx has open"),
        (
            "json",
            dir.path().join("lcx.db-journal"),
            "is the database lcx has open",
        ),
        ("csv", copy.clone(), "is an SQLite database"),
    ] {
        let out = lcx()
            .args(["export", "--format", format, "-o"])
            .arg(&output)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let named = format!("--output {}: {said}", output.display());
        assert!(stderr.contains(&named), "{stderr}");
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
    assert_eq!(names(dir.path()), files);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    // `lcx publish` and `--metrics-out` refuse the same way.
    let out = lcx()
        .arg("publish")
        .arg(&db)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lcx-torch"))
        .args([
            "bench",
            "engine",
            "--games",
            "1",
            "--micro-iters",
            "1",
            "--metrics-out",
        ])
        .arg(&copy)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-out"), "{stderr}");
    assert!(lcx_core::files::is_sqlite(&copy));
    assert_eq!(std::fs::read(&db).unwrap(), before);

    // An existing output is replaced whole, with its permissions.
    use std::os::unix::fs::PermissionsExt;
    let csv = dir.path().join("out.csv");
    std::fs::write(&csv, "old\n").unwrap();
    std::fs::set_permissions(&csv, std::fs::Permissions::from_mode(0o640)).unwrap();
    succeed(lcx().args(["export", "-o"]).arg(&csv).arg("--db").arg(&db));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("experiment_id,"), "{text}");
    let mode = std::fs::metadata(&csv).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
    // An export that fails (an unknown experiment) leaves it as it was.
    let out = lcx()
        .args(["export", "nosuch", "-o"])
        .arg(&csv)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), text);
    let mut expected = files.clone();
    expected.push("out.csv".into());
    expected.sort();
    assert_eq!(names(dir.path()), expected);
}

/// A publish writes each page whole through a new temporary file: a link
/// planted at the old fixed temporary name (`index.tmp~`) is not written
/// through, and a manifest edited to list a file outside the site's
/// folder deletes nothing there.
#[test]
fn a_publish_writes_through_no_planted_link_and_deletes_only_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let db = recorded(dir.path());
    let site = dir.path().join("site");
    succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    let before = std::fs::read(&db).unwrap();
    std::os::unix::fs::symlink(&db, site.join("index.tmp~")).unwrap();
    std::fs::remove_file(site.join("index.html")).unwrap();
    // The manifest names a file of experiment 99, which is gone: its files
    // would be deleted.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "mine\n").unwrap();
    let manifest = site.join(".lcx-site.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let mut entry = json["experiments"]["1"].clone();
    entry["files"] = serde_json::json!(["../victim.txt", "e/../../victim.txt"]);
    json["experiments"]["99"] = entry;
    std::fs::write(&manifest, json.to_string()).unwrap();
    succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    assert_eq!(std::fs::read(&db).unwrap(), before);
    assert!(std::fs::read_to_string(site.join("index.html"))
        .unwrap()
        .contains("<html"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// An experiment with no gate reads a neutral `completed` on the index,
/// never a PASS, and a regressed verdict shows on its row.
#[test]
fn the_index_says_completed_without_a_gate_and_shows_a_regression() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "slow.toml",
        "name = \"slow\"\nworkload = \"command\"\niterations = 6\nwarmup = 1\nhost_lock = false\n\n\
         [[arms]]\nname = \"a\"\ncommand = 'for i in 1 2 3 4 5 6; do echo \"{\\\"t\\\": 1.$i}\"; done'\n\n\
         [[arms]]\nname = \"b\"\ncommand = 'for i in 1 2 3 4 5 6; do echo \"{\\\"t\\\": 2.$i}\"; done'\n",
    );
    let db = dir.path().join("lcx.db");
    succeed(lcx().arg("run").arg(&file).arg("--db").arg(&db));
    let site = dir.path().join("site");
    succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    let row = index
        .lines()
        .find(|l| l.starts_with("<tr data-name=\"slow\""))
        .unwrap_or_else(|| panic!("{index}"));
    assert!(row.contains("data-check=\"completed\""), "{row}");
    assert!(
        row.contains("<span class=\"badge neutral\">completed</span>"),
        "{row}"
    );
    assert!(
        !row.contains("PASS") && !row.contains("badge pass"),
        "{row}"
    );
    assert!(row.contains("regressed: b 0.58×"), "{row}");
    let page = std::fs::read_to_string(site.join("e/1.html")).unwrap();
    assert!(!page.contains("badge pass"), "{page}");

    // A scan (one arm along an axis): a bigger input that costs more is no
    // regression on the index either.
    let scan = write(
        dir.path(),
        "grow.toml",
        "name = \"grow\"\nworkload = \"command\"\niterations = 6\nwarmup = 1\nhost_lock = false\n\n\
         [[arms]]\nname = \"a\"\ncommand = 'for i in 1 2 3 4 5 6; do echo \"{\\\"t\\\": {n}.$i}\"; done'\n\n\
         [sweep]\n\"{n}\" = [1, 2]\n",
    );
    succeed(lcx().arg("run").arg(&scan).arg("--db").arg(&db));
    succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&db));
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    let row = index
        .lines()
        .find(|l| l.starts_with("<tr data-name=\"grow\""))
        .unwrap_or_else(|| panic!("{index}"));
    assert!(row.contains("data-check=\"completed\""), "{row}");
    assert!(!row.contains("regressed"), "{row}");
}

/// The export names each value's host, date and commit, and a sweep's
/// export the arm's value on each axis.
#[test]
fn export_carries_host_date_commit_and_the_sweep_axes() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "sw.toml",
        "name = \"sw\"\nworkload = \"command\"\niterations = 2\nwarmup = 0\nhost_lock = false\n\n\
         [[arms]]\nname = \"a\"\ncommand = 'echo \"{\\\"t\\\": $N}\"; echo \"{\\\"t\\\": $N}\"'\n\n\
         [[arms]]\nname = \"b\"\ncommand = 'echo \"{\\\"t\\\": $N}\"; echo \"{\\\"t\\\": $N}\"'\n\n\
         [sweep]\n\"env.N\" = [3, 7]\n",
    );
    let db = dir.path().join("lcx.db");
    succeed(
        lcx()
            .env("LCX_HOSTNAME", "laptop")
            .arg("run")
            .arg(&file)
            .arg("--db")
            .arg(&db),
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE experiments SET git_commit = 'abc1234'", [])
        .unwrap();
    let date: String = conn
        .query_row("SELECT created_at FROM experiments", [], |r| r.get(0))
        .unwrap();
    drop(conn);
    let csv = succeed(lcx().args(["export", "sw", "--db"]).arg(&db));
    let lines: Vec<&str> = csv.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header[10..], ["host", "date", "commit", "n"], "{csv}");
    assert_eq!(lines.len(), 1 + 4 * 2, "{csv}");
    for line in &lines[1..] {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[10..13], ["laptop", date.as_str(), "abc1234"], "{csv}");
        // The arm's point is its axis value, and the value it printed.
        assert_eq!(cells[13], cells[8], "{csv}");
        assert!(cells[3].contains(cells[13]), "{csv}");
    }
    let points: std::collections::BTreeSet<&str> = lines[1..]
        .iter()
        .map(|l| l.rsplit(',').next().unwrap())
        .collect();
    assert_eq!(points.into_iter().collect::<Vec<_>>(), ["3", "7"], "{csv}");
    let json = succeed(
        lcx()
            .args(["export", "sw", "--format", "json", "--db"])
            .arg(&db),
    );
    let value: serde_json::Value = serde_json::from_str(
        json.lines()
            .find(|l| l.starts_with(r#"{"record":"value","#))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(value["host"], "laptop", "{value}");
    assert_eq!(value["date"], date.as_str(), "{value}");
    assert_eq!(value["commit"], "abc1234", "{value}");
    let point: f64 = value["n"].as_str().unwrap().parse().unwrap();
    assert_eq!(Some(point), value["value"].as_f64(), "{value}");
    // The JSON export still imports.
    let copy = dir.path().join("copy.db");
    let dump = dir.path().join("sw.jsonl");
    std::fs::write(&dump, &json).unwrap();
    succeed(lcx().arg("import").arg(&dump).arg("--db").arg(&copy));
}
