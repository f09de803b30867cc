//! The reference of the experiment file: every key the reader takes, with
//! its type, default, the workloads it applies to and what it does. `lcx
//! schema` prints it and `docs/experiment-file.md` is its output; a test
//! holds it to the reader's own key lists, so a key cannot be read without
//! being documented here, nor documented without being read.

/// One key of the experiment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KeyDoc {
    /// The table it sits in: `` (the top), `repeats`, `arms`,
    /// `arms.executor`, `matrix`, `sweep`, `columns`, `gate`, `guard`, `executor`,
    /// `measurement`.
    pub table: &'static str,
    pub key: &'static str,
    /// TOML type(s).
    pub kind: &'static str,
    /// What applies when the key is absent.
    pub default: &'static str,
    /// The workloads that take it.
    pub workloads: &'static str,
    pub about: &'static str,
}

const ALL: &str = "all";
const LCX: &str = "train, bench-forward, bench-trainer";
const COMMAND: &str = "command";

const fn key(
    table: &'static str,
    key: &'static str,
    kind: &'static str,
    default: &'static str,
    workloads: &'static str,
    about: &'static str,
) -> KeyDoc {
    KeyDoc {
        table,
        key,
        kind,
        default,
        workloads,
        about,
    }
}

/// Every key, table by table, in the order a file usually gives them.
pub const KEYS: &[KeyDoc] = &[
    key("", "name", "string", "required", ALL, "The experiment's name: experiments of one name form a history (`lcx history`). One line of visible text (no control or bidi character), at most 200 characters."),
    key("", "description", "string", "\"\"", ALL, "One line shown under the report's title."),
    key("", "notes", "string", "\"\"", ALL, "Free text kept with the experiment and shown in its report."),
    key("", "workload", "string", "required", ALL, "`command` (your own programs), `train` (the embedded trainer), `bench-forward` or `bench-trainer` (`lcx bench`)."),
    key("", "config", "string (path)", "the code's defaults (benches: configs/default.toml)", LCX, "The trainer config every arm starts from, relative to this file."),
    key("", "set", "array of `key=value` strings", "[]", LCX, "Config overrides for every arm (after `config`, before `--set` and the arm's own)."),
    key("", "iterations", "integer ≥ 1", "required", ALL, "Iterations per cell, the warm-up included: training iterations, timed bench repetitions, or the metric lines (runs, with `timing = \"process\"`) a command gives; a command reads it as `LCX_ITERATIONS`. `lcx run --runs N` sets it to N plus the warm-up."),
    key("", "warmup", "integer or `\"auto\"`", "0", ALL, "The first iterations of each cell: run and recorded, left out of every statistic, and counted in `iterations` (`iterations = 11, warmup = 1` measures 10, as `lcx run --runs 10` does); `\"auto\"` detects them per cell (MSER)."),
    key("", "repeats", "integer ≥ 1, or a table", "1", ALL, "Cells per arm, the arms taking turns; a `[repeats]` table (`min`, `max`, `precision`) adds rounds until the speedups are precise enough."),
    key("", "baseline", "string (an arm's name)", "the first arm", ALL, "The arm every other is compared with."),
    key("", "order", "string", "`interleaved`", ALL, "`interleaved` (A B A B), `randomized` (rounds as interleaved, each round's arms in an order drawn from `order_seed`, so what the host does at one position of a round falls on every arm in turn) or `sequential` (A A B B)."),
    key("", "order_seed", "integer ≥ 0", "0", ALL, "With `order = \"randomized\"`: the seed each round's order is drawn from (stored with the experiment: a resume runs the same rounds)."),
    key("", "timing", "string", "`lines`", COMMAND, "`process`: lcx times each run of the command (process/wall_seconds, …); `instructions`: lcx runs each under valgrind's cachegrind and records its counts (process/instructions, process/estimated_cycles, cache misses), which load cannot move, so a gate on them decides on a busy host; `lines`: the command prints its own JSON metric lines."),
    key("", "variable_iterations", "boolean", "false", COMMAND, "Arms may print fewer lines than `iterations` (at least one) and still complete, or more, which are all stored; otherwise lines past `iterations` are counted, not stored."),
    key("", "timeout", "string (`\"90s\"`, `\"10m\"`, `\"2h\"`) or seconds", "none", ALL, "The longest one cell may run, at most 30 days: past it its process group is killed and it is recorded failed (\"timed out after 10m\")."),
    key("", "setup", "string or array of strings", "none", ALL, "Run once before each arm's first cell of an `lcx run`, outside every cell's time, in the arm's working directory and environment; if it fails, the arm's cells are recorded failed. Local cells only."),
    key("", "prepare", "string or array of strings", "none", ALL, "Run before each cell (after the host lock is taken, before the cell's clock starts); if it fails, that cell is recorded failed. Local cells only."),
    key("", "cleanup", "string or array of strings", "none", ALL, "Run once after the run's last cell for every arm that had a cell in it (its setup failed or not), also after Ctrl-C; a failure is reported, the cells' records stand. Local cells only."),
    key("", "host_lock", "boolean", "true", ALL, "`false`: cells do not wait for other `lcx run`s measuring on this host."),
    key("", "repository", "string (path)", "the repository holding this file", ALL, "The git repository of arms at a `revision`."),
    key("", "build", "string (a shell command)", "none", COMMAND, "Run once in the checkout of every command arm at a revision without a `build` of its own."),
    key("", "arms", "array of tables (`[[arms]]`)", "required, or `[matrix]`", ALL, "The arms compared (at most 1,000); see the `arms` keys."),
    key("", "matrix", "table", "none", ALL, "One arm per combination of values; see the `matrix` keys."),
    key("", "sweep", "table", "none", ALL, "Every arm at every point of one or more axes, each compared with the baseline at the same point; the report finds where each arm starts to pay (the crossover). See the `sweep` keys."),
    key("", "columns", "array of tables (`[[columns]]`)", "every metric", ALL, "The report table's columns; see the `columns` keys."),
    key("", "gate", "table", "none", ALL, "The rule `lcx report --check` judges; see the `gate` keys."),
    key("", "guard", "array of tables (`[[guard]]`)", "none", ALL, "Metrics that must not get worse; see the `guard` keys."),
    key("", "executor", "table", "`kind = \"local\"`", ALL, "Where cells run: locally or as Slurm jobs; see the `executor` keys."),
    key("", "measurement", "table", "defaults below", ALL, "How a busy host is handled; see the `measurement` keys."),
    key("repeats", "min", "integer ≥ 1", "required in the table", ALL, "Rounds always run."),
    key("repeats", "max", "integer ≥ min", "required in the table", ALL, "Rounds at most."),
    key("repeats", "precision", "number in (0, 1)", "required in the table", ALL, "Stop when every judged speedup's 95 % interval is within ± this fraction."),
    key("arms", "name", "string", "required", ALL, "The arm's name (letters, digits, `-`, `_`, `.`)."),
    key("arms", "label", "string", "the name", ALL, "What the report's Mode column shows (visible text: no control or bidi character)."),
    key("arms", "set", "array of `key=value` strings", "[]", LCX, "This arm's config overrides (last, after `--set`)."),
    key("arms", "args", "array of strings", "[]", LCX, "Extra flags of the lcx workload, e.g. `[\"--amp\"]`; a command arm takes its arguments in `command`."),
    key("arms", "command", "string or array of strings", "required", COMMAND, "The program: an array runs as it is, a string of plain words as those words; a string with shell syntax runs through `sh -c` (a timed arm has the shell's start-up taken off)."),
    key("arms", "shell", "boolean", "false", COMMAND, "`true`: a timed arm's string runs through `sh -c` even when it is plain words (its start-up taken off as for any string with shell syntax); a `[matrix]` or `[sweep]` `\"{NAME}\"` key sets it on every arm grown from one command when one of its values needs a shell."),
    key("arms", "env", "table of strings", "{}", ALL, "Environment variables of the arm's cells, on top of lcx's (`LCX_ITERATIONS`, `LCX_ARM`, …)."),
    key("arms", "requires", "string", "none", ALL, "`cuda`: the arm's cells are skipped (and said so) where CUDA is absent."),
    key("arms", "timing", "string", "the file's", COMMAND, "As the top-level `timing`, for this arm."),
    key("arms", "variable_iterations", "boolean", "the file's", COMMAND, "As the top-level `variable_iterations`, for this arm."),
    key("arms", "timeout", "string or seconds", "the file's", ALL, "As the top-level `timeout`, for this arm."),
    key("arms", "setup", "string or array of strings", "the file's", ALL, "As the top-level `setup`, for this arm."),
    key("arms", "prepare", "string or array of strings", "the file's", ALL, "As the top-level `prepare`, for this arm."),
    key("arms", "cleanup", "string or array of strings", "the file's", ALL, "As the top-level `cleanup`, for this arm."),
    key("arms", "revision", "string (a git revision or `worktree`)", "the code as it is", ALL, "The arm runs that revision's build (built once, cached)."),
    key("arms", "build", "string (a shell command)", "the file's `build`", COMMAND, "Run once in the arm's checkout at its revision."),
    key("arms", "cpus", "string (`\"0-3,6\"`)", "wherever the kernel schedules", ALL, "The CPUs the arm's cells are pinned to."),
    key("arms", "executor", "table", "the file's `[executor]`", ALL, "This arm's own sbatch options; see the `arms.executor` keys."),
    key("arms.executor", "partition", "string", "the file's", ALL, "sbatch `--partition`."),
    key("arms.executor", "account", "string", "the file's", ALL, "sbatch `--account`."),
    key("arms.executor", "qos", "string", "the file's", ALL, "sbatch `--qos`."),
    key("arms.executor", "time", "string", "the file's", ALL, "sbatch `--time` (Slurm's own limit)."),
    key("arms.executor", "cpus_per_task", "integer", "the file's", ALL, "sbatch `--cpus-per-task`."),
    key("arms.executor", "mem", "string", "the file's", ALL, "sbatch `--mem`."),
    key("arms.executor", "gres", "string", "the file's", ALL, "sbatch `--gres`, e.g. `gpu:1`."),
    key("arms.executor", "constraint", "string", "the file's", ALL, "sbatch `--constraint`."),
    key("arms.executor", "extra", "array of strings", "the file's", ALL, "More sbatch flags, as given."),
    key("matrix", "KEY", "array of values", "none", ALL, "One arm per combination, at most 1,000 arms in all: a dotted key is a config `--set`, `--flag` is appended to `args`, `env.NAME` sets a variable (named as an arm's `env` keys are), `\"{NAME}\"` replaces `{NAME}` in a command arm's command as hyperfine's `-P`/`-L` do (and sets `$NAME` unless lcx's environment has it or it starts with `LCX_`), `revision` sets the arm's revision."),
    key("sweep", "KEY", "array of values", "none", ALL, "An axis: its values in order, in `[matrix]`'s forms (a dotted config key, `--flag`, `env.NAME` read by a command as `$NAME`, `\"{NAME}\"` replaced in the command, `revision`). Several keys make a grid; with the arms, at most 1,000 arms in all. A sweep of one arm is a scan: each point against the arm's first, reported per point, never as a regression."),
    key("sweep", "axis", "string (a key of the table)", "the only key", ALL, "The axis crossovers run along, required with several keys (TOML reads a table's keys sorted, not as written): each combination of the other keys is a series with a crossover of its own."),
    key("columns", "metric", "string", "required", ALL, "The metric shown."),
    key("columns", "label", "string", "the metric", ALL, "The column's header (visible text)."),
    key("columns", "show", "string", "`value`", ALL, "`value`, `speedup` or `both`."),
    key("columns", "direction", "string", "the metric's (else `lower`)", ALL, "`lower`, `higher` (better) or `none` (shown, never judged)."),
    key("columns", "fold", "string", "`mean` (`min` for a timed command's wall time)", ALL, "`mean` of the post-warm-up iterations, `median` of them (what a typical iteration took: a few runs several times slower move it not at all), `min` (the fastest: what the work costs with the least the host added), or `last` (each cell's last value). The wall time of commands lcx times (`timing = \"process\"`) folds to `min` by default when the file has at least 2 repeats."),
    key("gate", "metric", "string", "required", ALL, "The metric judged."),
    key("gate", "min_speedup", "number > 0", "one of this or `max_slowdown`", ALL, "> 1: PASS when the arm is shown at least this much faster; ≤ 1: a non-inferiority margin."),
    key("gate", "max_slowdown", "number in [0, 1)", "one of this or `min_speedup`", ALL, "PASS when the arm is shown at most this fraction slower (0.03: 3 %)."),
    key("gate", "min_effect", "number in [0, 1)", "0.05", ALL, "The smallest relative change a verdict counts."),
    key("gate", "arm", "string", "every arm but the baseline", ALL, "The arm judged (in a sweep: at each point, against the baseline at that point)."),
    key("gate", "from", "a value of the sweep's axis", "every point", ALL, "Sweeps: judge the points from this one on (\"≥ 1.05× at hidden 2048 and above\")."),
    key("gate", "at", "array of the axis' values", "every point", ALL, "Sweeps: judge these points."),
    key("gate", "crossover_at_most", "a value of the sweep's axis", "none", ALL, "Sweeps: the arm must pay by `min_speedup` (default 1 + `min_effect`) at this point and every one after it."),
    key("guard", "metric", "string", "required", ALL, "The metric that must not get worse."),
    key("guard", "margin", "number ≥ 0", "required", ALL, "How much worse it may get, in its own units."),
    key("guard", "direction", "string", "the metric's", ALL, "`lower` or `higher` (better)."),
    key("guard", "arm", "string", "every arm but the baseline", ALL, "The arm guarded."),
    key("guard", "baseline", "string", "the experiment's baseline", ALL, "The arm it is compared with."),
    key("guard", "fold", "string", "`mean`", ALL, "As in `[[columns]]`."),
    key("guard", "paired", "boolean", "false", ALL, "Compare per-seed differences (cells of one repeat share a seed)."),
    key("executor", "kind", "string", "`local`", ALL, "`local` or `slurm` (one job per cell)."),
    key("executor", "max_parallel", "integer from 1 to 1024", "1", ALL, "Slurm cells in flight."),
    key("executor", "placement", "string", "`same-node`", ALL, "`same-node`, `spread` or `any`: where a Slurm experiment's cells run."),
    key("executor", "requeue", "boolean", "false", ALL, "Let Slurm requeue a job; the cell then starts again."),
    key("executor", "partition", "string", "none", ALL, "sbatch `--partition` for every arm."),
    key("executor", "account", "string", "none", ALL, "sbatch `--account`."),
    key("executor", "qos", "string", "none", ALL, "sbatch `--qos`."),
    key("executor", "time", "string", "none", ALL, "sbatch `--time`."),
    key("executor", "cpus_per_task", "integer", "none", ALL, "sbatch `--cpus-per-task`."),
    key("executor", "mem", "string", "none", ALL, "sbatch `--mem`."),
    key("executor", "gres", "string", "none", ALL, "sbatch `--gres`."),
    key("executor", "constraint", "string", "none", ALL, "sbatch `--constraint`."),
    key("executor", "extra", "array of strings", "[]", ALL, "More sbatch flags."),
    key("measurement", "max_foreign_cpu", "number > 0 (cores)", "0.5, or 10 % of the CPUs when less", ALL, "Foreign load above which a cell counts as contended."),
    key("measurement", "rerun_contended", "integer from 0 to 10", "0", ALL, "Run a contended cell again up to this many times."),
    key("measurement", "wait_for_quiet", "string or seconds", "none", ALL, "Wait this long at most (30 days at most) for a quiet host before each cell."),
    key("measurement", "pin", "boolean", "false", ALL, "Pin every arm's cells to one set of CPUs chosen when the experiment is created."),
];

