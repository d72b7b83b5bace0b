//! Kernel plugins: a C plugin built here (tests/plugin/test_plugin.c, with the
//! crate's include/solidgraph_plugin.h) registers a device and kernels at a
//! higher priority and is seen to run; every bad plugin or path is an error.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use solidgraph_runner::dfg::{Dfg, InputSpec, Node, Op};
use solidgraph_runner::models::{self, random_weights};
use solidgraph_runner::plugin::{self, SgCall, SgEdges, SgHost, SgTensor};
use solidgraph_runner::{Block, Device, Model, PluginDir, Registry, RunnerError, Tensor};
use tempfile::TempDir;

/// A directory under the target dir (a tmpfs /tmp may be mounted noexec, which dlopen refuses).
fn tmp() -> TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Compiles the test plugin into `dir/file` with `-D` for each of `defines`.
fn build(dir: &Path, file: &str, defines: &[&str]) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join(file);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    // The variants that register nothing leave the kernels unused, hence -Wno-unused-function.
    let output = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-I"])
        .arg(manifest.join("include"))
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(manifest.join("tests/plugin/test_plugin.c"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e} (the plugin tests build a C plugin)"));
    assert!(output.status.success(), "{cc} failed to build the test plugin with {defines:?}: {}", String::from_utf8_lossy(&output.stderr));
    out
}

/// The test plugin's call counter: relu (0) or gemm (1).
fn calls(lib: &Path, which: i32) -> i64 {
    // SAFETY: the library is the test plugin, already loaded by the registry (dlopen hands back
    // the same instance), and exports `long long sg_test_calls(int)`.
    unsafe {
        let lib = libloading::Library::new(lib).unwrap();
        let f = lib.get::<unsafe extern "C" fn(i32) -> i64>(b"sg_test_calls\0").unwrap();
        f(which)
    }
}

#[test]
fn the_header_matches_the_runner() {
    let header = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/solidgraph_plugin.h")).unwrap();
    let mut want = vec![
        format!("#define SOLIDGRAPH_PLUGIN_ABI_VERSION {}u", plugin::ABI_VERSION),
        format!("#define SG_OK {}", plugin::SG_OK),
        format!("#define SG_ERROR {}", plugin::SG_ERROR),
        format!("#define SG_MAX_NAME {}", plugin::MAX_PLUGIN_NAME),
        format!("#define SG_MAX_DEVICES {}", plugin::MAX_PLUGIN_DEVICES),
        format!("#define SG_MAX_KERNELS {}", plugin::MAX_PLUGIN_KERNELS),
        format!("#define SG_MESSAGE_CAP {}", plugin::MESSAGE_CAP),
    ];
    want.extend(plugin::PLUGIN_OPS.iter().enumerate().map(|(i, op)| format!("SG_OP_{} = {}", op.to_uppercase(), i + 1)));
    for line in want {
        assert!(header.contains(&line), "the header lacks {line:?}");
    }

    // The C compiler's layout of each struct is the runner's.
    let dir = tmp();
    let lib = build(dir.path(), "libsg_sizes.so", &[]);
    // SAFETY: the test plugin exports `uint64_t sg_test_sizeof(int)`, a pure function.
    let sizes: Vec<u64> = unsafe {
        let lib = libloading::Library::new(&lib).unwrap();
        let f = lib.get::<unsafe extern "C" fn(i32) -> u64>(b"sg_test_sizeof\0").unwrap();
        (0..4).map(|i| f(i)).collect()
    };
    let ours = [size_of::<SgTensor>(), size_of::<SgEdges>(), size_of::<SgCall>(), size_of::<SgHost>()];
    assert_eq!(sizes, ours.map(|s| s as u64));
}

fn plugin_error(e: RunnerError) -> (PathBuf, String) {
    match e {
        RunnerError::Plugin { path, message } => (path, message),
        other => panic!("expected a plugin error, got {other:?}"),
    }
}

/// The registry's state a failed load must leave untouched.
fn assert_pristine(r: &Registry) {
    assert_eq!(r.devices(), &[Device::cpu()]);
    assert!(r.plugins().is_empty());
    assert_eq!(r.kernels("relu").len(), 2);
    assert_eq!(r.kernels("gemm").len(), 2);
}

fn inputs() -> (Vec<Block>, HashMap<String, Tensor>) {
    let b = Block::from_edges(5, 5, &[0, 1, 2, 3, 2, 4], &[1, 2, 3, 0, 0, 1], None).unwrap();
    let x = Tensor::new(5, 6, (0..30).map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0).collect());
    (vec![b.clone(), b], HashMap::from([("x".to_string(), x)]))
}

