/*
 * solidgraph_plugin.h: the C ABI of SolidGraph's GNN runner kernel plugins,
 * version 1.
 *
 * A plugin is a shared library in a directory the host is configured with
 * (Registry::load_plugins / PluginDir in crates/runner/src/plugin.rs). The
 * host refuses any file outside that directory, symlinks and ".." included.
 * It exports two functions:
 *
 *   uint32_t solidgraph_plugin_abi_version(void);
 *       Returns SOLIDGRAPH_PLUGIN_ABI_VERSION as compiled. The host calls it
 *       first and calls nothing else unless it equals the host's version.
 *
 *   int32_t solidgraph_plugin_init(const SgHost *host, char *message, uint64_t message_cap);
 *       Registers the plugin's devices and kernels through `host` and returns
 *       SG_OK, or a non-zero status with a NUL-terminated reason written into
 *       `message` (at most `message_cap` bytes, NUL included). The host keeps
 *       nothing from a plugin whose init fails or that made a registration
 *       the host rejected: loading is all or nothing. `host` and its callbacks
 *       are valid only during the call. init may run more than once in one
 *       process (once per registry that loads the plugin), never concurrently.
 *
 * A kernel (SgKernelFn) computes one op of a model over f32 row-major tensors
 * and returns SG_OK or a non-zero status with a reason in `message`; the host
 * turns a non-zero status into an error naming the plugin, the kernel and the
 * op, raised to the caller. Kernels:
 *   - may run on several threads at once, with the same user_data: they are
 *     thread-safe;
 *   - write only `call->out` (out_rows * out_cols floats, zero-filled by the
 *     host) and `message`; every input is read-only and lives for the call;
 *   - never unwind (no C++ exception, no longjmp) across the call.
 * A pointer to zero elements may be any non-NULL value: do not dereference it.
 *
 * Plugins run in the host's process: the directory is the trust boundary.
 * Limits: names 1 to SG_MAX_NAME bytes of printable ASCII without spaces;
 * SG_MAX_DEVICES devices and SG_MAX_KERNELS kernels per plugin; messages are
 * cut at the host's buffer (SG_MESSAGE_CAP bytes).
 */
#ifndef SOLIDGRAPH_PLUGIN_H
#define SOLIDGRAPH_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SOLIDGRAPH_PLUGIN_ABI_VERSION 1u

/* Status codes: SG_OK, or any non-zero value for a failure. */
#define SG_OK 0
#define SG_ERROR 1

#define SG_MAX_NAME 64
#define SG_MAX_DEVICES 16
#define SG_MAX_KERNELS 256
#define SG_MESSAGE_CAP 1024

/*
 * The ops a plugin may implement, registered by name (the "op" of model.json)
 * and told apart in a call by code. Operands are `call->inputs`, in order:
 *
 *   "gemm"       SG_OP_GEMM        x [m, k], w [n, k] (PyTorch Linear layout), optional bias [1, n]
 *                                  out [m, n] = x w^T + bias
 *   "spmm"       SG_OP_SPMM        x [n_src, c], optional edge_values [num_edges, h] (c a multiple of h)
 *                                  out [n_dst, c]: out[d, j] = reduce over edges e = (s -> d) of
 *                                  coef[e] * edge_values[e, j / (c / h)] * x[s, j]
 *                                  (edge_values taken as 1 when absent); reduce is call->reduce;
 *                                  mean divides by the row's edge count; a row with no edges is 0.
 *   "relu"       SG_OP_RELU        x; out = max(x, 0)
 *   "leaky_relu" SG_OP_LEAKY_RELU  x; out = x > 0 ? x : param * x        (param: slope)
 *   "elu"        SG_OP_ELU         x; out = x > 0 ? x : param * (e^x - 1) (param: alpha)
 *   "sigmoid"    SG_OP_SIGMOID     x; out = 1 / (1 + e^-x)
 *   "tanh"       SG_OP_TANH        x; out = tanh(x)
 *   "add"        SG_OP_ADD         a [m, c], b [m, c] or [1, c] (broadcast over rows); out = a + b
 *   "mul"        SG_OP_MUL         a, b as for add; out = a * b
 *   "scale"      SG_OP_SCALE       x; out = param * x                     (param: factor)
 *
 * Other ops (and "spmm_gemm", into which the host fuses an aggregation read
 * only by the next gemm) run on the built-in kernels.
 */
