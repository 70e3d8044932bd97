//! The board's ssh as a place's `NetworkService` gives it, made a [`Target`].

use super::pylit::Value;
use super::show::PlaceInfo;
use crate::remote::target::Target;
use anyhow::Context as _;

/// The board's ssh as its place's `NetworkService` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkService {
    /// `EXPORTER/GROUP/NetworkService/NAME`.
    pub resource: String,
    pub address: String,
    pub port: u16,
    pub username: String,
    /// The exporter host, when the exporter is isolated (`proxy_required`): the board is
    /// reached only through it as a jump host.
    pub proxy: Option<String>,
}

impl NetworkService {
    /// The place's one available `NetworkService`; an error names the place and what it has.
    pub fn of(spec: &str, info: &PlaceInfo) -> anyhow::Result<NetworkService> {
        let name = &info.name;
        let services: Vec<_> = info
            .resources
            .iter()
            .filter(|r| r.cls == "NetworkService")
            .collect();
        let service = match services.as_slice() {
            [one] => *one,
            [] => anyhow::bail!(
                "{spec}: place {name} has no NetworkService (its resources: {}): kprofctl \
                 reaches a board by the ssh its exporter exports as a NetworkService \
                 (docs/labgrid.md); nothing was run",
                list(info.resources.iter().map(|r| r.path.as_str()))
            ),
            many => anyhow::bail!(
                "{spec}: place {name} has {} NetworkServices ({}): kprofctl needs one; \
                 make a place per board",
                many.len(),
                list(many.iter().map(|r| r.path.as_str()))
            ),
        };
        let path = &service.path;
        if !service.avail {
            anyhow::bail!(
                "{spec}: {path} of place {name} is not available: its exporter is not \
                 connected to the coordinator (start it, or see labgrid-client resources)"
            );
        }
        let params = &service.params;
        let text = |key: &str| params.get(key).and_then(Value::as_str).map(str::to_owned);
        let address = text("address")
            .filter(|a| !a.is_empty())
            .ok_or_else(|| anyhow::anyhow!("{spec}: {path} of place {name} has no address"))?;
        let port = match params.get("port") {
            None => 22,
            Some(Value::Int(p)) => u16::try_from(*p).ok().filter(|p| *p != 0).ok_or_else(|| {
                anyhow::anyhow!("{spec}: {path} of place {name} has a bad port {p}")
            })?,
            Some(_) => {
                anyhow::bail!("{spec}: {path} of place {name} has a port that is not a number")
            }
        };
        let extra = params.get("extra");
        let proxy_required = matches!(
            extra.and_then(|e| e.get("proxy_required")),
            Some(Value::Bool(true))
        );
        let proxy = extra
            .and_then(|e| e.get("proxy"))
            .and_then(Value::as_str)
            .filter(|_| proxy_required)
            .map(str::to_owned);
        if proxy_required && proxy.is_none() {
            anyhow::bail!("{spec}: {path} of place {name} needs a proxy but names none");
        }
        Ok(NetworkService {
            resource: path.clone(),
            address,
            port,
            username: text("username").unwrap_or_default(),
            proxy,
        })
    }

    /// `username@address:port` resolved as a typed target (so `~/.ssh/config` applies to the
    /// address as it does for `labgrid-client ssh`), remembered under `spec`.
    pub fn target(&self, spec: &str) -> anyhow::Result<Target> {
        let host = if self.address.contains(':') {
            format!("[{}]", self.address)
        } else {
            self.address.clone()
        };
        let user = if self.username.is_empty() {
            String::new()
        } else {
            format!("{}@", self.username)
        };
        let mut target = Target::resolve(&format!("{user}{host}:{}", self.port))
            .with_context(|| format!("{spec}: the NetworkService {}", self.resource))?;
        target.spec = spec.to_owned();
        Ok(target)
    }
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = items.collect();
    if all.is_empty() {
        "none".to_owned()
    } else {
        all.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::labgrid::show;

    fn place(resources: &str) -> PlaceInfo {
        show::parse(&format!("Place 'p':\n  acquired: h/u\n{resources}")).unwrap()
    }

    const NS: &str = "Acquired resource 'NetworkService' (e/g/NetworkService/NetworkService):\n  \
                      {'avail': True, 'cls': 'NetworkService', 'params': {'address': 'fe80::1', \
                      'port': 2222, 'username': 'root', 'extra': {'proxy': 'gw', \
                      'proxy_required': PR}}}\n";

    /// address, port and username; the proxy only when the exporter requires it.
    #[test]
    fn resolve_labgrid_network_service_params() {
        let s = NetworkService::of("lg:p", &place(&NS.replace("PR", "False"))).unwrap();
        assert_eq!(s.address, "fe80::1");
        assert_eq!(s.port, 2222);
        assert_eq!(s.username, "root");
        assert_eq!(s.proxy, None);
        assert_eq!(s.resource, "e/g/NetworkService/NetworkService");
        let s = NetworkService::of("lg:p", &place(&NS.replace("PR", "True"))).unwrap();
        assert_eq!(s.proxy.as_deref(), Some("gw"));
    }

    /// No NetworkService, an unavailable one or a bad port: errors naming the place.
    #[test]
    fn resolve_labgrid_bad_place_errors() {
        let serial = "Acquired resource 'S' (e/g/SerialPort/S):\n  {'avail': True, 'cls': \
                      'SerialPort', 'params': {'port': '/dev/ttyS0'}}\n";
        let err = NetworkService::of("lg:p", &place(serial))
            .unwrap_err()
            .to_string();
        assert!(err.contains("place p has no NetworkService"), "{err}");
        assert!(err.contains("e/g/SerialPort/S"), "{err}");
        let gone = NS
            .replace("PR", "False")
            .replace("'avail': True", "'avail': False");
        let err = NetworkService::of("lg:p", &place(&gone))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not available"), "{err}");
        let port = NS.replace("PR", "False").replace("2222", "70000");
        let err = NetworkService::of("lg:p", &place(&port))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad port 70000"), "{err}");
        let two = format!("{}{}", NS.replace("PR", "False"), NS.replace("PR", "False"));
        let err = NetworkService::of("lg:p", &place(&two))
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 NetworkServices"), "{err}");
    }
}
