//! hyperfine's parameter placeholders, for command arms: `{VAR}` in a
//! command replaced by each value of a `[matrix]` or `[sweep]` key written
//! `"{VAR}"` (and of `lcx run --command`'s `-P`/`-L`, which write such a
//! sweep), and `$VAR` set to the value in the cell's environment where
//! lcx may set it (decision 0027).

/// The variable a `[matrix]` or `[sweep]` key names when it is written as
/// a placeholder, `{VAR}`.
pub fn key_variable(key: &str) -> Option<&str> {
    key.strip_prefix('{')?.strip_suffix('}')
}

/// `template` with every `{VAR}` of `values` replaced by its value, in one
/// pass from left to right (hyperfine's rule): a value's own text is never
/// read again, so a value that holds `{OTHER}` keeps it as it is. Where two
/// names could match at one place, the longer wins. `${VAR}` is the
/// shell's, not a placeholder after a `$`: it is left for the shell to
/// read the variable lcx sets (replaced, `${n}` would become `$1000`, an
/// empty positional parameter).
pub fn substitute(template: &str, values: &[(&str, &str)]) -> String {
    let mut keys: Vec<(String, &str)> = values
        .iter()
        .map(|(var, value)| (format!("{{{var}}}"), *value))
        .collect();
    keys.sort_by_key(|(key, _)| std::cmp::Reverse(key.len()));
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'text: while let Some(c) = rest.chars().next() {
        let shells = out.ends_with('$');
        for (key, value) in keys.iter().filter(|_| !shells) {
            if let Some(after) = rest.strip_prefix(key.as_str()) {
                out.push_str(value);
                rest = after;
                continue 'text;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether a parameter is also set as `$VAR` in the arm's environment:
/// not where lcx's own environment has a variable of that name (`-L PATH
/// …` replaces `{PATH}` and leaves `$PATH` alone) and not for the names lcx
/// gives its cells (`LCX_…`).
pub fn exported(var: &str) -> bool {
    !var.starts_with("LCX_") && std::env::var_os(var).is_none()
}

/// Whether `command` uses the parameter `var`: its `{VAR}`, or its `$VAR`
/// where lcx sets that variable ([`exported`]).
pub fn uses(command: &str, var: &str) -> bool {
    let placeholder = format!("{{{var}}}");
    let replaced = command
        .match_indices(&placeholder)
        .any(|(at, _)| !command[..at].ends_with('$'));
    replaced || (exported(var) && reads_variable(command, var))
}

/// Whether `command` reads the shell variable `var`: `$VAR` or `${VAR…}`
/// not followed by a character that would make a longer name (`$nn` and
/// `${nx}` are not `n`'s). A name a shell cannot read as a variable
/// (`1bad`: `$1` then `bad`) never is.
pub fn reads_variable(command: &str, var: &str) -> bool {
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let readable = var
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && var.chars().all(name_char);
    readable
        && command.match_indices('$').any(|(at, _)| {
            let after = &command[at + 1..];
            let after = after.strip_prefix('{').unwrap_or(after);
            after
                .strip_prefix(var)
                .is_some_and(|rest| !rest.starts_with(name_char))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_substituted_in_one_pass_as_hyperfine_does() {
        // hyperfine's `test_get_command_line_nonoverlapping`.
        let values = [("foo", "{bar} baz"), ("bar", "quux")];
        assert_eq!(
            substitute("echo {foo} {bar}", &values),
            "echo {bar} baz quux"
        );
        let values = [("v", "{w}"), ("w", "X")];
        assert_eq!(substitute("echo {v} {w}", &values), "echo {w} X");
        // Every place, text around it kept, names that share a start.
        let values = [("n", "1"), ("nn", "2")];
        assert_eq!(substitute("{n}{nn}-{n}é{x}", &values), "12-1é{x}");
        // `${n}` is the shell's variable, left for it.
        assert_eq!(
            substitute("echo ${n} {n} $n", &[("n", "5")]),
            "echo ${n} 5 $n"
        );
        // Where lcx does not set the variable, `${PATH}` is no use of `-L PATH`.
        assert!(!uses("echo ${PATH}", "PATH"));
        assert!(uses("echo {PATH}", "PATH"));
    }

    #[test]
    fn a_variable_is_read_as_dollar_name_or_braced_name_alone() {
        for command in [
            "echo $n",
            "python3 -c \"sum(range($n))\"",
            "echo ${n}",
            "x${n:-1}",
            "$n",
        ] {
            assert!(reads_variable(command, "n"), "{command}");
        }
        for command in [
            "echo $nn",
            "echo ${nx}",
            "echo n",
            "echo {n}",
            "echo $N",
            "echo $",
        ] {
            assert!(!reads_variable(command, "n"), "{command}");
        }
        assert!(reads_variable("echo $n_1.", "n_1"));
        assert!(!reads_variable("echo $1bad", "1bad"));
    }

    #[test]
    fn lcx_own_and_taken_names_are_not_exported() {
        assert!(!exported("PATH"));
        assert!(!exported("LCX_ARM"));
        assert!(exported("lcx_test_surely_unset_parameter_q"));
    }
}
