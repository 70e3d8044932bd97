//! `lg:PLACE` targets: a board booked through a labgrid coordinator. kprofctl acquires the place
//! unless this user holds it already (and then leaves it held), reads the board's ssh from the
//! place's `NetworkService` and releases what it acquired when done, on an error and on Ctrl-C.
//! All of it through labgrid's own `labgrid-client` ([`client`]); docs/labgrid.md.

mod booking;
mod client;
mod pylit;
mod service;
mod show;

use super::session::SshArgs;
use super::target::Target;
use anyhow::Context as _;
pub use booking::Booking;
use client::Client;
use service::NetworkService;
use show::PlaceInfo;

/// How a target names a labgrid place.
pub const PREFIX: &str = "lg:";

/// The coordinator of `lg:PLACE` targets, shared by `deploy`, `run` and `fetch`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LabgridArgs {
    /// labgrid coordinator of lg:PLACE targets, as labgrid-client takes it (default:
    /// $LG_COORDINATOR, else labgrid-client's 127.0.0.1:20408).
    #[arg(short = 'x', long = "coordinator", value_name = "HOST:PORT")]
    pub coordinator: Option<String>,
}

/// Resolves a target as [`SshArgs::resolve`] does (`-J`, `ProxyJump`), and `lg:PLACE` through
/// labgrid (an isolated exporter's host becomes the last jump host). Keep the
/// [`Booking`] until the board is no longer needed: dropping it releases a place kprofctl
/// acquired.
pub fn resolve(
    spec: &str,
    args: &LabgridArgs,
    ssh: &SshArgs,
) -> anyhow::Result<(Target, Option<Booking>)> {
    let Some(pattern) = spec.strip_prefix(PREFIX) else {
        return Ok((ssh.resolve(spec)?, None));
    };
    if pattern.is_empty() || pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        anyhow::bail!("bad target `{spec}`: expected lg:PLACE with a labgrid place name");
    }
    let client = Client::find(args.coordinator.as_deref()).with_context(|| spec.to_owned())?;
    let mut booking = acquire(&client, spec, pattern)?;
    let info = show(&client, spec, pattern)?;
    if let Some(b) = &mut booking {
        b.rename(&info.name);
    }
    let service = NetworkService::of(spec, &info)?;
    let mut target = service.target(spec)?;
    if let Some(proxy) = &service.proxy {
        // An isolated exporter: the board is reached through the exporter host, itself
        // reached as `-J`/`~/.ssh/config` say (its own ProxyJump hops first).
        let mut hop = ssh.resolve(proxy)?;
        let mut hops = std::mem::take(&mut hop.jump);
        hops.push(hop);
        target.jump = hops;
    } else if ssh.jump.is_some() {
        target.jump = ssh
            .resolve(&format!("{}@{}:{}", target.user, target.host, target.port))?
            .jump;
    }
    crate::term::note(format_args!(
        "{spec}: place {} ({}), {}: {target}",
        info.name,
        if booking.is_some() {
            "acquired"
        } else {
            "already acquired by you"
        },
        service.resource
    ));
    Ok((target, booking))
}

/// `acquire`; `None` when this user holds the place already. A place someone else holds is an
/// error naming the holder.
fn acquire(client: &Client, spec: &str, pattern: &str) -> anyhow::Result<Option<Booking>> {
    let reply = client
        .run(pattern, &["acquire"])
        .with_context(|| spec.to_owned())?;
    if reply.ok {
        return Ok(Some(Booking::hold(client.clone(), pattern, spec)));
    }
    let message = reply.message();
    if held_by_caller(&reply.stderr) {
        return Ok(None);
    }
    if message.contains("already acquired") {
        let holder = show(client, spec, pattern)
            .ok()
            .and_then(|i| Some((i.name, i.acquired?)));
        let (name, holder) = holder.unwrap_or_else(|| (pattern.to_owned(), "another user".into()));
        anyhow::bail!(
            "{spec}: place {name} is acquired by {holder}, not by you here: nothing was run on \
             its board; wait until it is released (labgrid-client -p {name} show) \
             [labgrid-client: {message}]"
        );
    }
    if message.contains("matches nothing") {
        anyhow::bail!(
            "{spec}: no labgrid place matches `{pattern}` at the {}: `labgrid-client places` \
             lists them",
            client.coordinator()
        );
    }
    anyhow::bail!(
        "{spec}: `{}` failed at the {}: {message}",
        client.command_line(pattern, &["acquire"]),
        client.coordinator()
    )
}

/// labgrid-client 26's refusal to acquire a place this user already holds on this host:
/// `You have already acquired place NAME.` (held on another host, it goes on `on HOST. ...`).
fn held_by_caller(stderr: &str) -> bool {
    stderr.lines().any(|l| {
        l.split_once("You have already acquired place ")
            .is_some_and(|(_, rest)| rest.ends_with('.') && !rest.contains(' '))
    })
}

fn show(client: &Client, spec: &str, pattern: &str) -> anyhow::Result<PlaceInfo> {
    let reply = client
        .run(pattern, &["show"])
        .with_context(|| spec.to_owned())?;
    if !reply.ok {
        anyhow::bail!(
            "{spec}: `{}` failed at the {}: {}",
            client.command_line(pattern, &["show"]),
            client.coordinator(),
            reply.message()
        );
    }
    show::parse(&reply.stdout).map_err(|why| {
        anyhow::anyhow!(
            "{spec}: cannot read `{}`'s output ({why}): kprofctl reads labgrid-client 26's",
            client.command_line(pattern, &["show"])
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// labgrid-client's refusals: held by the caller here vs. elsewhere or by someone else.
    #[test]
    fn acquire_labgrid_already_acquired_messages() {
        assert!(held_by_caller(
            "labgrid-client: Error: You have already acquired place x86.\n"
        ));
        assert!(!held_by_caller(
            "labgrid-client: Error: You have already acquired place x86 on pc2. To work \
             simultaneously, execute 'labgrid-client -p x86 allow pc/root' on pc2.\n"
        ));
        assert!(!held_by_caller(
            "labgrid-client: Error: Place x86 is already acquired by vm/bob. To work \
             simultaneously, bob can execute 'labgrid-client -p x86 allow vm/root' on vm.\n"
        ));
    }
}
