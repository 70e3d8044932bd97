//! Text to HTML, and bytes to base64 for the `data:` URL of the inline flamegraph.

use std::fmt::{self, Display, Formatter};

/// Displays a string with `& < > " '` escaped, for element text and quoted attributes.
#[derive(Debug, Clone, Copy)]
pub struct Esc<'a>(pub &'a str);

impl Display for Esc<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// Standard base64 with padding (RFC 4648 §4), which `data:` URLs take.
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Markup characters in names (C++ templates, `<unknown>`) come out as entities.
    #[test]
    fn escape_html_markup_characters() {
        assert_eq!(Esc("a<b>&\"c'").to_string(), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(Esc("plain").to_string(), "plain");
    }

    /// base64 matches the RFC 4648 test vectors, padding included.
    #[test]
    fn encode_base64_rfc4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
    }
}
