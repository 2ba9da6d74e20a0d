//! One integration-test binary: real ckptd, real ckpt, real sockets, real git.

mod harness;

mod agents;
mod auto;
mod blame;
mod cli;
mod conversations;
mod crash;
mod daemon;
mod dialogs;
mod durability;
mod edits;
mod engine;
mod events;
mod exactness;
mod exclusions;
mod faults;
mod hooks;
mod house;
mod import;
mod inprocess;
mod journal_damage;
mod mcp;
mod newcomer;
mod protocol;
mod races;
mod readme;
mod reload;
mod restore;
mod restore_races;
mod retention;
mod roundtrip;
mod security;
mod service;
mod soak;
mod unrecorded;
