/* What faulting in fresh anonymous memory costs on this machine, in 4 KiB
 * pages and in transparent huge pages (issue 33: the cache image's fill).
 * Maps MIB MiB, asks for huge pages (HUGE=1) or not (0), writes one byte
 * per 4 KiB (the first touch: faults), then rewrites it all (no faults).
 * Freed memory is handed back to a VM's host after a few seconds (free page
 * reporting), so sleep between runs to measure memory that is fresh again.
 * usage: cc -O2 -o /tmp/fault_cost benchmarks/fault_cost.c
 *        for i in 1 2 3; do sleep 4; /tmp/fault_cost 1024 0; sleep 4; /tmp/fault_cost 1024 1; done */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MIB HUGE(0|1)\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)atol(argv[1]) << 20, huge = 2 << 20;
    int want_huge = atoi(argv[2]);
    char *m = mmap(0, n + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    char *p = (char *)(((size_t)m + huge - 1) & ~(huge - 1));
    madvise(p, n, want_huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    double t = now();
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    double first = now() - t;
    t = now();
    memset(p, 2, n);
    double again = now() - t;
    printf("%s %zu MiB: first touch %.3f s (%.2f s/GiB), rewritten %.3f s\n", want_huge ? "THP" : "4K", n >> 20, first,
           first / (n / 1073741824.0), again);
    return 0;
}