enum SgOp {
    SG_OP_GEMM = 1,
    SG_OP_SPMM = 2,
    SG_OP_RELU = 3,
    SG_OP_LEAKY_RELU = 4,
    SG_OP_ELU = 5,
    SG_OP_SIGMOID = 6,
    SG_OP_TANH = 7,
    SG_OP_ADD = 8,
    SG_OP_MUL = 9,
    SG_OP_SCALE = 10
};

enum SgReduce { SG_REDUCE_SUM = 0, SG_REDUCE_MEAN = 1, SG_REDUCE_MAX = 2 };

/* A read-only f32 matrix, row-major: element (i, j) is data[i * cols + j]. */
typedef struct SgTensor {
    const float *data;
    uint64_t rows;
    uint64_t cols;
} SgTensor;

/* The edges an aggregation reads, in CSR by destination: the edges of
 * destination d are indptr[d] .. indptr[d + 1] - 1, each with a source id
 * (< n_src) and a coefficient (edge weight, normalisation; self-loops already
 * added when the model asks for them). Destinations are the first n_dst sources. */
typedef struct SgEdges {
    uint64_t n_dst;
    uint64_t n_src;
    uint64_t num_edges;
    const uint64_t *indptr;  /* n_dst + 1 entries, indptr[0] = 0, indptr[n_dst] = num_edges */
    const uint32_t *indices; /* num_edges source ids */
    const float *coef;       /* num_edges coefficients */
} SgEdges;

/* One call of a kernel. */
typedef struct SgCall {
    uint32_t op;            /* enum SgOp */
    uint32_t reduce;        /* enum SgReduce for spmm, else 0 */
    float param;            /* slope, alpha or factor (see the op list), else 0 */
    uint32_t num_inputs;
    const SgTensor *inputs; /* num_inputs operands, in the op's order */
    const SgEdges *edges;   /* spmm's edges, else NULL */
    float *out;             /* out_rows * out_cols floats, zero-filled, row-major */
    uint64_t out_rows;
    uint64_t out_cols;
} SgCall;

typedef int32_t (*SgKernelFn)(void *user_data, const SgCall *call, char *message, uint64_t message_cap);

/* What init receives. Each callback returns SG_OK or SG_ERROR; a rejected
 * registration also fails the whole load, with the host's reason. */
typedef struct SgHost {
    uint32_t abi_version; /* the host's SOLIDGRAPH_PLUGIN_ABI_VERSION */
    void *ctx;            /* pass back as each callback's first argument */
    /* Adds (and enables) a device; a device already known is not an error. */
    int32_t (*register_device)(void *ctx, const char *name);
    /* Registers `run` for `op` (a name from the list above) on `device` (added
     * before, by this plugin or the host, e.g. "cpu") at `priority`: the
     * highest-priority kernel on an enabled device runs (the host's reference
     * kernels have 0, its optimised CPU kernels 100). `name` appears in errors
     * and in the model's kernel list as "<plugin file stem>:<name>". */
    int32_t (*register_kernel)(void *ctx, const char *op, const char *device, int32_t priority, const char *name, SgKernelFn run,
                               void *user_data);
} SgHost;

uint32_t solidgraph_plugin_abi_version(void);
int32_t solidgraph_plugin_init(const SgHost *host, char *message, uint64_t message_cap);

#ifdef __cplusplus
}
#endif

#endif /* SOLIDGRAPH_PLUGIN_H */
