//! The listing of a board's capture archives as kprofctl asks for it over ssh: one line
//! `SIZE PATH` per `*.kprof.tar.gz` (from `stat -c %s` or `wc -c`). It comes from the board,
//! so every line is checked; lines that are not a listing entry are skipped.

use crate::ARCHIVE_SUFFIX;

/// A finished capture archive on the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Archive name without [`ARCHIVE_SUFFIX`]: never empty, no `/`, no control character.
    pub id: String,
    /// The path on the board, as listed.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
}

/// Parses the board's output: entries sorted by id, each path once.
pub fn parse(stdout: &[u8]) -> Vec<Listed> {
    let mut captures: Vec<Listed> = Vec::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        let Some((size, path)) = line.trim().split_once(' ') else {
            continue;
        };
        let Ok(size) = size.trim().parse::<u64>() else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        let Some(id) = name.strip_suffix(ARCHIVE_SUFFIX) else {
            continue;
        };
        // The id names a local file and is printed: none of that for a name the agent never
        // makes.
        if id.is_empty() || id.chars().any(char::is_control) {
            continue;
        }
        if captures.iter().any(|c| c.path == path) {
            continue;
        }
        captures.push(Listed {
            id: id.to_owned(),
            path: path.to_owned(),
            size,
        });
    }
    captures.sort_by(|a, b| a.id.cmp(&b.id));
    captures
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes and paths of real entries are read; junk, empty ids, control characters and
    /// repeats are skipped.
    #[test]
    fn parse_listing_board_output() {
        let out = b"4096 /var/lib/kprof/captures/20250101-120000-b.kprof.tar.gz\n\
            12 /data/caps/20250101-110000-a.kprof.tar.gz\n\
            12 /data/caps/20250101-110000-a.kprof.tar.gz\n\
            x /data/caps/bad-size.kprof.tar.gz\n\
            7 /data/caps/.kprof.tar.gz\n\
            7 /data/caps/evil\x1b[2J.kprof.tar.gz\n\
            9 /data/caps/notes.txt\n\
            sh: stat: not found\n";
        let got = parse(out);
        assert_eq!(
            got,
            vec![
                Listed {
                    id: "20250101-110000-a".into(),
                    path: "/data/caps/20250101-110000-a.kprof.tar.gz".into(),
                    size: 12
                },
                Listed {
                    id: "20250101-120000-b".into(),
                    path: "/var/lib/kprof/captures/20250101-120000-b.kprof.tar.gz".into(),
                    size: 4096
                },
            ]
        );
    }
}
