//! `cargo offload devices`, and the device names `run --device` accepts: what the runtime finds, numbered as it
//! numbers them.

use offload::PluginReport;

/// `PLUGIN[:N]` (N within the plugin; without it, the plugin's first device, or under `--ranks` each rank's by its
/// local rank), or `host` for the initial device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChoice {
    Host,
    Plugin {
        plugin: String,
        index: Option<usize>,
    },
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "host" {
            return Ok(DeviceChoice::Host);
        }
        let (plugin, index) = match s.split_once(':') {
            Some((p, n)) => (
                p,
                Some(n.parse().map_err(|_| {
                    format!("`{s}`: the device index after `:` is a number, as in `cuda:0`")
                })?),
            ),
            None => (s, None),
        };
        if plugin.is_empty() {
            return Err(format!(
                "`{s}`: name a plugin, as in `cuda:0`, `amdgpu:1`, `host-elf:0` or `host`"
            ));
        }
        Ok(DeviceChoice::Plugin {
            plugin: plugin.to_string(),
            index,
        })
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The devices regions use by default (those of plugins on by default), named `PLUGIN:K`, in the runtime's order.
pub fn default_devices(report: &[PluginReport]) -> Vec<String> {
    report
        .iter()
        .filter(|p| p.on_by_default && p.none_because.is_none())
        .flat_map(|p| (0..p.devices.len()).map(move |k| format!("{}:{k}", p.plugin)))
        .collect()
}

/// Every plugin, its devices (`PLUGIN:N`, the runtime's number, name, architecture, memory) or why it has none.
pub fn render(report: &[PluginReport]) -> String {
    let mut out = String::new();
    let mut count = 0;
    for p in report {
        match &p.none_because {
            Some(why) => out.push_str(&format!("{}: no devices ({why})\n", p.plugin)),
            None => {
                out.push_str(&format!("{}:\n", p.plugin));
                for (k, (number, d)) in p.devices.iter().enumerate() {
                    let number = if p.on_by_default {
                        count += 1;
                        format!("device {number}")
                    } else {
                        format!("device {number} with OFFLOAD_PLUGINS={}", p.plugin)
                    };
                    out.push_str(&format!(
                        "  {}:{k}  {number}  {}  {}  {}\n",
                        p.plugin,
                        d.arch,
                        gib(d.memory),
                        d.name
                    ));
                }
            }
        }
    }
    out.push_str(&format!(
        "host: the initial device (device {count}, `omp_get_initial_device()`), where regions fall back\n"
    ));
    out
}

/// Checks that `choice` exists, or says which devices do.
pub fn check(choice: &DeviceChoice, report: &[PluginReport]) -> Result<(), String> {
    let DeviceChoice::Plugin { plugin, index } = choice else {
        return Ok(());
    };
    let index = &index.unwrap_or(0);
    let available: Vec<String> = report
        .iter()
        .flat_map(|p| (0..p.devices.len()).map(move |k| format!("{}:{k}", p.plugin)))
        .chain(["host".to_string()])
        .collect();
    let Some(p) = report.iter().find(|p| p.plugin == plugin) else {
        let known: Vec<&str> = report.iter().map(|p| p.plugin).collect();
        return Err(format!(
            "there is no plugin `{plugin}` (plugins: {}); devices here: {}",
            known.join(", "),
            available.join(", ")
        ));
    };
    if *index < p.devices.len() {
        return Ok(());
    }
    let why = p
        .none_because
        .as_deref()
        .map_or(String::new(), |w| format!(" ({w})"));
    Err(format!(
        "`{plugin}:{index}` does not exist: {plugin} has {} device(s){why}; devices here: {}",
        p.devices.len(),
        available.join(", ")
    ))
}
