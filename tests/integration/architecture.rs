//! ARCHITECTURE.md's rules about what may depend on what, checked against
//! the manifests and the sources: each test fails when a change breaks the
//! rule it names.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The names of a manifest's `[dependencies]` (not dev- or build-).
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

/// The Rust files under `dir` (relative to the repository) whose text
/// contains `needle`, leaving out `except` (a folder inside `dir`).
fn files_naming(dir: &str, needle: &str, except: Option<&str>) -> Vec<String> {
    let root = root();
    let except = except.map(|e| root.join(e));
    walkdir::WalkDir::new(root.join(dir))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .filter(|e| except.as_ref().is_none_or(|x| !e.path().starts_with(x)))
        .filter(|e| names(&std::fs::read_to_string(e.path()).unwrap(), needle))
        .map(|e| e.path().strip_prefix(&root).unwrap().display().to_string())
        .collect()
}

/// Whether `text` has `needle` at the start of a name (`tch::` in
/// `use tch::Tensor`, not in `Batch::default`).
fn names(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn a_name_is_found_only_at_its_start() {
    assert!(names("use tch::Tensor;", "tch::"));
    assert!(names("tch::Kind", "tch::"));
    assert!(!names("let b = Batch::default();", "tch::"));
}

#[test]
fn no_libtorch_and_no_clap_in_lcx_core() {
    let deps = dependencies(&root().join("crates/lcx-core/Cargo.toml"));
    for banned in ["tch", "torch-sys", "lcx-trainer", "clap"] {
        assert!(
            !deps.contains(&banned.to_string()),
            "lcx-core depends on {banned}"
        );
    }
}

#[test]
fn no_clap_in_the_trainer() {
    let deps = dependencies(&root().join("crates/lcx-trainer/Cargo.toml"));
    assert!(
        deps.contains(&"tch".to_string()),
        "the trainer is the crate on tch"
    );
    assert!(
        !deps.contains(&"clap".to_string()),
        "lcx-trainer depends on clap"
    );
}

/// The command line's package depends on the trainer (for `lcx-torch`),
/// so its library could call it: only `src/bin/lcx-torch/` may.
#[test]
fn only_lcx_torch_names_the_trainer_or_tch() {
    for needle in ["lcx_trainer", "tch::"] {
        assert_eq!(
            files_naming("src", needle, Some("src/bin/lcx-torch")),
            Vec::<String>::new(),
            "files outside src/bin/lcx-torch naming `{needle}`"
        );
    }
    assert_eq!(
        files_naming("crates/lcx-core/src", "tch::", None),
        Vec::<String>::new()
    );
}

#[test]
fn no_sql_outside_the_store() {
    assert_eq!(
        files_naming(
            "crates/lcx-core/src",
            "rusqlite",
            Some("crates/lcx-core/src/store")
        ),
        Vec::<String>::new()
    );
    for dir in ["src", "crates/lcx-trainer/src"] {
        assert_eq!(
            files_naming(dir, "rusqlite", None),
            Vec::<String>::new(),
            "{dir}"
        );
    }
}

/// The machine's facts (`system/`: the host's name, boot, CPUs, load) and
/// its ceiling (`bench/peak/`) sit below the experiment, its records and
/// its reports: they name none of them (a host key made from the store's
/// host name once closed a circle through the store and the fingerprint).
#[test]
fn the_host_and_its_ceiling_name_nothing_above_them() {
    for dir in [
        "crates/lcx-core/src/system",
        "crates/lcx-core/src/bench/peak",
    ] {
        for above in [
            "crate::store",
            "crate::experiment",
            "crate::report",
            "crate::session",
            "crate::publish",
        ] {
            assert_eq!(
                files_naming(dir, above, None),
                Vec::<String>::new(),
                "{dir} names {above}"
            );
        }
    }
}

/// The renderers of reports, query rows and the site's pages turn data
/// into strings; what writes them is elsewhere.
#[test]
fn no_io_in_the_renderers() {
    for needle in [
        "std::fs",
        "File::",
        "std::io::stdout",
        "println!",
        "eprintln!",
    ] {
        for renderer in [
            "crates/lcx-core/src/report/render.rs",
            "crates/lcx-core/src/report/words.rs",
            "crates/lcx-core/src/report/plots.rs",
            "crates/lcx-core/src/report/rows.rs",
            "crates/lcx-core/src/publish/pages.rs",
            "crates/lcx-core/src/publish/chart.rs",
            "crates/lcx-core/src/publish/html.rs",
        ] {
            assert_eq!(
                files_naming(renderer, needle, None),
                Vec::<String>::new(),
                "`{needle}` in a renderer"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// The floors of lcx-core: which room may name which.

/// ARCHITECTURE.md's table of lcx-core's floors: each room (a top-level
/// folder `report/` or file `metrics.rs` of `crates/lcx-core/src`) with
/// its floor. A room names only rooms on lower floors.
fn floors() -> std::collections::BTreeMap<String, u32> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let table = text
        .split("### Floors of `lcx-core`")
        .nth(1)
        .expect("ARCHITECTURE.md has a section '### Floors of `lcx-core`'");
    let mut floors = std::collections::BTreeMap::new();
    for line in table.lines().skip_while(|l| !l.starts_with('|')) {
        let Some(row) = line.strip_prefix('|') else {
            break;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Ok(floor) = cells[0].parse::<u32>() else {
            continue; // the header and its rule
        };
        for room in cells[1].split(',') {
            floors.insert(room.trim().trim_matches('`').to_string(), floor);
        }
    }
    floors
}

/// The lines of a source file that are code outside its test modules,
/// numbered from 1, and the names of the test-only modules it declares in
/// their own files (`#[cfg(test)] mod tests;`).
fn code_lines(text: &str) -> (Vec<(usize, &str)>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let (mut kept, mut test_files) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
        if line.trim() == "#[cfg(test)]" && next.contains("mod ") {
            let name = next.split("mod ").nth(1).unwrap_or("");
            if let Some(file) = name.strip_suffix(';') {
                test_files.push(file.trim().to_string());
                i += 2;
                continue;
            }
            if next.ends_with('{') {
                let indent = &line[..line.len() - line.trim_start().len()];
                let close = format!("{indent}}}");
                i += 2;
                while i < lines.len() && lines[i] != close {
                    i += 1;
                }
                i += 1;
                continue;
            }
        }
        if !line.trim_start().starts_with("//") {
            kept.push((i + 1, line));
        }
        i += 1;
    }
    (kept, test_files)
}

/// The crate-level names a file's code uses, with their line: the name
/// after `crate::` (each of `crate::{a, b::c}`), or after as many
/// `super::` as climb to the crate's root from `module` (the file's module
/// path: `["report", "builder"]` for report/builder.rs or report/builder/mod.rs).
fn crate_names(text: &str, module: &[String]) -> Vec<(String, usize)> {
    let (lines, _) = code_lines(text);
    let mut code = String::new();
    let mut line_at = Vec::new();
    for (n, l) in &lines {
        line_at.extend(std::iter::repeat_n(*n, l.len() + 1));
        code.push_str(l);
        code.push('\n');
    }
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let push_after = |at: usize, rest: &str, out: &mut Vec<(String, usize)>| {
        if let Some(group) = rest.strip_prefix('{') {
            // Names at the group's first depth: `a` and `b` of `{a, b::{c}}`.
            let mut depth = 0;
            let mut start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && depth == 0 && !c.is_whitespace() => {
                        start = false;
                        let name = ident(&group[k..]);
                        if !name.is_empty() && name != "self" {
                            out.push((name, line_at[at]));
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.push((name, line_at[at]));
            }
        }
    };
    for (at, _) in code.match_indices("crate::") {
        if at_start(&code, at) {
            push_after(at, &code[at + 7..], &mut out);
        }
    }
    let mut at = 0;
    while let Some(found) = code[at..].find("super::") {
        let start = at + found;
        let mut end = start;
        let mut climbs = 0;
        while code[end..].starts_with("super::") {
            climbs += 1;
            end += 7;
        }
        if at_start(&code, start) && climbs >= module.len() {
            push_after(start, &code[end..], &mut out);
        }
        at = end;
    }
    out
}

/// Whether `code[at..]` starts a path (not `lcx_crate::` or `my_super::`).
fn at_start(code: &str, at: usize) -> bool {
    !code[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Every name from `crate_names` that breaks the floors: a room naming a
/// room on its own floor or above, or a name that is no room of the table.
fn floor_violations(
    floors: &std::collections::BTreeMap<String, u32>,
    room: &str,
    file: &str,
    text: &str,
    module: &[String],
) -> Vec<String> {
    let Some(&mine) = floors.get(room) else {
        return vec![format!(
            "{file}: its room `{room}` is not in the floors table"
        )];
    };
    let mut out = Vec::new();
    for (name, line) in crate_names(text, module) {
        let other = [format!("{name}/"), format!("{name}.rs")]
            .into_iter()
            .find(|r| floors.contains_key(r));
        match other {
            None => out.push(format!(
                "{file}:{line}: `crate::{name}` is no room of the floors table"
            )),
            Some(other) if other == room => {}
            Some(other) if floors[&other] >= mine => out.push(format!(
                "{file}:{line}: `{room}` (floor {mine}) names `{other}` (floor {})",
                floors[&other]
            )),
            Some(_) => {}
        }
    }
    out
}

/// The Rust files of `crates/lcx-core/src`, each with its room, its
/// module path, and whether it is compiled only for tests.
fn core_files() -> Vec<(PathBuf, String, Vec<String>)> {
    let src = root().join("crates/lcx-core/src");
    let mut test_only = Vec::new();
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let e = e.unwrap();
        if e.path().extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let rel = e.path().strip_prefix(&src).unwrap();
        let mut module: Vec<String> = rel
            .with_extension("")
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        for t in code_lines(&text).1 {
            let mut m = module.clone();
            m.push(t);
            test_only.push(m);
        }
        if module.len() == 1 && module[0] == "lib" {
            continue;
        }
        let first = rel.iter().next().unwrap().to_string_lossy().into_owned();
        let room = if rel.components().count() > 1 {
            format!("{first}/")
        } else {
            first
        };
        files.push((e.path().to_path_buf(), room, module));
    }
    files.retain(|(_, _, m)| !test_only.iter().any(|t| m.starts_with(t)));
    files
}

/// ARCHITECTURE.md's floors hold in the code: no room of lcx-core names a
/// room on its own floor or above it (a circle, or an arrow back up), and
/// every room is on the table.
#[test]
fn lcx_core_rooms_name_only_rooms_below_them() {
    let floors = floors();
    assert!(floors.len() >= 15, "the floors table reads {floors:?}");
    let mut violations = Vec::new();
    for (path, room, module) in core_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.strip_prefix(root()).unwrap().display().to_string();
        violations.extend(floor_violations(&floors, &room, &file, &text, &module));
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// The check above is not blind: planted arrows back up, across a floor,
/// through `super::` and in a `use` group are found; tests and comments
/// are not code.
#[test]
fn a_planted_arrow_back_up_is_found() {
    let floors = floors();
    let module = |p: &str| p.split('/').map(String::from).collect::<Vec<_>>();
    let planted = "use crate::{escape, report::stats};\n\
                   // crate::session in a comment\n\
                   fn f() { super::super::publish::x(); crate::metrics::y(); }\n\
                   #[cfg(test)]\nmod tests {\n    use crate::session::Session;\n}\n";
    let found = floor_violations(
        &floors,
        "store/",
        "store/x.rs",
        planted,
        &module("store/read"),
    );
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("`store/` (floor 6) names `report/` (floor 8)"));
    assert!(found[1].contains("names `publish/`"));
    assert!(found.iter().all(|f| !f.contains("session")));
    // Two rooms of one floor may not name each other either.
    let same = floors["game/"];
    assert_eq!(floors["system/"], same);
    assert_eq!(
        floor_violations(
            &floors,
            "game/",
            "game/x.rs",
            "use crate::system::Root;\n",
            &module("game/x")
        )
        .len(),
        1
    );
    assert!(floor_violations(
        &floors,
        "game/",
        "game/x.rs",
        "use crate::nowhere;\n",
        &module("game/x")
    )[0]
    .contains("no room of the floors table"));
}

// ---------------------------------------------------------------------------
// Functions a newcomer can read, and a map that names every module.

/// Every function of a source file with its length in lines, from its
/// `fn` line to the line that closes it at the same indentation (the
/// layout `cargo fmt` writes). A declaration without a body is left out.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let mut words = code.split_whitespace().peekable();
        while words.peek().is_some_and(|w| {
            w.starts_with("pub")
                || ["const", "async", "unsafe", "extern", "\"C\"", "default"].contains(w)
        }) {
            words.next();
        }
        if words.next() != Some("fn") {
            continue;
        }
        let name: String = words
            .next()
            .unwrap_or("")
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // A one-line body, or a trait's declaration ending in `;`.
        if code.ends_with('}') || code.ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (i + 1..lines.len()).find(|&j| lines[j] == close) {
            // A signature that ends in `;` over several lines has no body.
            if lines[i..end].iter().any(|l| l.trim_end().ends_with('{')) {
                out.push((name, i + 1, end - i + 1));
            }
        }
    }
    out
}

/// The longest a function may be where the code changes most, and the
/// longest a runner file may be (issue 61's bounds).
const MAX_FUNCTION_LINES: usize = 150;
const MAX_RUNNER_FILE_LINES: usize = 600;
const WATCHED: [&str; 5] = [
    "crates/lcx-core/src/report",
    "crates/lcx-core/src/experiment/plan",
    "crates/lcx-core/src/experiment/run",
    "crates/lcx-core/src/session",
    "src",
];

/// No function over `MAX_FUNCTION_LINES` lines in the most-edited places
/// (the report path, the plan reader, the runner, the session, the
/// commands) and no runner file over `MAX_RUNNER_FILE_LINES`; the longest
/// are printed, so a test log shows how close each is (`--nocapture`).
#[test]
fn no_function_a_newcomer_cannot_read() {
    let mut all = Vec::new();
    let mut long_files = Vec::new();
    for dir in WATCHED {
        for e in walkdir::WalkDir::new(root().join(dir)) {
            let e = e.unwrap();
            if e.path().extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let file = e.path().strip_prefix(root()).unwrap().display().to_string();
            let text = std::fs::read_to_string(e.path()).unwrap();
            let lines = text.lines().count();
            if dir.ends_with("experiment/run") && lines > MAX_RUNNER_FILE_LINES {
                long_files.push(format!("{file}: {lines} lines"));
            }
            for (name, at, len) in function_lengths(&text) {
                all.push((len, format!("{file}:{at} {name}")));
            }
        }
    }
    all.sort_by(|a, b| b.cmp(a));
    for (len, place) in all.iter().take(10) {
        println!("{len:5} {place}");
    }
    let long: Vec<String> = all
        .iter()
        .filter(|(len, _)| *len > MAX_FUNCTION_LINES)
        .map(|(len, place)| format!("{place}: {len} lines"))
        .collect();
    assert!(
        long.is_empty() && long_files.is_empty(),
        "over {MAX_FUNCTION_LINES} lines: {long:#?}; runner files over {MAX_RUNNER_FILE_LINES}: {long_files:#?}"
    );
}

#[test]
fn a_planted_long_function_is_measured() {
    let body = "    x();\n".repeat(200);
    let text = format!(
        "pub(crate) fn short() -> u8 {{ 1 }}\nimpl A {{\n    pub fn long(&self) {{\n{body}    }}\n}}\ntrait T {{\n    fn declared(&self);\n}}\n"
    );
    assert_eq!(function_lengths(&text), vec![("long".to_string(), 3, 202)]);
}

/// The Rust files of a crate's `src` (relative to it) that ARCHITECTURE.md's
/// codemap does not name: a file is named by its name in a row that also
/// names its folder (`schedule.rs` in the `experiment/run/` row), a folder's
/// `mod.rs` by the folder (`peak/` in the `bench/` row); a crate's `lib.rs` and `main.rs`, and a
/// module's unit tests in `tests.rs`, go without.
fn unnamed_in_codemap(codemap: &str, src: &Path) -> Vec<String> {
    let rows: Vec<&str> = codemap.lines().filter(|l| l.starts_with('|')).collect();
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(src).sort_by_file_name() {
        let e = e.unwrap();
        if e.path().extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let rel = e.path().strip_prefix(src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy().into_owned();
        let folder = rel
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let named = match name.as_str() {
            "lib.rs" | "main.rs" if folder.is_empty() => true,
            // A module's unit tests, kept beside it in their own file.
            "tests.rs" => true,
            "mod.rs" => {
                let last = folder.rsplit('/').next().unwrap_or(&folder);
                rows.iter().any(|r| r.contains(&format!("{last}/")))
            }
            _ if folder.is_empty() => rows.iter().any(|r| r.contains(&name)),
            _ => {
                let last = folder.rsplit('/').next().unwrap_or(&folder);
                rows.iter().any(|r| {
                    r.contains(&name)
                        && (r.contains(&format!("{last}/"))
                            || r.contains(&format!("{folder}/{name}")))
                })
            }
        };
        if !named {
            out.push(rel.display().to_string());
        }
    }
    out
}

/// ARCHITECTURE.md's codemap names every module of the three crates.
#[test]
fn the_codemap_names_every_module() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let codemap = text
        .split("## Codemap")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .expect("ARCHITECTURE.md has a '## Codemap' section");
    let mut unnamed = Vec::new();
    for src in ["crates/lcx-core/src", "crates/lcx-trainer/src", "src"] {
        for file in unnamed_in_codemap(codemap, &root().join(src)) {
            unnamed.push(format!("{src}/{file}"));
        }
    }
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's codemap does not name: {unnamed:#?}"
    );
}

#[test]
fn a_planted_module_missing_from_the_codemap_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["lib.rs", "a.rs", "run/mod.rs", "run/cell.rs", "run/new.rs"] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    let codemap = "| `a.rs` | x |\n| `run/` | `cell.rs` (a cell) |\n";
    assert_eq!(unnamed_in_codemap(codemap, dir.path()), vec!["run/new.rs"]);
}
