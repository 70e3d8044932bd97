//! The board side over ssh: targets, authentication, host keys, transfers, detached runs.

mod auth;
pub mod board;
pub mod detached;
pub mod echo;
pub mod elf;
pub mod guard;
pub mod kernel_match;
mod known_hosts;
pub mod labgrid;
mod session;
pub mod shell;
mod ssh_config;
mod target;
pub mod transfer;
mod tunnel;

pub use session::{Remote, SshArgs};
pub use target::Target;
