//! What `labgrid-client -p PLACE show` prints, as labgrid 26 formats it: the place's name, who
//! holds it (`acquired: HOST/USER` or `None`), and each acquired (or, while free, matching)
//! resource with its dict; an acquired resource whose exporter is gone is listed as orphaned.

use super::pylit::{self, Value};

/// A place as `show` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceInfo {
    pub name: String,
    /// `HOST/USER` of the holder, as labgrid names it.
    pub acquired: Option<String>,
    pub resources: Vec<Resource>,
}

/// One resource of the place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// `EXPORTER/GROUP/CLASS/NAME`.
    pub path: String,
    pub cls: String,
    pub avail: bool,
    pub params: Value,
}

/// Parses `show`'s output; an error says which line is not what labgrid 26 prints.
pub fn parse(text: &str) -> Result<PlaceInfo, String> {
    let mut lines = text.lines().peekable();
    let name = lines
        .next()
        .and_then(|l| l.strip_prefix("Place '")?.strip_suffix("':"))
        .ok_or("the first line is not `Place 'NAME':`")?
        .to_owned();
    let mut acquired = None;
    let mut resources = Vec::new();
    while let Some(line) = lines.next() {
        if let Some(holder) = line.strip_prefix("  acquired: ") {
            acquired = (holder != "None").then(|| holder.to_owned());
            continue;
        }
        if let Some(path) = orphan_header(line) {
            resources.push(orphan(path));
            continue;
        }
        let Some(path) = resource_header(line) else {
            continue;
        };
        let mut dict = String::new();
        while let Some(more) = lines.next_if(|l| l.starts_with("  ")) {
            dict.push_str(more);
            dict.push('\n');
        }
        let value = pylit::parse(&dict).map_err(|e| format!("resource {path}: {e}"))?;
        resources.push(resource(path, value)?);
    }
    Ok(PlaceInfo {
        name,
        acquired,
        resources,
    })
}

/// `Acquired resource 'N' (E/G/C/N):` or `Matching resource ...`: the path in parentheses.
fn resource_header(line: &str) -> Option<String> {
    let rest = line
        .strip_prefix("Acquired resource '")
        .or_else(|| line.strip_prefix("Matching resource '"))?;
    let (_, path) = rest.rsplit_once(" (")?;
    Some(path.strip_suffix("):")?.to_owned())
}

/// `Orphaned resource 'N' (E/G/C/N)`: acquired, but its exporter no longer lists it.
fn orphan_header(line: &str) -> Option<String> {
    let rest = line.strip_prefix("Orphaned resource '")?;
    let (_, path) = rest.rsplit_once(" (")?;
    Some(path.strip_suffix(')')?.to_owned())
}

/// An orphaned resource: its class from its path, not available, no params.
fn orphan(path: String) -> Resource {
    Resource {
        cls: path.split('/').nth(2).unwrap_or_default().to_owned(),
        path,
        avail: false,
        params: Value::Dict(Vec::new()),
    }
}

fn resource(path: String, value: Value) -> Result<Resource, String> {
    let cls = value
        .get("cls")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("resource {path}: no `cls`"))?
        .to_owned();
    let avail = matches!(value.get("avail"), Some(Value::Bool(true)));
    let params = value
        .get("params")
        .cloned()
        .ok_or_else(|| format!("resource {path}: no `params`"))?;
    Ok(Resource {
        path,
        cls,
        avail,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `show` of an acquired place, verbatim from labgrid-client 26.0.1.
    const ACQUIRED: &str = "Place 'x86':
  matches:
    exp1/board-x86/NetworkService
  acquired: vm/root
  acquired resources:
    exp1/board-x86/NetworkService/NetworkService
  created: 2026-11-26 17:49:06.750401
  changed: 2026-11-26 17:49:08.548296
Acquired resource 'NetworkService' (exp1/board-x86/NetworkService/NetworkService):
  {'acquired': 'x86',
   'avail': True,
   'cls': 'NetworkService',
   'params': {'address': '127.0.0.1',
              'extra': {'proxy': 'localhost', 'proxy_required': False},
              'port': 45999,
              'username': 'root'}}
Acquired resource 'SerialPort' (exp1/other/SerialPort/SerialPort):
  {'acquired': 'x86',
   'avail': False,
   'cls': 'SerialPort',
   'params': {'extra': {'proxy': 'localhost', 'proxy_required': True},
              'port': '/dev/ttyS0'}}
";

    /// The holder and each resource with its class, availability and params.
    #[test]
    fn parse_show_acquired_place_resources() {
        let info = parse(ACQUIRED).unwrap();
        assert_eq!(info.name, "x86");
        assert_eq!(info.acquired.as_deref(), Some("vm/root"));
        assert_eq!(info.resources.len(), 2);
        let ns = &info.resources[0];
        assert_eq!(ns.path, "exp1/board-x86/NetworkService/NetworkService");
        assert_eq!(ns.cls, "NetworkService");
        assert!(ns.avail);
        assert_eq!(ns.params.get("port"), Some(&Value::Int(45999)));
        assert_eq!(info.resources[1].cls, "SerialPort");
        assert!(!info.resources[1].avail);
    }

    /// A free place: `acquired: None`, its matching resources listed all the same.
    #[test]
    fn parse_show_free_place_matching() {
        let text = ACQUIRED
            .replace("acquired: vm/root", "acquired: None")
            .replace("Acquired resource", "Matching resource");
        let info = parse(&text).unwrap();
        assert_eq!(info.acquired, None);
        assert_eq!(info.resources.len(), 2);
    }

    /// Output that is not `show`'s is an error naming what is wrong.
    #[test]
    fn parse_show_foreign_output_errors() {
        assert!(parse("hello").unwrap_err().contains("Place 'NAME'"));
        let cut = &ACQUIRED[..ACQUIRED.find("'port': 45999").unwrap()];
        let err = parse(cut).unwrap_err();
        assert!(
            err.contains("exp1/board-x86/NetworkService/NetworkService"),
            "{err}"
        );
        let no_cls = ACQUIRED.replace("'cls': 'SerialPort',", "");
        assert!(parse(&no_cls).unwrap_err().contains("no `cls`"));
    }

    /// An acquired resource whose exporter is gone: listed, not available.
    #[test]
    fn parse_show_orphaned_resource_unavailable() {
        let text = "Place 'x86':\n  acquired: vm/root\nOrphaned resource 'NetworkService' \
                    (exp1/board-x86/NetworkService/NetworkService)\n";
        let info = parse(text).unwrap();
        assert_eq!(info.resources.len(), 1);
        assert_eq!(info.resources[0].cls, "NetworkService");
        assert_eq!(
            info.resources[0].path,
            "exp1/board-x86/NetworkService/NetworkService"
        );
        assert!(!info.resources[0].avail);
    }
}
