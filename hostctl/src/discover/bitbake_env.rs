//! Reads the output of `bitbake -e RECIPE`: the recipe's variables, fully expanded.

use std::collections::HashMap;

/// Variables of one `bitbake -e` run (shell functions and history comments left out).
#[derive(Debug, Clone, Default)]
pub struct BitbakeEnv {
    vars: HashMap<String, String>,
}

impl BitbakeEnv {
    /// Parses `bitbake -e` output: `[export ]NAME="value"` lines, where bitbake escapes `"`,
    /// `` ` `` and `$` with a backslash and writes newlines as ` \` plus a line break.
    pub fn parse(text: &str) -> Self {
        let mut vars = HashMap::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            // Shell functions: `name() {` ... `}` on a line of its own.
            if line.ends_with("() {") {
                for l in lines.by_ref() {
                    if l == "}" {
                        break;
                    }
                }
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            let Some((name, rest)) = line.split_once("=\"") else {
                continue;
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let mut raw = rest.to_string();
            while !closes_value(&raw) {
                match lines.next() {
                    Some(next) => {
                        raw.push('\n');
                        raw.push_str(next);
                    }
                    None => break,
                }
            }
            let raw = raw.strip_suffix('"').unwrap_or(&raw);
            vars.insert(name.to_string(), unescape(raw));
        }
        Self { vars }
    }

    /// A variable's value, if the output had it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Number of variables read.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// True when no variable was read (not `bitbake -e` output).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
}

/// True when the text ends with a `"` that bitbake did not escape.
fn closes_value(raw: &str) -> bool {
    // bitbake does not escape backslashes, so one before the quote always escapes it.
    raw.ends_with('"') && !raw.ends_with("\\\"")
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some('"' | '`' | '$') => out.push(chars.next().unwrap_or('\\')),
                // ` \` + newline is how bitbake writes a newline inside a value.
                Some('\n') => {
                    chars.next();
                    if out.ends_with(' ') {
                        out.pop();
                    }
                    out.push('\n');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}
