//! The agents ckpt plugs into: what each sends its hooks and wants back ([`agent`]; what an
//! after-tool hook says of its tool, [`tools`]), how their
//! settings get ckpt's hooks ([`install`]; OpenCode's and Kilo's plugin, [`plugin`]; with the trust each asks for: [`codex_trust`],
//! [`gemini_trust`]), and their conversations — read from the agents' own session files and
//! forked at a prompt ([`conversation`]).

pub mod agent;
pub mod cline;
pub mod cline_hooks;
pub mod codex_hooks;
pub mod codex_trust;
pub mod conversation;
pub mod gemini_trust;
pub mod install;
pub mod plugin;
pub mod tools;

pub use agent::Agent;
