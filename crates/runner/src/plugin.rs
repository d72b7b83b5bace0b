//! Kernel plugins: shared libraries with a small, versioned C ABI
//! (`include/solidgraph_plugin.h`, version [`ABI_VERSION`]) that register
//! devices and kernels into a [`Registry`](crate::Registry).
//!
//! A plugin is loaded only from a configured directory ([`PluginDir`]): the
//! path is canonicalised and refused unless the file lies directly in the
//! directory (so `..` and symlinks out of it are refused), and neither may be
//! writable by others. Loading checks `solidgraph_plugin_abi_version()` before
//! it calls anything else, then runs `solidgraph_plugin_init` with callbacks
//! that collect registrations; the registry takes them only if init succeeds
//! and every registration was valid. Each plugin kernel becomes an
//! `Arc<dyn Kernel>` holding the library, so the library stays loaded as long
//! as any model or registry uses one of its kernels.
//!
//! Plugins may implement the dense and element-wise ops and `spmm`
//! ([`PLUGIN_OPS`]). Every failure is an error value: a library that does not
//! load, a missing symbol, a wrong ABI version, a failed init or a rejected
//! registration is [`RunnerError::Plugin`]; a kernel's non-zero status is
//! [`RunnerError::Kernel`] naming the plugin's kernel, the op and the reason.
//! No Rust panic crosses the C boundary: the callbacks catch their own.
//!
//! Plugin code runs in-process: whoever can write to the directory can run
//! code in the host, hence the directory is the trust boundary.

use std::ffi::{c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::block::EdgeView;
use crate::dfg::{Op, Reduce};
use crate::error::{Result, RunnerError};
use crate::kernels::{Args, Kernel};
use crate::limits::MAX_ELEMENTS;
use crate::registry::Device;
use crate::tensor::Tensor;

/// The ABI version this runner speaks (`SOLIDGRAPH_PLUGIN_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;
/// Status a kernel, init or callback returns on success (`SG_OK`).
pub const SG_OK: i32 = 0;
/// A failure status (`SG_ERROR`); plugins may return any non-zero value.
pub const SG_ERROR: i32 = 1;
/// Longest device or kernel name, in bytes (`SG_MAX_NAME`).
pub const MAX_PLUGIN_NAME: usize = 64;
/// Devices and kernels one plugin may register (`SG_MAX_DEVICES`, `SG_MAX_KERNELS`).
pub const MAX_PLUGIN_DEVICES: usize = 16;
pub const MAX_PLUGIN_KERNELS: usize = 256;
/// The message buffer given to init and to each kernel call (`SG_MESSAGE_CAP`).
pub const MESSAGE_CAP: usize = 1024;
/// Plugins one registry loads.
pub const MAX_PLUGINS: usize = 64;
/// Longest plugin file name, in bytes.
pub const MAX_PLUGIN_FILE_NAME: usize = 255;

/// The ops a plugin may implement, by their model.json name.
pub const PLUGIN_OPS: &[&str] = &["gemm", "spmm", "relu", "leaky_relu", "elu", "sigmoid", "tanh", "add", "mul", "scale"];

const ABI_VERSION_SYMBOL: &[u8] = b"solidgraph_plugin_abi_version\0";
const INIT_SYMBOL: &[u8] = b"solidgraph_plugin_init\0";

// The ABI passes CSR offsets as uint64_t straight from the runner's `usize` offsets.
const _: () = assert!(usize::BITS == 64, "the plugin ABI passes usize offsets as uint64_t");

/// `SgTensor`: a read-only row-major f32 matrix.
#[repr(C)]
pub struct SgTensor {
    pub data: *const f32,
    pub rows: u64,
    pub cols: u64,
}

/// `SgEdges`: an aggregation's edges in CSR by destination.
#[repr(C)]
pub struct SgEdges {
    pub n_dst: u64,
    pub n_src: u64,
    pub num_edges: u64,
    pub indptr: *const u64,
    pub indices: *const u32,
    pub coef: *const f32,
}

/// `SgCall`: one kernel call.
#[repr(C)]
pub struct SgCall {
    pub op: u32,
    pub reduce: u32,
    pub param: f32,
    pub num_inputs: u32,
    pub inputs: *const SgTensor,
    pub edges: *const SgEdges,
    pub out: *mut f32,
    pub out_rows: u64,
    pub out_cols: u64,
}

/// `SgKernelFn`.
pub type SgKernelFn = unsafe extern "C" fn(user_data: *mut c_void, call: *const SgCall, message: *mut c_char, message_cap: u64) -> i32;

/// `SgHost::register_device`.
pub type RegisterDeviceFn = unsafe extern "C" fn(ctx: *mut c_void, name: *const c_char) -> i32;
/// `SgHost::register_kernel`.
pub type RegisterKernelFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    op: *const c_char,
    device: *const c_char,
    priority: i32,
    name: *const c_char,
    run: Option<SgKernelFn>,
    user_data: *mut c_void,
) -> i32;

