//! The stand-in for a plugin this build left out (its cargo feature off): it has the plugin's name, is off unless
//! `OFFLOAD_PLUGINS` names it, and finds no devices, saying which feature would bring them.

use super::error::PluginError;
use super::interface::{Discovered, Plugin};

/// A plugin compiled out: its name and the `offload` feature that builds it.
pub struct NotBuilt {
    name: &'static str,
    feature: &'static str,
}

#[cfg(not(feature = "cuda"))]
pub const CUDA: NotBuilt = NotBuilt {
    name: "cuda",
    feature: "cuda",
};
#[cfg(not(feature = "amdgpu"))]
pub const AMDGPU: NotBuilt = NotBuilt {
    name: "amdgpu",
    feature: "amdgpu",
};
#[cfg(not(feature = "gpu-sim"))]
pub const GPU_SIM: NotBuilt = NotBuilt {
    name: "gpu-sim",
    feature: "gpu-sim",
};

/// Every plugin this build left out.
const LEFT_OUT: &[NotBuilt] = &[
    #[cfg(not(feature = "cuda"))]
    CUDA,
    #[cfg(not(feature = "amdgpu"))]
    AMDGPU,
    #[cfg(not(feature = "gpu-sim"))]
    GPU_SIM,
];

impl NotBuilt {
    fn error(&self) -> PluginError {
        PluginError::NotBuilt {
            feature: self.feature,
        }
    }
}

impl Plugin for NotBuilt {
    fn name(&self) -> &'static str {
        self.name
    }

    fn discover(&self) -> Result<Discovered, PluginError> {
        Err(self.error())
    }

    // Never looked for unless named: a build without GPU plugins says nothing about them.
    fn on_by_default(&self) -> bool {
        false
    }
}

/// Why the plugin `name` cannot be used in this build, when it was left out (for `OFFLOAD_PLUGINS`' warning).
pub fn not_built(name: &str) -> Option<PluginError> {
    LEFT_OUT
        .iter()
        .find(|p| p.name == name)
        .map(NotBuilt::error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_left_out_names_the_feature_that_builds_it() {
        for p in LEFT_OUT {
            let why = not_built(p.name).expect("left out").to_string();
            assert!(
                why.contains(&format!("without its `{}` feature", p.feature)),
                "{why}"
            );
            assert!(!p.on_by_default());
            assert_eq!(p.discover().err().map(|e| e.to_string()), Some(why));
        }
        assert!(not_built("host-elf").is_none());
    }
}
