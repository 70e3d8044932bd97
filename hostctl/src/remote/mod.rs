//! The board side over ssh: targets, authentication, host keys, transfers.