/// `SgHost`: what init receives.
#[repr(C)]
pub struct SgHost {
    pub abi_version: u32,
    pub ctx: *mut c_void,
    pub register_device: RegisterDeviceFn,
    pub register_kernel: RegisterKernelFn,
}

type AbiVersionFn = unsafe extern "C" fn() -> u32;
type InitFn = unsafe extern "C" fn(host: *const SgHost, message: *mut c_char, message_cap: u64) -> i32;

/// The op code of `SgOp` for each name of [`PLUGIN_OPS`].
fn op_code(name: &str) -> Option<u32> {
    PLUGIN_OPS.iter().position(|&n| n == name).map(|i| i as u32 + 1)
}

/// A configured plugin directory, canonicalised: plugins load from here only.
#[derive(Debug, Clone)]
pub struct PluginDir {
    dir: PathBuf,
}

impl PluginDir {
    /// The directory `dir`, which must exist and not be writable by others.
    pub fn new(dir: &Path) -> Result<PluginDir> {
        let bad = |message: String| RunnerError::Plugin { path: dir.to_path_buf(), message };
        let canonical = dir.canonicalize().map_err(|e| bad(format!("plugin directory: {e}")))?;
        let meta = std::fs::metadata(&canonical).map_err(|e| bad(format!("plugin directory: {e}")))?;
        if !meta.is_dir() {
            return Err(bad("the plugin directory is not a directory".into()));
        }
        if writable_by_others(&meta) {
            return Err(bad("the plugin directory is writable by others; plugins run as this process".into()));
        }
        Ok(PluginDir { dir: canonical })
    }

    /// The canonical directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The canonical path of plugin `name` (relative to the directory, or absolute),
    /// refused unless it is a regular file directly in the directory.
    pub fn resolve(&self, name: &Path) -> Result<PathBuf> {
        let given = if name.is_absolute() { name.to_path_buf() } else { self.dir.join(name) };
        let bad = |message: String| RunnerError::Plugin { path: given.clone(), message };
        let canonical = given.canonicalize().map_err(|e| bad(e.to_string()))?;
        if canonical.parent() != Some(self.dir.as_path()) {
            let message =
                format!("resolves to {}, outside the plugin directory {}; plugins load from that directory only", canonical.display(), self.dir.display());
            return Err(bad(message));
        }
        let file_name = canonical.file_name().map_or(0, |n| n.len());
        if file_name > MAX_PLUGIN_FILE_NAME {
            return Err(bad(format!("file name of {file_name} bytes is over the limit of {MAX_PLUGIN_FILE_NAME}")));
        }
        let meta = std::fs::metadata(&canonical).map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        if writable_by_others(&meta) {
            return Err(bad("writable by others; plugins run as this process".into()));
        }
        Ok(canonical)
    }

    /// The entries of the directory named like a shared library (`*.so` on Linux), sorted.
    pub fn list(&self) -> Result<Vec<PathBuf>> {
        let io = |e: std::io::Error| RunnerError::Plugin { path: self.dir.clone(), message: e.to_string() };
        let suffix = std::env::consts::DLL_SUFFIX;
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(io)? {
            let name = entry.map_err(io)?.file_name();
            if name.to_str().is_some_and(|n| n.ends_with(suffix) && n.len() > suffix.len()) {
                names.push(self.dir.join(name));
                if names.len() > MAX_PLUGINS {
                    return Err(RunnerError::Plugin { path: self.dir.clone(), message: format!("more than {MAX_PLUGINS} plugins") });
                }
            }
        }
        names.sort();
        Ok(names)
    }
}

