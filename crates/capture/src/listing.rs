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

/// Parses the board's output: entries oldest first ([`sequence`], then id), each path once.
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
    captures.sort_by(|a, b| order_key(&a.id).cmp(&order_key(&b.id)));
    captures
}

/// The capture directory's sequence number in an id `YYYYMMDD-HHMMSS-SEQ-SALT` (agents since
/// the manifest's `sequence`); `None` for the older `YYYYMMDD-HHMMSS-SALT`.
pub fn sequence(id: &str) -> Option<u64> {
    let fields: Vec<&str> = id.split('-').collect();
    match fields.as_slice() {
        [date, time, seq, _salt]
            if date.len() == 8 && time.len() == 6 && seq.bytes().all(|b| b.is_ascii_digit()) =>
        {
            seq.parse().ok()
        }
        _ => None,
    }
}

/// Oldest first: ids without a sequence number (older agents, which came first) by id, then
/// the numbered ones by number. A board without a real-time clock dates every capture
/// 1970-01-01 from its boot on, so the time in the id orders nothing across reboots.
fn order_key(id: &str) -> (Option<u64>, &str) {
    (sequence(id), id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captures of a board without a clock, rebooted between them (the time in the id went
    /// back to 1970-01-01 00:00), come out in the order the board made them: by sequence
    /// number, not by the time; ids of older agents come first.
    #[test]
    fn parse_listing_no_rtc_reboot_sequence_order() {
        let out = b"10 /c/19700101-000912-0002-77aa.kprof.tar.gz\n\
            10 /c/19700101-000014-0003-0b0b.kprof.tar.gz\n\
            10 /c/19700101-000020-0010-aaaa.kprof.tar.gz\n\
            10 /c/19700101-004500-0001-ffff.kprof.tar.gz\n\
            10 /c/19700101-000100-1234.kprof.tar.gz\n";
        let ids: Vec<String> = parse(out).into_iter().map(|c| c.id).collect();
        assert_eq!(
            ids,
            [
                "19700101-000100-1234",
                "19700101-004500-0001-ffff",
                "19700101-000912-0002-77aa",
                "19700101-000014-0003-0b0b",
                "19700101-000020-0010-aaaa",
            ]
        );
        assert_eq!(sequence("19700101-000020-0010-aaaa"), Some(10));
        assert_eq!(sequence("19700101-000100-1234"), None);
        assert_eq!(sequence("x-y-0001-z"), None);
    }

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
