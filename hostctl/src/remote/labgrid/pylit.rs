//! The Python literals `labgrid-client show` prints (`pprint.pformat` of a resource's dict):
//! dicts, lists, tuples, strings (adjacent ones joined, as pformat splits long ones), integers,
//! `True`, `False`, `None`. Anything else is an error, never a guess.

use std::fmt;

/// A parsed literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Str(String),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
}

impl Value {
    /// The value under the string key `key` of a dict.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(items) => items
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Why a text is not such a literal, with the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub offset: usize,
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// Nesting beyond this is refused: a resource's dict is three levels deep.
const MAX_DEPTH: usize = 32;

/// Parses one literal filling all of `text` (surrounding white space allowed).
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        i: 0,
    };
    let v = p.value(0)?;
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(p.err("text after the value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn err(&self, what: &'static str) -> ParseError {
        ParseError {
            offset: self.i,
            what,
        }
    }

    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        match self.peek() {
            Some(b'{') => self.dict(depth),
            Some(b'[') => self.seq(b']', depth),
            Some(b'(') => self.seq(b')', depth),
            Some(b'\'' | b'"') => self.strings(),
            Some(b'-' | b'0'..=b'9') => self.int(),
            Some(c) if c.is_ascii_alphabetic() => self.word(),
            Some(_) => Err(self.err("unexpected character")),
            None => Err(self.err("unexpected end")),
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.i += 1;
        let mut items = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.i += 1;
                return Ok(Value::Dict(items));
            }
            let k = self.value(depth + 1)?;
            if self.peek() != Some(b':') {
                return Err(self.err("expected `:`"));
            }
            self.i += 1;
            let v = self.value(depth + 1)?;
            items.push((k, v));
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {}
                _ => return Err(self.err("expected `,` or `}`")),
            }
        }
    }

    /// A list, or a tuple (also a parenthesized single value, as pformat wraps long strings).
    fn seq(&mut self, close: u8, depth: usize) -> Result<Value, ParseError> {
        self.i += 1;
        let mut items = Vec::new();
        let mut comma = false;
        loop {
            if self.peek() == Some(close) {
                self.i += 1;
                if close == b')' && items.len() == 1 && !comma {
                    return Ok(items.remove(0));
                }
                return Ok(Value::List(items));
            }
            items.push(self.value(depth + 1)?);
            comma = false;
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    comma = true;
                }
                Some(c) if c == close => {}
                _ => return Err(self.err("expected `,` or a closing bracket")),
            }
        }
    }

    /// One string literal, or several adjacent ones joined.
    fn strings(&mut self) -> Result<Value, ParseError> {
        let mut out = String::new();
        while let Some(q @ (b'\'' | b'"')) = self.peek() {
            self.string(q, &mut out)?;
        }
        Ok(Value::Str(out))
    }

    fn string(&mut self, quote: u8, out: &mut String) -> Result<(), ParseError> {
        self.i += 1;
        loop {
            let start = self.i;
            while self
                .s
                .get(self.i)
                .is_some_and(|&c| c != quote && c != b'\\' && c != b'\n')
            {
                self.i += 1;
            }
            out.push_str(&self.text[start..self.i]);
            match self.s.get(self.i) {
                Some(&c) if c == quote => {
                    self.i += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.i += 1;
                    out.push(self.escape()?);
                }
                _ => return Err(self.err("unterminated string")),
            }
        }
    }

    fn escape(&mut self) -> Result<char, ParseError> {
        let c = *self.s.get(self.i).ok_or_else(|| self.err("bad escape"))?;
        self.i += 1;
        let digits = match c {
            b'\\' => return Ok('\\'),
            b'\'' => return Ok('\''),
            b'"' => return Ok('"'),
            b'n' => return Ok('\n'),
            b'r' => return Ok('\r'),
            b't' => return Ok('\t'),
            b'x' => 2,
            b'u' => 4,
            b'U' => 8,
            _ => return Err(self.err("bad escape")),
        };
        let hex = self
            .text
            .get(self.i..self.i + digits)
            .ok_or_else(|| self.err("bad escape"))?;
        let code = u32::from_str_radix(hex, 16).map_err(|_| self.err("bad escape"))?;
        self.i += digits;
        char::from_u32(code).ok_or_else(|| self.err("bad escape"))
    }

    fn int(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        self.i += 1;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.text[start..self.i]
            .parse()
            .map(Value::Int)
            .map_err(|_| ParseError {
                offset: start,
                what: "bad integer",
            })
    }

    fn word(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_alphanumeric) {
            self.i += 1;
        }
        match &self.text[start..self.i] {
            "True" => Ok(Value::Bool(true)),
            "False" => Ok(Value::Bool(false)),
            "None" => Ok(Value::None),
            _ => Err(ParseError {
                offset: start,
                what: "unknown name (only True, False, None)",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Str(v.to_owned())
    }

    /// The dict labgrid-client 26.0.1 prints for an acquired NetworkService, wrapped by pformat.
    #[test]
    fn parse_pylit_network_service_dict() {
        let text = "{'acquired': 'x86',\n 'avail': True,\n 'cls': 'NetworkService',\n \
                    'params': {'address': '127.0.0.1',\n            'extra': {'proxy': \
                    'localhost', 'proxy_required': False},\n            'port': 36228,\n  \
                    'username': 'root'}}";
        let v = parse(text).unwrap();
        assert_eq!(v.get("cls"), Some(&s("NetworkService")));
        assert_eq!(v.get("avail"), Some(&Value::Bool(true)));
        let params = v.get("params").unwrap();
        assert_eq!(params.get("port"), Some(&Value::Int(36228)));
        let extra = params.get("extra").unwrap();
        assert_eq!(extra.get("proxy_required"), Some(&Value::Bool(false)));
        assert_eq!(
            extra.get("proxy").and_then(Value::as_str),
            Some("localhost")
        );
    }

    /// pformat's split long strings, escapes, both quotes, tuples, lists and None.
    #[test]
    fn parse_pylit_strings_and_sequences() {
        assert_eq!(parse("('abc'\n 'def')").unwrap(), s("abcdef"));
        assert_eq!(
            parse(r#""it's" 'a\\b\n\x41\u00e9'"#).unwrap(),
            s("it'sa\\b\nAé")
        );
        assert_eq!(
            parse("[1, -2, (None,), ()]").unwrap(),
            Value::List(vec![
                Value::Int(1),
                Value::Int(-2),
                Value::List(vec![Value::None]),
                Value::List(vec![]),
            ])
        );
        assert_eq!(parse(" {} ").unwrap(), Value::Dict(vec![]));
    }

    /// Malformed or foreign text is refused with where it went wrong, never panics.
    #[test]
    fn parse_pylit_malformed_input_errors() {
        for (bad, what) in [
            ("{'a' 1}", "expected `:`"),
            ("{'a': 1", "expected `,` or `}`"),
            ("'abc", "unterminated string"),
            ("'\\q'", "bad escape"),
            ("'\\x4'", "bad escape"),
            ("OrderedDict([])", "unknown name"),
            ("1 2", "text after the value"),
            ("99999999999999999999", "bad integer"),
            ("", "unexpected end"),
            ("'\\U0011ffff'", "bad escape"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.to_string().contains(what), "{bad}: {err}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(parse(&deep).unwrap_err().to_string().contains("nested"));
    }
}