#[cfg(unix)]
fn writable_by_others(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o002 != 0
}

#[cfg(not(unix))]
fn writable_by_others(_: &std::fs::Metadata) -> bool {
    false
}

/// A loaded plugin library. Dropping the last reference unloads it, so every
/// kernel it registered holds one.
pub struct Plugin {
    name: String,
    path: PathBuf,
    _library: libloading::Library,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin").field("name", &self.name).field("path", &self.path).finish()
    }
}

impl Plugin {
    /// The file stem, which prefixes its kernels' names.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The canonical path it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What a successful load registers.
pub(crate) struct Loaded {
    pub plugin: Arc<Plugin>,
    pub devices: Vec<Device>,
    pub kernels: Vec<(&'static str, Device, i32, Arc<dyn Kernel>)>,
}

/// Plugin inits run one at a time: a plugin need not make its init thread-safe.
static INIT_LOCK: Mutex<()> = Mutex::new(());

/// Loads the library at `path` (canonical, resolved by a [`PluginDir`]), checks its
/// ABI version, runs its init. `known` are the registry's devices.
pub(crate) fn load(path: &Path, known: &[Device]) -> Result<Loaded> {
    let bad = |message: String| RunnerError::Plugin { path: path.to_path_buf(), message };
    let name = path.file_stem().and_then(|s| s.to_str()).filter(|s| !s.is_empty()).ok_or_else(|| bad("the file name is not UTF-8".into()))?.to_string();
    let library = open_library(path).map_err(|e| bad(format!("does not load: {e}")))?;
    // SAFETY: the ABI declares `uint32_t solidgraph_plugin_abi_version(void)`; a library
    // exporting the name with another type breaks the ABI it claims by exporting it.
    let version = unsafe { library.get::<AbiVersionFn>(ABI_VERSION_SYMBOL) }
        .map(|f| *f)
        .map_err(|e| bad(format!("is not a SolidGraph plugin: no solidgraph_plugin_abi_version ({e})")))?;
    // SAFETY: a function of no arguments, per the ABI (see above).
    let found = unsafe { version() };
    if found != ABI_VERSION {
        return Err(bad(format!("plugin ABI version {found}, this runner speaks version {ABI_VERSION}; rebuild the plugin against its solidgraph_plugin.h")));
    }
    // SAFETY: the ABI version matches, so the symbol has the version-1 init signature.
    let init = unsafe { library.get::<InitFn>(INIT_SYMBOL) }.map(|f| *f).map_err(|e| bad(format!("has no solidgraph_plugin_init ({e})")))?;

    let mut registrar = Registrar { known, devices: Vec::new(), kernels: Vec::new(), error: None };
    let host = SgHost { abi_version: ABI_VERSION, ctx: (&raw mut registrar).cast(), register_device, register_kernel };
    let mut message = [0u8; MESSAGE_CAP];
    let status = {
        let _one_at_a_time = INIT_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: `host` and `message` outlive the call; `host.ctx` points to `registrar`, which
        // only the callbacks touch until init returns; the plugin writes at most MESSAGE_CAP bytes.
        unsafe { init(&host, message.as_mut_ptr().cast(), MESSAGE_CAP as u64) }
    };
    if status != SG_OK {
        return Err(bad(format!("init failed with status {status}: {}", message_text(&message))));
    }
    if let Some(e) = registrar.error {
        return Err(bad(format!("init made a registration the runner rejects: {e}")));
    }
    let plugin = Arc::new(Plugin { name: name.clone(), path: path.to_path_buf(), _library: library });
    let kernels = registrar
        .kernels
        .into_iter()
        .map(|p| {
            let kernel: Arc<dyn Kernel> =
                Arc::new(PluginKernel { name: format!("{name}:{}", p.name), op: p.op, run: p.run, user_data: UserData(p.user_data), plugin: plugin.clone() });
            (p.op, p.device, p.priority, kernel)
        })
        .collect();
    Ok(Loaded { plugin, devices: registrar.devices, kernels })
}

#[cfg(unix)]
fn open_library(path: &Path) -> std::result::Result<libloading::Library, libloading::Error> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading runs the library's initialisers; the path is a regular file in the
    // configured plugin directory, which is the trust boundary. RTLD_NOW makes an unresolved
    // symbol a load error here rather than a crash at a later call.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map(Into::into)
}

#[cfg(not(unix))]
fn open_library(path: &Path) -> std::result::Result<libloading::Library, libloading::Error> {
    // SAFETY: as on unix: the library comes from the configured plugin directory.
    unsafe { libloading::Library::new(path) }
}

/// Text a plugin wrote into a message buffer: up to its first NUL, at most the buffer.
fn message_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let text = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if text.is_empty() { "(no message)".into() } else { text }
}

