//! Kernels per op and device, with a priority: for each op the highest-priority
//! kernel whose device is enabled and that reports itself available runs
//! (HolisticGNN's GraphRunner). "cpu" is built in and holds a portable
//! reference kernel (priority [`REFERENCE`]) and an optimised one
//! ([`OPTIMISED`]) for every op; devices and kernels added later (in code or,
//! through the plugin ABI, from shared libraries in a configured directory:
//! [`Registry::load_plugins`], [`crate::plugin`]) take part the same way.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dfg::OP_NAMES;
use crate::error::{Result, RunnerError};
use crate::kernels::{Kernel, cpu::Cpu, reference::Reference};
use crate::plugin::{MAX_PLUGINS, Plugin, PluginDir};

/// The reference kernels' priority: the oracle, run when nothing better is there.
pub const REFERENCE: i32 = 0;
/// The optimised CPU kernels' priority.
pub const OPTIMISED: i32 = 100;

/// A device kernels run on, by name ("cpu" built in).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Device(String);

impl Device {
    pub fn cpu() -> Device {
        Device("cpu".into())
    }

    pub fn new(name: &str) -> Device {
        Device(name.into())
    }

    pub fn name(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone)]
struct Entry {
    device: Device,
    priority: i32,
    kernel: Arc<dyn Kernel>,
}

#[derive(Clone)]
pub struct Registry {
    devices: Vec<Device>,
    /// Per op, highest priority first; among equals, the earlier registration.
    kernels: HashMap<String, Vec<Entry>>,
    /// Loaded plugins; their kernels hold them too, so a model outlives its registry.
    plugins: Vec<Arc<Plugin>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ops: Vec<_> = self
            .kernels
            .iter()
            .map(|(op, es)| (op, es.iter().map(|e| (e.kernel.name().to_string(), e.device.to_string(), e.priority)).collect::<Vec<_>>()))
            .collect();
        ops.sort();
        let plugins: Vec<_> = self.plugins.iter().map(|p| p.path()).collect();
        f.debug_struct("Registry").field("devices", &self.devices).field("kernels", &ops).field("plugins", &plugins).finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::with_builtin()
    }
}

impl Registry {
    /// The "cpu" device and no kernels.
    pub fn empty() -> Registry {
        Registry { devices: vec![Device::cpu()], kernels: HashMap::new(), plugins: Vec::new() }
    }

    /// "cpu" with the reference and optimised kernels of every op.
    pub fn with_builtin() -> Registry {
        let mut r = Registry::empty();
        let reference: Arc<dyn Kernel> = Arc::new(Reference);
        let cpu: Arc<dyn Kernel> = Arc::new(Cpu);
        for op in OP_NAMES {
            r.register(op, Device::cpu(), REFERENCE, reference.clone()).expect("built-in ops are known");
            r.register(op, Device::cpu(), OPTIMISED, cpu.clone()).expect("built-in ops are known");
        }
        r
    }

    /// Enables a device; kernels registered for it take part from now on.
    pub fn add_device(&mut self, device: Device) {
        if !self.devices.contains(&device) {
            self.devices.push(device);
        }
    }

    /// Disables a device: its kernels stay registered but no longer run.
    pub fn remove_device(&mut self, device: &Device) {
        self.devices.retain(|d| d != device);
    }

    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Registers `kernel` for `op` on `device` (which must be added) at `priority`.
    pub fn register(&mut self, op: &str, device: Device, priority: i32, kernel: Arc<dyn Kernel>) -> Result<()> {
        if !OP_NAMES.contains(&op) {
            return Err(RunnerError::UnknownOp { index: 0, name: op.into() });
        }
        if !self.devices.contains(&device) {
            return Err(RunnerError::Invalid(format!("kernel {:?} for {op} names device {device}, which is not added", kernel.name())));
        }
        let list = self.kernels.entry(op.to_string()).or_default();
        let at = list.iter().position(|e| e.priority < priority).unwrap_or(list.len());
        list.insert(at, Entry { device, priority, kernel });
        Ok(())
    }

    /// The kernel that runs `op`: the highest-priority available one on an enabled device.
    pub fn select(&self, op: &str) -> Result<Arc<dyn Kernel>> {
        let list = self.kernels.get(op).map(Vec::as_slice).unwrap_or_default();
        let best = list.iter().find(|e| self.devices.contains(&e.device) && e.kernel.available());
        best.map(|e| e.kernel.clone()).ok_or_else(|| RunnerError::NoKernel { op: op.into() })
    }

    /// Every kernel of `op` as (kernel name, device, priority), highest priority first.
    pub fn kernels(&self, op: &str) -> Vec<(String, Device, i32)> {
        self.kernels.get(op).map_or_else(Vec::new, |l| l.iter().map(|e| (e.kernel.name().to_string(), e.device.clone(), e.priority)).collect())
    }

    /// Loads plugin `name` (a file directly in `dir`, named relative to it or by an absolute
    /// path): its devices are added and its kernels registered, or, on any error, nothing.
    pub fn load_plugin(&mut self, dir: &PluginDir, name: impl AsRef<Path>) -> Result<()> {
        let path = dir.resolve(name.as_ref())?;
        if self.plugins.iter().any(|p| p.path() == path) {
            return Err(RunnerError::Plugin { path, message: "is already loaded in this registry".into() });
        }
        if self.plugins.len() >= MAX_PLUGINS {
            return Err(RunnerError::Plugin { path, message: format!("a registry loads at most {MAX_PLUGINS} plugins") });
        }
        let loaded = crate::plugin::load(&path, &self.devices)?;
        let mut next = self.clone();
        for d in loaded.devices {
            next.add_device(d);
        }
        for (op, device, priority, kernel) in loaded.kernels {
            next.register(op, device, priority, kernel)?;
        }
        next.plugins.push(loaded.plugin);
        *self = next;
        Ok(())
    }

    /// Loads every shared library (`*.so` on Linux) in the configured directory `dir`, in
    /// name order: all of them, or on the first error none. Returns how many loaded.
    pub fn load_plugins(&mut self, dir: &Path) -> Result<usize> {
        let dir = PluginDir::new(dir)?;
        let mut next = self.clone();
        let files = dir.list()?;
        for file in &files {
            next.load_plugin(&dir, file)?;
        }
        *self = next;
        Ok(files.len())
    }

    /// The loaded plugins as (name, canonical path).
    pub fn plugins(&self) -> Vec<(String, PathBuf)> {
        self.plugins.iter().map(|p| (p.name().to_string(), p.path().to_path_buf())).collect()
    }
}
