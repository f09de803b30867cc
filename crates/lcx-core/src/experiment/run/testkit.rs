//! What the runner's unit tests share: a command plan from a few lines of
//! TOML, runner options, a reporter that keeps what it is told (in the
//! words of [`crate::experiment::reporter::RecordingReporter`]), and an
//! experiment recorded in an in-memory store.

use std::path::{Path, PathBuf};

use super::cell::{Event, Reporter};
use super::{RunnerOptions, StopSignal};
use crate::experiment::plan::{self, Overrides, Plan};
use crate::store::{Fingerprint, Store};

/// A valid plan from `body` (arms and keys), named `t`, workload `command`.
pub(crate) fn plan(body: &str) -> Plan {
    let text = format!("name = \"t\"\nworkload = \"command\"\n{body}\n");
    plan::from_str(&text, Path::new("t.toml"), &Overrides::default())
        .unwrap_or_else(|e| panic!("test plan is invalid: {e}\n{text}"))
}

pub(crate) fn options() -> RunnerOptions {
    RunnerOptions {
        fail_fast: false,
        lcx_exe: PathBuf::from("lcx"),
        stop: StopSignal::new(),
        cuda_available: Some(false),
        takeover: false,
        precise_enough: None,
        keep_runs: false,
        detach: false,
        attach: false,
        host_lock: None,
    }
}

/// Keeps each event as the library's recording reporter names it, with its
/// reason or message where it has one (`warning a: …`, `skipped a#1: …`),
/// so that a test can look for the runner's words.
#[derive(Default)]
pub(crate) struct Recorder(pub Vec<String>);

impl Reporter for Recorder {
    fn report(&mut self, event: &Event<'_>) {
        let Some(head) = crate::experiment::reporter::recorded(event) else {
            return;
        };
        let detail = match event {
            Event::CellSkipped { reason, .. } => Some(*reason),
            Event::Warning { message, .. } | Event::Note { message, .. } => Some(message.as_str()),
            _ => None,
        };
        self.0.push(match detail {
            Some(detail) => format!("{head}: {detail}"),
            None => head,
        });
    }
}

/// `plan` recorded as a new experiment in an in-memory store.
pub(crate) fn recorded(plan: &Plan) -> (Store, i64) {
    let mut store = Store::open_in_memory().expect("an in-memory store");
    let id = super::create_experiment(
        &mut store,
        plan,
        "",
        vec!["test".into()],
        (None, None),
        Fingerprint::default(),
    )
    .expect("the experiment is recorded");
    (store, id)
}