struct PendingKernel {
    op: &'static str,
    device: Device,
    priority: i32,
    name: String,
    run: SgKernelFn,
    user_data: *mut c_void,
}

/// The callbacks' context during one init: registrations wait here until init succeeds.
struct Registrar<'a> {
    known: &'a [Device],
    devices: Vec<Device>,
    kernels: Vec<PendingKernel>,
    /// The first rejected registration: it fails the load even if the plugin ignores the status.
    error: Option<String>,
}

impl Registrar<'_> {
    fn has_device(&self, d: &Device) -> bool {
        self.known.contains(d) || self.devices.contains(d)
    }

    fn device(&mut self, name: String) -> std::result::Result<(), String> {
        let d = Device::new(&name);
        if self.has_device(&d) {
            return Ok(());
        }
        if self.devices.len() >= MAX_PLUGIN_DEVICES {
            return Err(format!("more than {MAX_PLUGIN_DEVICES} devices"));
        }
        self.devices.push(d);
        Ok(())
    }

    fn kernel(
        &mut self,
        op: String,
        device: String,
        priority: i32,
        name: String,
        run: Option<SgKernelFn>,
        user_data: *mut c_void,
    ) -> std::result::Result<(), String> {
        let Some(&op) = PLUGIN_OPS.iter().find(|&&o| o == op) else {
            return Err(format!("kernel {name:?}: op {op:?} is not one a plugin may implement ({})", PLUGIN_OPS.join(", ")));
        };
        let device = Device::new(&device);
        if !self.has_device(&device) {
            return Err(format!("kernel {name:?} for {op} names device {device}, which is neither registered nor the host's"));
        }
        let run = run.ok_or_else(|| format!("kernel {name:?} for {op} has a NULL function"))?;
        if self.kernels.len() >= MAX_PLUGIN_KERNELS {
            return Err(format!("more than {MAX_PLUGIN_KERNELS} kernels"));
        }
        self.kernels.push(PendingKernel { op, device, priority, name, run, user_data });
        Ok(())
    }
}

/// Reads a name the plugin passed: NUL-terminated, 1 to [`MAX_PLUGIN_NAME`] bytes of
/// printable ASCII without spaces.
///
/// # Safety
/// `p` is NULL or points to bytes readable up to its NUL or `MAX_PLUGIN_NAME + 1` bytes.
unsafe fn read_name(p: *const c_char, what: &str) -> std::result::Result<String, String> {
    if p.is_null() {
        return Err(format!("{what} is NULL"));
    }
    let mut bytes = Vec::new();
    for i in 0..=MAX_PLUGIN_NAME {
        // SAFETY: within the bytes the caller guarantees readable; stops at the NUL.
        let b = unsafe { *p.add(i) } as u8;
        if b == 0 {
            break;
        }
        bytes.push(b);
    }
    if bytes.is_empty() || bytes.len() > MAX_PLUGIN_NAME || !bytes.iter().all(u8::is_ascii_graphic) {
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_PLUGIN_NAME)]).into_owned();
        return Err(format!("{what} {shown:?} must be 1 to {MAX_PLUGIN_NAME} bytes of printable ASCII without spaces"));
    }
    Ok(String::from_utf8(bytes).expect("ASCII is UTF-8"))
}