#[test]
fn a_plugin_kernel_runs_at_a_higher_priority_and_matches_the_reference() {
    let dir = tmp();
    let lib = build(dir.path(), "libsg_test.so", &[]);
    std::fs::write(dir.path().join("README.txt"), "not a plugin: no .so suffix").unwrap();
    let mut r = Registry::with_builtin();
    assert_eq!(r.load_plugins(dir.path()).unwrap(), 1);
    assert!(r.devices().contains(&Device::new("testdev")));
    assert_eq!(r.plugins(), vec![("libsg_test".to_string(), lib.canonicalize().unwrap())]);
    assert_eq!(r.kernels("relu")[0], ("libsg_test:testdev-relu".to_string(), Device::new("testdev"), 1000));
    assert_eq!(r.kernels("gemm").iter().map(|k| k.2).collect::<Vec<_>>(), vec![1000, 100, 0]);

    let dfg = models::gcn(6, &[8, 3], false);
    let w = random_weights(&dfg, 1, 0.5);
    let model = Model::from_parts(dfg.clone(), &w, &r).unwrap();
    let chosen = model.kernel_names();
    assert!(chosen.iter().filter(|k| k.1 == "gemm").all(|k| k.2 == "libsg_test:testdev-gemm"));
    assert!(chosen.iter().filter(|k| k.1 == "relu").all(|k| k.2 == "libsg_test:testdev-relu"));
    assert!(chosen.iter().filter(|k| k.1 == "spmm").all(|k| k.2 == "cpu"));

    // Disabling the plugin's device falls back to the built-in kernels.
    r.remove_device(&Device::new("testdev"));
    let fallback = Model::from_parts(dfg.clone(), &w, &r).unwrap();
    assert!(fallback.kernel_names().iter().all(|k| !k.2.starts_with("libsg_test")));

    // The model holds the library: it runs after the registry that loaded it is gone.
    drop(r);
    let (blocks, x) = inputs();
    let out = model.run(&blocks, &x).unwrap();
    let reference = Model::from_parts(dfg, &w, &Registry::with_builtin()).unwrap().run(&blocks, &x).unwrap();
    assert!(out.max_rel_diff(&reference) < 1e-5, "plugin result differs by {}", out.max_rel_diff(&reference));
    assert_eq!((calls(&lib, 0), calls(&lib, 1)), (1, 2), "the plugin's relu runs once and its gemm twice");
    assert!(fallback.run(&blocks, &x).unwrap().max_rel_diff(&reference) < 1e-5);
    assert_eq!((calls(&lib, 0), calls(&lib, 1)), (1, 2));
}

#[test]
fn a_kernel_that_returns_an_error_status_is_an_error_naming_the_plugin_and_op() {
    let dir = tmp();
    build(dir.path(), "libsg_test.so", &[]);
    let mut r = Registry::with_builtin();
    r.load_plugins(dir.path()).unwrap();
    let dfg = Dfg {
        name: "tanh".into(),
        blocks: 0,
        inputs: vec![InputSpec { name: "x".into(), cols: 3 }],
        weights: BTreeMap::new(),
        ops: vec![Node { op: Op::Tanh { x: "x".into() }, out: "y".into() }],
        output: "y".into(),
    };
    let model = Model::from_parts(dfg, &BTreeMap::new(), &r).unwrap();
    let e = model.run(&[], &HashMap::from([("x".to_string(), Tensor::zeros(2, 3))])).unwrap_err();
    let text = e.to_string();
    match e {
        RunnerError::Kernel { op, kernel, message, .. } => {
            assert_eq!((op.as_str(), kernel.as_str()), ("tanh", "libsg_test:testdev-tanh"));
            assert!(message.contains("status 7") && message.contains("testdev cannot run tanh"), "{message}");
        }
        other => panic!("expected a kernel error, got {other:?}"),
    }
    assert!(text.contains("libsg_test") && text.contains("tanh"), "{text}");
}

#[test]
fn a_wrong_abi_version_is_refused_before_init() {
    let dir = tmp();
    build(dir.path(), "libsg_v2.so", &["ABI=2"]);
    let mut r = Registry::with_builtin();
    let (path, message) = plugin_error(r.load_plugins(dir.path()).unwrap_err());
    assert!(path.ends_with("libsg_v2.so"), "{path:?}");
    assert!(message.contains("ABI version 2") && message.contains("version 1"), "{message}");
    assert_pristine(&r);
}

