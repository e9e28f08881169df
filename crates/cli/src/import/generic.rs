//! The generic components this binary carries, built from source by `build.rs`: the adapters
//! `plugins/mcp-upstream`, `plugins/openapi` and `plugins/a2a-upstream` (`gatehouse import ... --key` embeds the
//! manifest in one and signs it, so an installed `gatehouse` imports and signs alone;
//! `--component FILE` overrides it), and the policy module `plugins/cedar` (`gatehouse policy
//! pack` initializes it with rules and signs it).

/// `(package name, component bytes)`, as `build.rs` built them.
const COMPONENTS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/generic_components.rs"));

/// Which generic component a command signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generic {
    /// `plugins/mcp-upstream`, for `gatehouse import mcp`.
    McpUpstream,
    /// `plugins/openapi`, for `gatehouse import openapi`.
    OpenApi,
    /// `plugins/a2a-upstream`, for `gatehouse import a2a`.
    A2aUpstream,
    /// `plugins/cedar`, for `gatehouse policy pack`.
    Cedar,
}

impl Generic {
    /// Its package name, e.g. `mcp-upstream`.
    pub fn package(self) -> &'static str {
        match self {
            Self::McpUpstream => "mcp-upstream",
            Self::OpenApi => "openapi",
            Self::A2aUpstream => "a2a-upstream",
            Self::Cedar => "cedar",
        }
    }

    /// The component this binary carries, unsigned and without a manifest.
    pub fn component(self) -> &'static [u8] {
        let package = self.package();
        COMPONENTS
            .iter()
            .find(|(name, _)| *name == package)
            .map(|(_, bytes)| *bytes)
            .expect("build.rs builds every generic component")
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_host::plugin::check_world;
    use gatehouse_host::plugin::manifest::PluginKind;

    use super::*;

    #[test]
    fn carries_the_generic_adapters_as_adapter_components() {
        for generic in [Generic::McpUpstream, Generic::OpenApi, Generic::A2aUpstream] {
            check_world(generic.component(), PluginKind::Adapter)
                .unwrap_or_else(|e| panic!("{generic:?}: {e}"));
        }
        assert_ne!(
            Generic::McpUpstream.component(),
            Generic::OpenApi.component()
        );
    }
}