/// Runs a callback body on the registrar, turning a rejection or a panic into a status.
fn with_registrar(ctx: *mut c_void, body: impl FnOnce(&mut Registrar) -> std::result::Result<(), String>) -> i32 {
    if ctx.is_null() {
        return SG_ERROR;
    }
    // SAFETY: `ctx` is the `SgHost::ctx` that `load` set to its live `Registrar`; callbacks are
    // valid only during init, which `load` runs while it holds the registrar and touches it not.
    let registrar = unsafe { &mut *ctx.cast::<Registrar>() };
    let result = catch_unwind(AssertUnwindSafe(|| body(&mut *registrar))).unwrap_or_else(|_| Err("the runner panicked in a registration callback".into()));
    match result {
        Ok(()) => SG_OK,
        Err(e) => {
            registrar.error.get_or_insert(e);
            SG_ERROR
        }
    }
}

unsafe extern "C" fn register_device(ctx: *mut c_void, name: *const c_char) -> i32 {
    // SAFETY: the ABI has `name` NUL-terminated; read_name bounds the read.
    with_registrar(ctx, |r| r.device(unsafe { read_name(name, "device name") }?))
}

unsafe extern "C" fn register_kernel(
    ctx: *mut c_void,
    op: *const c_char,
    device: *const c_char,
    priority: i32,
    name: *const c_char,
    run: Option<SgKernelFn>,
    user_data: *mut c_void,
) -> i32 {
    with_registrar(ctx, |r| {
        // SAFETY: the ABI has the strings NUL-terminated; read_name bounds each read.
        let (op, device, name) = unsafe { (read_name(op, "op")?, read_name(device, "device name")?, read_name(name, "kernel name")?) };
        r.kernel(op, device, priority, name, run, user_data)
    })
}

/// A kernel's `user_data`, passed back untouched.
#[derive(Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: the ABI requires kernels to be callable from any thread at once with their
// user_data; the runner never dereferences it.
unsafe impl Send for UserData {}
// SAFETY: as for Send.
unsafe impl Sync for UserData {}

/// A plugin's C kernel as a [`Kernel`].
struct PluginKernel {
    /// `<plugin>:<kernel>`.
    name: String,
    op: &'static str,
    run: SgKernelFn,
    user_data: UserData,
    /// Keeps the library (and so `run`) loaded.
    plugin: Arc<Plugin>,
}

impl Kernel for PluginKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&self, op: &Op, args: &Args) -> std::result::Result<Tensor, String> {
        if op.name() != self.op {
            return Err(format!("registered for {}, asked to run {}", self.op, op.name()));
        }
        let code = op_code(self.op).expect("registered ops are plugin ops");
        let (rows, cols) = out_shape(op, args)?;
        let (reduce, param) = match *op {
            Op::Spmm { reduce, .. } => (reduce_code(reduce), 0.0),
            Op::LeakyRelu { slope, .. } => (0, slope),
            Op::Elu { alpha, .. } => (0, alpha),
            Op::Scale { factor, .. } => (0, factor),
            _ => (0, 0.0),
        };
        let inputs: Vec<SgTensor> = args.x.iter().map(|t| SgTensor { data: t.data.as_ptr(), rows: t.rows as u64, cols: t.cols as u64 }).collect();
        let edges = args.edges.filter(|_| matches!(op, Op::Spmm { .. })).map(|v| SgEdges {
            n_dst: v.n_dst as u64,
            n_src: v.n_src as u64,
            num_edges: v.num_edges() as u64,
            indptr: v.indptr.as_ptr().cast(),
            indices: v.indices.as_ptr(),
            coef: v.coef.as_ptr(),
        });
        let mut out = vec![0f32; rows * cols];
        let call = SgCall {
            op: code,
            reduce,
            param,
            num_inputs: inputs.len() as u32,
            inputs: inputs.as_ptr(),
            edges: edges.as_ref().map_or(std::ptr::null(), std::ptr::from_ref),
            out: out.as_mut_ptr(),
            out_rows: rows as u64,
            out_cols: cols as u64,
        };
        let mut message = [0u8; MESSAGE_CAP];
        // SAFETY: every pointer in `call` refers to memory alive and unaliased for the call, of
        // the sizes it states (shapes checked by `out_shape`); the library is loaded while
        // `self.plugin` is; the kernel writes only `out` and at most MESSAGE_CAP message bytes.
        let status = unsafe { (self.run)(self.user_data.0, &call, message.as_mut_ptr().cast(), MESSAGE_CAP as u64) };
        if status != SG_OK {
            return Err(format!("plugin {} returned status {status}: {}", self.plugin.path.display(), message_text(&message)));
        }
        Ok(Tensor::new(rows, cols, out))
    }
}

