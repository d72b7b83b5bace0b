//! Kernel selection: the highest-priority available kernel on an enabled device runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use solidgraph_runner::dfg::Op;
use solidgraph_runner::kernels::{Args, Kernel, cpu::Cpu};
use solidgraph_runner::models::{self, random_weights};
use solidgraph_runner::{Block, Device, Model, Registry, RunnerError, Tensor};

/// Counts its calls and computes as the CPU kernel does.
struct Counting {
    name: &'static str,
    calls: AtomicUsize,
    available: bool,
}

impl Kernel for Counting {
    fn name(&self) -> &str {
        self.name
    }

    fn available(&self) -> bool {
        self.available
    }

    fn run(&self, op: &Op, args: &Args) -> Result<Tensor, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Cpu.run(op, args)
    }
}

fn counting(name: &'static str, available: bool) -> Arc<Counting> {
    Arc::new(Counting { name, calls: AtomicUsize::new(0), available })
}

fn run(model: &Model) -> Tensor {
    let b = Block::from_edges(4, 4, &[0, 1, 2, 3], &[1, 2, 3, 0], None).unwrap();
    model.run(&[b.clone(), b], &HashMap::from([("x".to_string(), Tensor::zeros(4, 6))])).unwrap()
}

#[test]
fn a_higher_priority_kernel_runs() {
    let dfg = models::gcn(6, &[8, 3], false);
    let w = random_weights(&dfg, 1, 0.5);
    let mut r = Registry::with_builtin();
    let fast = counting("fast-gemm", true);
    let slow = counting("slow-gemm", true);
    let absent = counting("absent-gemm", false);
    r.add_device(Device::new("accel"));
    r.register("gemm", Device::new("accel"), 1000, fast.clone()).unwrap();
    r.register("gemm", Device::cpu(), 50, slow.clone()).unwrap();
    r.register("gemm", Device::cpu(), 5000, absent.clone()).unwrap();
    let model = Model::from_parts(dfg.clone(), &w, &r).unwrap();
    assert!(model.kernel_names().iter().filter(|k| k.1 == "gemm").all(|k| k.2 == "fast-gemm"));
    assert!(model.kernel_names().iter().filter(|k| k.1 == "spmm").all(|k| k.2 == "cpu"));
    run(&model);
    assert_eq!((fast.calls.load(Ordering::SeqCst), slow.calls.load(Ordering::SeqCst), absent.calls.load(Ordering::SeqCst)), (2, 0, 0));
    // Disabling the device falls back to the best CPU kernel.
    r.remove_device(&Device::new("accel"));
    let model = Model::from_parts(dfg, &w, &r).unwrap();
    assert!(model.kernel_names().iter().filter(|k| k.1 == "gemm").all(|k| k.2 == "cpu"));
    assert_eq!(r.kernels("gemm").iter().map(|k| k.2).collect::<Vec<_>>(), vec![5000, 1000, 100, 50, 0]);
}

#[test]
fn registration_is_checked_and_an_empty_registry_has_no_kernel() {
    let mut r = Registry::empty();
    assert!(matches!(r.register("conv9", Device::cpu(), 1, counting("k", true)), Err(RunnerError::UnknownOp { .. })));
    assert!(matches!(r.register("gemm", Device::new("npu"), 1, counting("k", true)), Err(RunnerError::Invalid(_))));
    let dfg = models::gcn(6, &[3], false);
    let e = Model::from_parts(dfg.clone(), &random_weights(&dfg, 1, 0.5), &r).unwrap_err();
    assert!(matches!(e, RunnerError::NoKernel { .. }));
}

#[test]
fn sage_fuses_its_aggregation_into_the_gemm() {
    let dfg = models::sage(6, &[8, 3]);
    let w = random_weights(&dfg, 1, 0.5);
    let fused = Model::from_parts(dfg.clone(), &w, &Registry::with_builtin()).unwrap();
    assert_eq!(fused.kernel_names().iter().filter(|k| k.1 == "spmm_gemm").count(), 2);
    let plain = Model::unfused(dfg, &w, &Registry::with_builtin()).unwrap();
    assert_eq!(plain.kernel_names().iter().filter(|k| k.1 == "spmm_gemm").count(), 0);
    let x = Tensor::new(4, 6, (0..24).map(|i| i as f32 / 10.0).collect());
    let b = Block::from_edges(4, 4, &[0, 1, 2, 3, 2], &[1, 2, 3, 0, 0], None).unwrap();
    let inputs = HashMap::from([("x".to_string(), x)]);
    let (a, c) = (fused.run(&[b.clone(), b.clone()], &inputs).unwrap(), plain.run(&[b.clone(), b], &inputs).unwrap());
    assert!(a.max_rel_diff(&c) < 1e-5);
}

#[test]
fn a_model_is_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Model>();
    shared::<Registry>();
}
