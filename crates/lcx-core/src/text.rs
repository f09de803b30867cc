//! Plain-English formatting shared by the runner's messages and the
//! reports, so that neither has to reach into the other for it.

/// `1 line`, `3 lines`: a count with its noun in the right number.
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