fn reduce_code(r: Reduce) -> u32 {
    match r {
        Reduce::Sum => 0,
        Reduce::Mean => 1,
        Reduce::Max => 2,
    }
}

/// The output shape of a plugin op, with every operand checked against it: the C kernel
/// trusts the shapes it is given, and `Kernel::run` is public.
fn out_shape(op: &Op, args: &Args) -> std::result::Result<(usize, usize), String> {
    let x = args.x;
    let want = |ok: bool, what: &dyn Fn() -> String| if ok { Ok(()) } else { Err(what()) };
    want(x.len() == op.operands().len(), &|| format!("{} operands for {} of {}", x.len(), op.name(), op.operands().len()))?;
    for t in x {
        want(t.rows.checked_mul(t.cols) == Some(t.data.len()), &|| format!("an operand of {} values is not {} x {}", t.data.len(), t.rows, t.cols))?;
    }
    let shape = match op {
        Op::Gemm { .. } => {
            want(x[0].cols == x[1].cols, &|| format!("x has {} columns, the weight {}", x[0].cols, x[1].cols))?;
            if let Some(b) = x.get(2) {
                want(b.data.len() == x[1].rows, &|| format!("bias of {} values for {} outputs", b.data.len(), x[1].rows))?;
            }
            (x[0].rows, x[1].rows)
        }
        Op::Spmm { .. } => {
            let v: &EdgeView = args.edges.ok_or("spmm without edges")?;
            let e = v.num_edges();
            want(v.indptr.len() == v.n_dst + 1 && v.indptr[0] == 0 && v.indptr[v.n_dst] == e && v.coef.len() == e, &|| String::from("malformed edges"))?;
            want(v.indptr.windows(2).all(|w| w[0] <= w[1]) && v.indices.iter().all(|&s| (s as usize) < v.n_src), &|| String::from("malformed edges"))?;
            want(x[0].rows == v.n_src, &|| format!("x has {} rows for {} sources", x[0].rows, v.n_src))?;
            if let Some(ev) = x.get(1) {
                want(ev.rows == e && ev.cols > 0 && x[0].cols.is_multiple_of(ev.cols), &|| format!("edge values {} x {} for {e} edges", ev.rows, ev.cols))?;
            }
            (v.n_dst, x[0].cols)
        }
        Op::Add { .. } | Op::Mul { .. } => {
            let (a, b) = (x[0], x[1]);
            want(b.cols == a.cols && (b.rows == a.rows || b.rows == 1), &|| format!("a is {} x {}, b {} x {}", a.rows, a.cols, b.rows, b.cols))?;
            (a.rows, a.cols)
        }
        Op::Relu { .. } | Op::LeakyRelu { .. } | Op::Elu { .. } | Op::Sigmoid { .. } | Op::Tanh { .. } | Op::Scale { .. } => (x[0].rows, x[0].cols),
        other => return Err(format!("{} is not a plugin op", other.name())),
    };
    want(shape.0.checked_mul(shape.1).is_some_and(|n| n <= MAX_ELEMENTS), &|| {
        format!("an output of {} x {} is over the limit of {MAX_ELEMENTS} values", shape.0, shape.1)
    })?;
    Ok(shape)
}
