//! Plain-English formatting shared by the runner's messages, the reports
//! and the command line, so that none has to reach into another for it.

/// `1 line`, `3 lines`: a count with its noun in the right number.
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// An empty table that prints as a markdown table (comfy-table's
/// `ASCII_MARKDOWN` preset). Every table lcx prints starts here (reports,
/// `lcx query`, `list`, `history`, `compare`, `play`, `bench`), so that all
/// of them read alike and paste into a markdown document; a change of
/// style is made once, and the report snapshots show it.
pub fn markdown_table() -> comfy_table::Table {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    table
}

/// A duration as an experiment file writes one: `2h`, `10m`, `90s`,
/// `1.5s` (the largest unit that divides it).
pub fn duration_words(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{}s", (s * 1000.0).round() / 1000.0)
    }
}
