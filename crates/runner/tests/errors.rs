//! Every bad model is a typed error naming the op, weight or file at fault.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::{Dtype, tensor::TensorView};
use solidgraph_runner::models::{self, random_weights};
use solidgraph_runner::{Block, Dfg, Model, RunnerError, Tensor, save_model};

fn saved(dir: &Path) -> Dfg {
    let dfg = models::gcn(6, &[8, 3], false);
    save_model(dir, &dfg, &random_weights(&dfg, 1, 0.5)).unwrap();
    dfg
}

/// model.json rewritten by `edit` on its JSON value.
fn edit_json(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("model.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, v.to_string()).unwrap();
}

fn load_err(dir: &Path) -> RunnerError {
    Model::load(dir).expect_err("the model must be refused")
}

#[test]
fn unknown_op_is_named() {
    let dir = tempfile::tempdir().unwrap();
    saved(dir.path());
    edit_json(dir.path(), |v| v["ops"][1]["op"] = "conv3d".into());
    let e = load_err(dir.path());
    assert!(matches!(&e, RunnerError::UnknownOp { index: 1, name } if name == "conv3d"), "{e}");
    assert!(e.to_string().contains("conv3d"));
}

#[test]
fn newer_version_and_wrong_format() {
    let dir = tempfile::tempdir().unwrap();
    saved(dir.path());
    edit_json(dir.path(), |v| v["version"] = 2.into());
    assert!(matches!(load_err(dir.path()), RunnerError::Version { found: 2, supported: 1 }));
    edit_json(dir.path(), |v| v["format"] = "onnx".into());
    assert!(matches!(load_err(dir.path()), RunnerError::Format(f) if f == "onnx"));
    std::fs::write(dir.path().join("model.json"), "{not json").unwrap();
    assert!(matches!(load_err(dir.path()), RunnerError::Json(_)));
}

#[test]
fn bad_op_fields_and_references() {
    let dir = tempfile::tempdir().unwrap();
    saved(dir.path());
    edit_json(dir.path(), |v| v["ops"][1]["reduce"] = "avg".into());
    let e = load_err(dir.path());
    assert!(matches!(&e, RunnerError::BadOp { index: 1, op, .. } if op == "spmm"), "{e}");
    saved(dir.path());
    edit_json(dir.path(), |v| v["ops"][1]["block"] = 7.into());
    assert!(matches!(load_err(dir.path()), RunnerError::BadOp { index: 1, .. }));
    saved(dir.path());
    edit_json(dir.path(), |v| v["ops"][1]["x"] = "nowhere".into());
    let e = load_err(dir.path());
    assert!(matches!(&e, RunnerError::Shape { index: 1, .. }) && e.to_string().contains("nowhere"), "{e}");
    saved(dir.path());
    edit_json(dir.path(), |v| v["output"] = "missing".into());
    assert!(matches!(load_err(dir.path()), RunnerError::Invalid(_)));
}

#[test]
fn input_width_mismatch_is_a_shape_error_at_load() {
    let dir = tempfile::tempdir().unwrap();
    saved(dir.path());
    edit_json(dir.path(), |v| v["inputs"][0]["cols"] = 7.into());
    let e = load_err(dir.path());
    assert!(matches!(&e, RunnerError::Shape { index: 0, op, .. } if op == "gemm"), "{e}");
    assert!(e.to_string().contains("7 columns"), "{e}");
}

#[test]
fn input_width_and_rows_mismatch_at_run() {
    let dir = tempfile::tempdir().unwrap();
    saved(dir.path());
    let model = Model::load(dir.path()).unwrap();
    let b = Block::from_edges(3, 3, &[0, 1], &[1, 2], None).unwrap();
    let wide = HashMap::from([("x".to_string(), Tensor::zeros(3, 7))]);
    assert!(matches!(model.run(&[b.clone(), b.clone()], &wide), Err(RunnerError::Input { name, .. }) if name == "x"));
    let short = HashMap::from([("x".to_string(), Tensor::zeros(2, 6))]);
    assert!(matches!(model.run(&[b.clone(), b.clone()], &short), Err(RunnerError::Input { .. })));
    assert!(matches!(model.run(std::slice::from_ref(&b), &short), Err(RunnerError::Block { .. })));
    assert!(matches!(model.run(&[b.clone(), b], &HashMap::new()), Err(RunnerError::Input { .. })));
}

fn write_raw(dir: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<_> = tensors.iter().map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize_to_file(views, None, &dir.join("weights.safetensors")).unwrap();
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The GCN's weights as raw safetensors entries, `edit` applied to the named one.
fn weights_with(dfg: &Dfg, name: &str, edit: impl Fn(&mut (Dtype, Vec<usize>, Vec<u8>)), drop: bool) -> Vec<(String, Dtype, Vec<usize>, Vec<u8>)> {
    let w = random_weights(dfg, 1, 0.5);
    let mut out: Vec<_> =
        w.iter().filter(|(n, _)| !(drop && n.as_str() == name)).map(|(n, w)| (n.clone(), Dtype::F32, w.shape.clone(), f32_bytes(&w.data))).collect();
    for e in out.iter_mut().filter(|e| e.0 == name) {
        let mut t = (e.1, e.2.clone(), e.3.clone());
        edit(&mut t);
        (e.1, e.2, e.3) = t;
    }
    out
}

fn load_with_weights(dfg: &Dfg, raw: Vec<(String, Dtype, Vec<usize>, Vec<u8>)>) -> RunnerError {
    let dir = tempfile::tempdir().unwrap();
    save_model(dir.path(), dfg, &random_weights(dfg, 1, 0.5)).unwrap();
    let refs: Vec<_> = raw.iter().map(|(n, d, s, b)| (n.as_str(), *d, s.clone(), b.clone())).collect();
    write_raw(dir.path(), &refs);
    load_err(dir.path())
}

#[test]
fn bad_weights_are_named() {
    let dfg = models::gcn(6, &[8, 3], false);
    let name = "convs.0.lin.weight";
    let e = load_with_weights(&dfg, weights_with(&dfg, name, |_| {}, true));
    assert!(matches!(&e, RunnerError::MissingWeight { name: n } if n == name), "{e}");
    let e = load_with_weights(&dfg, weights_with(&dfg, name, |t| (t.0, t.2) = (Dtype::F64, [t.2.clone(), t.2.clone()].concat()), false));
    assert!(matches!(&e, RunnerError::WeightDtype { name: n, .. } if n == name), "{e}");
    let e = load_with_weights(&dfg, weights_with(&dfg, name, |t| t.1 = vec![6, 8], false));
    assert!(matches!(&e, RunnerError::WeightShape { name: n, found, .. } if n == name && found == &vec![6, 8]), "{e}");
    let e = load_with_weights(&dfg, weights_with(&dfg, "convs.1.bias", |t| t.2[8..12].copy_from_slice(&f32::NAN.to_le_bytes()), false));
    assert!(matches!(&e, RunnerError::WeightNotFinite { name: n, at: 2, .. } if n == "convs.1.bias"), "{e}");
    assert!(e.to_string().contains("convs.1.bias"));
    let e = load_with_weights(&dfg, weights_with(&dfg, "convs.1.bias", |t| t.2[0..4].copy_from_slice(&f32::INFINITY.to_le_bytes()), false));
    assert!(matches!(&e, RunnerError::WeightNotFinite { at: 0, .. }), "{e}");
}

#[test]
fn missing_files_and_garbage_weights() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(load_err(dir.path()), RunnerError::Io { .. }));
    saved(dir.path());
    std::fs::write(dir.path().join("weights.safetensors"), b"garbage").unwrap();
    assert!(matches!(load_err(dir.path()), RunnerError::WeightsFile(_)));
}

#[test]
fn declared_weight_shapes_must_fit_their_ops() {
    let mut dfg = models::gcn(6, &[8, 3], false);
    dfg.weights.insert("convs.1.bias".into(), vec![4]);
    let mut w = random_weights(&dfg, 1, 0.5);
    let e = Model::from_parts(dfg.clone(), &w, &Default::default()).unwrap_err();
    assert!(matches!(&e, RunnerError::Shape { op, .. } if op == "add"), "{e}");
    dfg.weights.insert("convs.1.bias".into(), vec![0]);
    w.insert("convs.1.bias".into(), solidgraph_runner::Weight::new(vec![0], vec![]));
    assert!(matches!(Model::from_parts(dfg, &w, &Default::default()), Err(RunnerError::Invalid(_))));
    let _ = BTreeMap::<String, f32>::new();
}
