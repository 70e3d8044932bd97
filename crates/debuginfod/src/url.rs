//! The protocol's URLs: `SERVER/buildid/ID/TYPE[/PATH]`.

use crate::Artifact;

/// The URL of `artifact` of `build_id` (validated) on `server` (no trailing `/`).
///
/// A source path is percent-encoded as elfutils does it (`curl_easy_escape` of the path
/// without its leading `/`, then `%2F` turned back into `/`): every byte but
/// `[A-Za-z0-9._~-]` and `/` becomes `%XX`.
pub(crate) fn artifact_url(server: &str, build_id: &str, artifact: Artifact<'_>) -> String {
    let base = format!("{server}/buildid/{build_id}/{}", artifact.kind());
    match artifact {
        Artifact::Source(path) => format!("{base}/{}", escape(path.trim_start_matches('/'))),
        _ => base,
    }
}

fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for &b in path.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain artifacts and escaped source paths, as elfutils builds them.
    #[test]
    fn artifact_url_source_escaped() {
        assert_eq!(
            artifact_url("http://s:8002", "abcd", Artifact::Debuginfo),
            "http://s:8002/buildid/abcd/debuginfo"
        );
        assert_eq!(
            artifact_url("http://s", "abcd", Artifact::Source("/usr/src/a b/c++#1.c")),
            "http://s/buildid/abcd/source/usr/src/a%20b/c%2B%2B%231.c"
        );
    }
}
