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
