//! Every error an embedder can meet, by where it comes from. Each says what is wrong and, where
//! there is one, the fix.

pub use crate::caller::CallerConfigError;
pub use crate::config::ConfigError;
pub use crate::egress::{FetchError, GrantError, PatternError, TlsConfigError};
pub use crate::host::{FloorError, HostError, InstallError};
pub use crate::pipeline::PipelineError;
pub use crate::pipeline::registry::ToolGrantError;
pub use crate::pipeline::validate::ValidateError;
pub use crate::plugin::LoadError;
pub use crate::plugin::manifest::ManifestError;
pub use crate::plugin::sections::SectionError;
pub use crate::plugin::signature::SignatureError;
pub use crate::plugin::trust::{TrustConfigError, TrustError};
pub use crate::policy::PolicyError;
pub use crate::sandbox::WorldMismatch;
pub use crate::skills::SkillError;
pub use gatehouse_core::keys::KeyError;
pub use gatehouse_core::model::GlobError;
pub use gatehouse_store::StoreError;
