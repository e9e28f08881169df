//! Write gatehouse adapters and policy modules in Rust.
//!
//! A gatehouse plugin is a WebAssembly component built against the `gatehouse:plugin` WIT
//! package (`wit/gatehouse.wit`). This crate is a thin layer over the `wit_bindgen` bindings of
//! that package: plain Rust types instead of generated ones (so plugin logic is unit-testable
//! with plain `cargo test`), one trait per world and one export macro per trait.
//!
//! 1. Create a `cdylib` crate that depends on `gatehouse-sdk` (and `serde` for typed
//!    arguments).
//! 2. Implement [`Adapter`] (world `adapter`) or [`Policy`] (world `policy`) on a unit struct.
//! 3. Export it with [`export_adapter!`] or [`export_policy!`], once, at the crate root.
//! 4. Test the logic natively with `cargo test`: build a [`CallContext`] and a [`Call`] (or an
//!    [`Action`]) and call your trait method. With the `testing` feature (in
//!    `[dev-dependencies]` only), `gatehouse_sdk::testing::check_args` also checks that sample
//!    arguments satisfy both the manifest's input schema and your argument struct.
//! 5. Build the component with `cargo build --release --target wasm32-wasip2`, then pack and
//!    sign it with `gatehouse pack` (see the README).
//!
//! ```no_run
//! use gatehouse_sdk::{Adapter, Call, CallContext, Result, ToolError, ToolOutput, log};
//! use gatehouse_sdk::serde_json::json;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct EchoArgs {
//!     message: String,
//! }
//!
//! struct Echo;
//!
//! impl Adapter for Echo {
//!     fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput> {
//!         match call.capability() {
//!             "echo" => {
//!                 let args: EchoArgs = call.args()?;
//!                 log::debug(format!("echoing {} bytes", args.message.len()));
//!                 let length = args.message.chars().count();
//!                 Ok(ToolOutput::text(&args.message)
//!                     .with_structured(json!({ "message": args.message, "length": length })))
//!             }
//!             other => Err(ToolError::unknown_capability(other)),
//!         }
//!     }
//! }
//!
//! gatehouse_sdk::export_adapter!(Echo);
//! ```
//!
//! Adapters serve resources and prompts besides their tools (contract 0.6.0) with
//! [`Adapter::read_resource`], [`Adapter::get_prompt`] and [`Adapter::complete`], for what
//! their manifest declares (`[[resource]]`, `[[resource_template]]`, `[[prompt]]`).
//!
//! Adapters report progress, log to their caller and ask it questions (elicitation, sampling,
//! roots) through [`caller`] (contract 0.5.0), as far as their manifest's `[caller]` table
//! declares and the operator grants.
//!
//! Adapters reach their upstream with the blocking [`http`] client; a request the gateway
//! refuses comes back as [`http::HttpError::Denied`], and `?` turns it (like every
//! [`http::HttpError`] and `serde_json::Error`) into the documented [`ToolError`]. Policies
//! name tools with [`Action::tool`] and match them with [`policy::glob_match`]. The raw
//! bindings stay reachable in [`adapter::bindings`] and [`policy::bindings`].

#![deny(missing_docs)]

pub mod adapter;
pub mod caller;
pub mod content;
mod error;
pub mod http;
pub mod log;
mod output;
pub mod policy;
pub mod sse;
#[cfg(feature = "testing")]
pub mod testing;
mod types;

/// The generated WIT types, shared by both worlds; the SDK's conversions target these.
use adapter::bindings::gatehouse::plugin::types as wit;

pub use adapter::{Adapter, Call, CallContext};
pub use content::{Completion, CompletionRef, Prompt, PromptMessage, Role};
pub use error::{ErrorKind, ToolError};
pub use output::{Blob, Content, EmbeddedResource, ToolOutput};
pub use policy::{
    Action, ActionContext, Claims, Decision, Identifier, Obligation, PiiKind, Policy, PriorAction,
    Reason, RiskSignal, SecretKind, Verdict,
};
pub use types::{ApprovalMode, CapabilityClass, Principal, PrincipalKind};

/// `Result<T, ToolError>`, what [`Adapter::invoke`] returns; `?` converts
/// [`http::HttpError`] and `serde_json::Error` into a [`ToolError`] (the table is on
/// [`ToolError`]).
pub type Result<T, E = ToolError> = core::result::Result<T, E>;

pub use serde;
pub use serde_json;
pub use wit_bindgen;
