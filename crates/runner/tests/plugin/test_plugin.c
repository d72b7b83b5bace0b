/*
 * The test plugin: built by tests/plugins.rs with `cc -shared -fPIC`, in
 * variants chosen by -D flags:
 *   (none)          registers device "testdev" with relu and gemm kernels at
 *                   priority 1000 that count their calls (read back through
 *                   sg_test_calls), and a tanh kernel that always fails;
 *   -DABI=N         claims ABI version N;
 *   -DNO_VERSION    exports no solidgraph_plugin_abi_version;
 *   -DNO_INIT       exports no solidgraph_plugin_init;
 *   -DFAIL_INIT     init fails with a message;
 *   -DBAD_OP        also registers a kernel for "concat", which plugins may not implement,
 *                   and ignores the status the host returns;
 *   -DBAD_DEVICE    also registers a kernel on a device nobody registered.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "solidgraph_plugin.h"

#ifndef ABI
#define ABI SOLIDGRAPH_PLUGIN_ABI_VERSION
#endif

static atomic_llong relu_calls;
static atomic_llong gemm_calls;

/* The calls of the relu (0) or gemm (1) kernel so far. */
long long sg_test_calls(int which) {
    return which == 0 ? atomic_load(&relu_calls) : atomic_load(&gemm_calls);
}

/* Sizes of the ABI's structs, compared with the runner's #[repr(C)] ones. */
uint64_t sg_test_sizeof(int which) {
    switch (which) {
    case 0: return sizeof(SgTensor);
    case 1: return sizeof(SgEdges);
    case 2: return sizeof(SgCall);
    case 3: return sizeof(SgHost);
    default: return 0;
    }
}

static void say(char *message, uint64_t cap, const char *text) {
    if (message != NULL && cap > 0) {
        snprintf(message, (size_t)cap, "%s", text);
    }
}

static int32_t relu(void *user_data, const SgCall *call, char *message, uint64_t cap) {
    (void)user_data;
    if (call->op != SG_OP_RELU || call->num_inputs != 1) {
        say(message, cap, "testdev-relu called for another op");
        return SG_ERROR;
    }
    const SgTensor *x = &call->inputs[0];
    if (x->rows != call->out_rows || x->cols != call->out_cols) {
        say(message, cap, "relu output shape differs from its input");
        return SG_ERROR;
    }
    for (uint64_t i = 0; i < x->rows * x->cols; i++) {
        call->out[i] = x->data[i] > 0.0f ? x->data[i] : 0.0f;
    }
    atomic_fetch_add(&relu_calls, 1);
    return SG_OK;
}

static int32_t gemm(void *user_data, const SgCall *call, char *message, uint64_t cap) {
    (void)user_data;
    if (call->op != SG_OP_GEMM || call->num_inputs < 2) {
        say(message, cap, "testdev-gemm called for another op");
        return SG_ERROR;
    }
    const SgTensor *x = &call->inputs[0], *w = &call->inputs[1];
    const SgTensor *b = call->num_inputs > 2 ? &call->inputs[2] : NULL;
    for (uint64_t i = 0; i < x->rows; i++) {
        for (uint64_t o = 0; o < w->rows; o++) {
            float acc = 0.0f;
            for (uint64_t k = 0; k < x->cols; k++) {
                acc += x->data[i * x->cols + k] * w->data[o * w->cols + k];
            }
            call->out[i * call->out_cols + o] = acc + (b != NULL ? b->data[o] : 0.0f);
        }
    }
    atomic_fetch_add(&gemm_calls, 1);
    return SG_OK;
}

static int32_t failing_tanh(void *user_data, const SgCall *call, char *message, uint64_t cap) {
    (void)user_data;
    (void)call;
    say(message, cap, "testdev cannot run tanh");
    return 7;
}

#ifndef NO_VERSION
uint32_t solidgraph_plugin_abi_version(void) {
    return ABI;
}
#endif

#ifndef NO_INIT
int32_t solidgraph_plugin_init(const SgHost *host, char *message, uint64_t cap) {
#ifdef FAIL_INIT
    (void)host;
    say(message, cap, "no testdev hardware found");
    return 3;
#else
    if (host->abi_version != SOLIDGRAPH_PLUGIN_ABI_VERSION) {
        say(message, cap, "host speaks another ABI");
        return SG_ERROR;
    }
    if (host->register_device(host->ctx, "testdev") != SG_OK) {
        say(message, cap, "register_device failed");
        return SG_ERROR;
    }
#ifdef BAD_OP
    (void)host->register_kernel(host->ctx, "concat", "testdev", 1000, "testdev-concat", relu, NULL);
#endif
#ifdef BAD_DEVICE
    (void)host->register_kernel(host->ctx, "relu", "npu", 1000, "npu-relu", relu, NULL);
#endif
    if (host->register_kernel(host->ctx, "relu", "testdev", 1000, "testdev-relu", relu, NULL) != SG_OK ||
        host->register_kernel(host->ctx, "gemm", "testdev", 1000, "testdev-gemm", gemm, NULL) != SG_OK ||
        host->register_kernel(host->ctx, "tanh", "testdev", 1000, "testdev-tanh", failing_tanh, NULL) != SG_OK) {
        say(message, cap, "register_kernel failed");
        return SG_ERROR;
    }
    return SG_OK;
#endif
}
#endif
