//! Whether a command written as a string needs a shell, for arms lcx times
//! (`timing = "process"`; other command arms and hooks run strings through
//! `sh -c`, whose start-up no one times). A string of plain words (`sleep
//! 0.05`, `./bench --size 4`) runs as those words, without `sh -c`: a shell
//! would add its own start-up to every timed run. A string with anything a
//! shell interprets (quotes, `$`, globs, pipes, `;`, `&&`, redirections,
//! `NAME=value` prefixes, `~`) or a shell builtin as its program (`cd`,
//! `exec`, `export`…) runs through `sh -c`, and lcx takes the shell's own
//! start-up off its timed runs (`bench::process`).

/// Characters a shell reads as themselves in an unquoted word.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ',' | ':' | '@' | '%' | '+')
}

/// Programs that exist only inside a shell (builtins and keywords that
/// have no program of the same name on a usual system).
/// (`time` too: a keyword where `sh` is bash.)
const SHELL_ONLY: &[&str] = &[
    ".", ":", "alias", "bg", "break", "builtin", "case", "cd", "command", "continue", "declare",
    "do", "done", "elif", "else", "esac", "eval", "exec", "exit", "export", "fg", "fi", "for",
    "function", "getopts", "hash", "if", "jobs", "let", "local", "popd", "pushd", "read",
    "readonly", "return", "select", "set", "shift", "shopt", "source", "then", "time", "times",
    "trap", "type", "typeset", "ulimit", "umask", "unalias", "unset", "until", "wait", "while",
];

/// The words of `command` when it holds no shell syntax, else `None`
/// (run it through `sh -c`).
pub fn words(command: &str) -> Option<Vec<String>> {
    let words: Vec<String> = command
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    let first = words.first()?;
    // `=` is an argument's (`--size=4`) after the program, an assignment
    // (`X=1 prog`) in its place.
    let program_plain = first.chars().all(plain) && !SHELL_ONLY.contains(&first.as_str());
    let args_plain = words[1..]
        .iter()
        .all(|w| w.chars().all(|c| plain(c) || c == '='));
    (program_plain && args_plain).then_some(words)
}

/// Whether `command`, given as a string, runs through `sh -c`.
pub fn needs_shell(command: &str) -> bool {
    words(command).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_run_as_they_are() {
        assert_eq!(words("sleep 0.05").unwrap(), ["sleep", "0.05"]);
        assert_eq!(
            words("  ./bench\t--size=4 --out a,b  ").unwrap(),
            ["./bench", "--size=4", "--out", "a,b"]
        );
        assert_eq!(
            words("./target/release/x --size 4 -j2 a@b 50% c+d").unwrap(),
            [
                "./target/release/x",
                "--size",
                "4",
                "-j2",
                "a@b",
                "50%",
                "c+d"
            ]
        );
        assert_eq!(words("true").unwrap(), ["true"]);
    }

    #[test]
    fn what_a_shell_would_read_otherwise_needs_one() {
        for s in [
            "sleep 0.05; true",
            "a && b",
            "a | b",
            "echo $HOME",
            "echo 'x y'",
            "echo \"x\"",
            "ls *.rs",
            "cat < f",
            "echo x > f",
            "X=1 prog",
            "cd dir",
            "exec sleep 1",
            "for i in 1 2",
            "ls ~",
            "echo `date`",
            "a\nb",
            "a \\ b",
            "(a)",
            "a # note",
            "",
            "   ",
        ] {
            assert!(needs_shell(s), "{s:?}");
        }
    }
}
