//! Quoting for the board's POSIX shell (busybox ash, dash, bash): every argument reaches the
//! program unchanged, whatever quotes, `;`, `$(...)` or newlines it holds.

/// One argument as a single-quoted shell word (`'` itself becomes `'\''`).
pub fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain {
        return arg.to_owned();
    }
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('\'');
    for c in arg.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// A command line of quoted words.
pub fn join<S: AsRef<str>>(args: &[S]) -> String {
    args.iter()
        .map(|a| quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words survive a real `sh -c` round trip byte for byte.
    #[test]
    fn quote_shell_words_roundtrip_sh() {
        let words = [
            "plain",
            "",
            "a b",
            "it's",
            "echo 1 > /dev/mychardrv; $(reboot) `id` \"x\" \\n",
            "line\nbreak",
            "*",
            "~root",
            "--",
        ];
        let script = format!("printf '%s\\0' {}", join(&words));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(out.status.success());
        let got: Vec<&[u8]> = out.stdout.split(|b| *b == 0).collect();
        assert_eq!(got.len(), words.len() + 1);
        for (w, g) in words.iter().zip(got) {
            assert_eq!(w.as_bytes(), g);
        }
    }
}
