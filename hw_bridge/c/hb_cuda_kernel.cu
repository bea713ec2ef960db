/* hb_cuda_kernel.cu: the cuda backend's persistent kernel, built from the device runtime library
   (qrt.h) and the same C functions the CPU consumers serve (twin/runtime/c/qrt_functions.c, built
   here as device code). One thread loops on qrt_dispatch_one over the request queue until the
   stop signal is raised (qrt_serve_until_stop, twin/runtime/c/qrt_serve.h); replies go to the
   reply queue. hw_bridge/cuda.py puts both queues in
   pinned, mapped host memory: the kernel polls the request queue across PCIe, the host polls the
   reply's ready word in its own memory. On exit *served holds the requests served and *status 0
   or the first negative qrt error. Launch with one block. */
#include "qrt.h"
#include "qrt_serve.h"

#define QRT_FN_EXPORT __device__
#include "qrt_functions.c"

extern "C" __global__ void hb_live_kernel(uint8_t *req, uint8_t *rep, uint32_t slot_bytes, uint32_t slots,
                                          uint32_t encoding, uint8_t *stage, const qrt_signal *stop,
                                          unsigned long long *served, int *status)
{
    qrt_queue rq, pq;
    qrt_endpoint ep;
    int rc;

    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    rc = qrt_queue_init(&rq, req, slot_bytes, slots, encoding);
    if (rc == QRT_OK)
        rc = qrt_queue_init(&pq, rep, slot_bytes, slots, encoding);
    if (rc == QRT_OK)
        rc = qrt_endpoint_init(&ep, &rq, &pq, stage);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 1u, qrt_fn_invert);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 2u, qrt_fn_xor_fold);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 3u, qrt_fn_sum32);
    *(volatile int *)status = rc == QRT_OK ? 1 : rc; /* 1: serving */
    __threadfence_system();
    qrt_serve_until_stop(&ep, rc, stop, served, status);
}