/// The reference as markdown: one table per TOML table.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# The experiment file\n\n\
         Every key `lcx run` reads, generated from lcx's own reference (`lcx schema`);\n\
         a key missing here is refused by the reader, and the test suite keeps the two\n\
         equal. Paths are relative to the experiment file. `lcx init` writes a\n\
         commented file to start from.\n",
    );
    let mut table = None;
    for k in KEYS {
        if table != Some(k.table) {
            table = Some(k.table);
            let title = match k.table {
                "" => "Top level".to_string(),
                "arms" => "`[[arms]]`".to_string(),
                "columns" => "`[[columns]]`".to_string(),
                "guard" => "`[[guard]]`".to_string(),
                "arms.executor" => "`[arms.executor]` (an arm's own sbatch options)".to_string(),
                other => format!("`[{other}]`"),
            };
            out.push_str(&format!(
                "\n## {title}\n\n| key | type | default | workloads | what it does |\n|---|---|---|---|---|\n"
            ));
        }
        let cell = |s: &str| s.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            k.key,
            cell(k.kind),
            cell(k.default),
            k.workloads,
            cell(k.about)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::read::{
        ARM_EXECUTOR_KEYS, ARM_KEYS, COLUMN_KEYS, EXPERIMENT_EXECUTOR_KEYS, GATE_KEYS, GUARD_KEYS,
        MEASUREMENT_KEYS, REPEATS_KEYS, TOP_KEYS,
    };
    use super::*;

    /// Every key the reader takes is in the reference, and every key of
    /// the reference is one the reader takes, table by table.
    #[test]
    fn the_reference_has_exactly_the_keys_the_reader_takes() {
        let executor: Vec<&str> = EXPERIMENT_EXECUTOR_KEYS
            .iter()
            .chain(ARM_EXECUTOR_KEYS)
            .copied()
            .collect();
        let tables: [(&str, &[&str]); 9] = [
            ("", TOP_KEYS),
            ("repeats", REPEATS_KEYS),
            ("arms", ARM_KEYS),
            ("arms.executor", ARM_EXECUTOR_KEYS),
            ("columns", COLUMN_KEYS),
            ("gate", GATE_KEYS),
            ("guard", GUARD_KEYS),
            ("executor", &executor),
            ("measurement", MEASUREMENT_KEYS),
        ];
        for (table, read) in tables {
            let mut documented: Vec<&str> = KEYS
                .iter()
                .filter(|k| k.table == table)
                .map(|k| k.key)
                .collect();
            let mut read = read.to_vec();
            documented.sort_unstable();
            read.sort_unstable();
            assert_eq!(documented, read, "table `{table}`");
        }
        let known: Vec<&str> = tables
            .iter()
            .map(|(t, _)| *t)
            .chain(["matrix", "sweep"])
            .collect();
        for k in KEYS {
            assert!(known.contains(&k.table), "unknown table {:?}", k.table);
        }
    }

    /// The committed reference is what `lcx schema` prints.
    #[test]
    fn docs_experiment_file_is_the_generated_reference() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/experiment-file.md");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == reference_markdown(),
            "docs/experiment-file.md is out of date: `lcx schema > docs/experiment-file.md`"
        );
    }
}