#[test]
fn missing_symbols_are_errors() {
    let dir = tmp();
    build(dir.path(), "libsg_noversion.so", &["NO_VERSION"]);
    build(dir.path(), "libsg_noinit.so", &["NO_INIT"]);
    let plugins = PluginDir::new(dir.path()).unwrap();
    let mut r = Registry::with_builtin();
    let (_, message) = plugin_error(r.load_plugin(&plugins, "libsg_noversion.so").unwrap_err());
    assert!(message.contains("not a SolidGraph plugin") && message.contains("solidgraph_plugin_abi_version"), "{message}");
    let (_, message) = plugin_error(r.load_plugin(&plugins, "libsg_noinit.so").unwrap_err());
    assert!(message.contains("solidgraph_plugin_init"), "{message}");
    assert_pristine(&r);
}

#[test]
fn a_failed_init_or_a_rejected_registration_loads_nothing() {
    let dir = tmp();
    build(dir.path(), "libsg_fail.so", &["FAIL_INIT"]);
    build(dir.path(), "libsg_badop.so", &["BAD_OP"]);
    build(dir.path(), "libsg_baddev.so", &["BAD_DEVICE"]);
    let plugins = PluginDir::new(dir.path()).unwrap();
    let mut r = Registry::with_builtin();
    let (_, message) = plugin_error(r.load_plugin(&plugins, "libsg_fail.so").unwrap_err());
    assert!(message.contains("status 3") && message.contains("no testdev hardware found"), "{message}");
    // The plugin ignores the rejection and returns SG_OK: the load fails all the same.
    let (_, message) = plugin_error(r.load_plugin(&plugins, "libsg_badop.so").unwrap_err());
    assert!(message.contains("\"concat\"") && message.contains("may implement"), "{message}");
    let (_, message) = plugin_error(r.load_plugin(&plugins, "libsg_baddev.so").unwrap_err());
    assert!(message.contains("device npu"), "{message}");
    assert_pristine(&r);
    // load_plugins is all or nothing over the directory.
    build(dir.path(), "libsg_good.so", &[]);
    assert!(r.load_plugins(dir.path()).is_err());
    assert_pristine(&r);
}

#[test]
fn paths_outside_the_directory_are_refused() {
    let root = tmp();
    let (inside, outside) = (root.path().join("plugins"), root.path().join("outside"));
    std::fs::create_dir_all(inside.join("sub")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    build(&outside, "libsg_out.so", &[]);
    build(&inside.join("sub"), "libsg_sub.so", &[]);
    build(&inside, "libsg_in.so", &[]);
    let plugins = PluginDir::new(&inside).unwrap();
    let mut r = Registry::with_builtin();
    let outside_of = |e: RunnerError| {
        let (path, message) = plugin_error(e);
        assert!(message.contains("outside the plugin directory"), "{path:?}: {message}");
    };
    outside_of(r.load_plugin(&plugins, "../outside/libsg_out.so").unwrap_err());
    outside_of(r.load_plugin(&plugins, outside.join("libsg_out.so")).unwrap_err());
    outside_of(r.load_plugin(&plugins, "sub/libsg_sub.so").unwrap_err());
    std::os::unix::fs::symlink(outside.join("libsg_out.so"), inside.join("libsg_link.so")).unwrap();
    outside_of(r.load_plugin(&plugins, "libsg_link.so").unwrap_err());
    // A directory holding a link out of it loads nothing.
    outside_of(r.load_plugins(&inside).unwrap_err());
    assert_pristine(&r);
    assert!(r.load_plugin(&plugins, "libsg_missing.so").is_err());

    // A link that stays inside resolves to its target, which loads once.
    std::fs::remove_file(inside.join("libsg_link.so")).unwrap();
    std::os::unix::fs::symlink("libsg_in.so", inside.join("libsg_alias.so")).unwrap();
    r.load_plugin(&plugins, "libsg_alias.so").unwrap();
    assert_eq!(r.plugins()[0].1, inside.canonicalize().unwrap().join("libsg_in.so"));
    let (_, message) = plugin_error(r.load_plugin(&plugins, "libsg_in.so").unwrap_err());
    assert!(message.contains("already loaded"), "{message}");
}

#[test]
fn a_bad_directory_or_file_is_an_error() {
    let root = tmp();
    assert!(matches!(PluginDir::new(&root.path().join("missing")), Err(RunnerError::Plugin { .. })));
    let file = root.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let (_, message) = plugin_error(PluginDir::new(&file).unwrap_err());
    assert!(message.contains("not a directory"), "{message}");

    let dir = root.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("libjunk.so"), "this is not an ELF file").unwrap();
    let mut r = Registry::with_builtin();
    let (_, message) = plugin_error(r.load_plugins(&dir).unwrap_err());
    assert!(message.contains("does not load"), "{message}");
    assert_pristine(&r);

    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (_, message) = plugin_error(PluginDir::new(&dir).unwrap_err());
    assert!(message.contains("writable by others"), "{message}");
}
