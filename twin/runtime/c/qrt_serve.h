/* qrt_serve.h: the serving loop of a persistent kernel built on the device runtime library
   (qrt.h), shared by twin/runtime/c/qrt_echo_kernel.cu and hw_bridge/c/hb_cuda_kernel.cu.
   CUDA device code: include it from a .cu file, after qrt.h. */
#ifndef QRT_SERVE_H
#define QRT_SERVE_H

#include "qrt.h"

/* Serve ep (queues and dispatch table already set up) until *stop reaches 1 or a dispatch fails.
   rc: the set-up's result; the loop runs only while it is QRT_OK. The stop signal is read once
   every 256 empty polls: off the hot path. On exit *served holds the requests served and *status
   rc (0, or the first negative qrt error), then a system-wide fence makes both visible to the
   host. */
static __device__ __forceinline__ void qrt_serve_until_stop(qrt_endpoint *ep, int rc, const qrt_signal *stop,
                                                            unsigned long long *served, int *status)
{
    unsigned long long n = 0;
    uint32_t idle = 0;

    while (rc == QRT_OK) {
        int r = qrt_dispatch_one(ep);
        if (r > 0) {
            ++n;
            idle = 0;
        } else if (r < 0) {
            rc = r;
        } else if (++idle == 256u) {
            idle = 0;
            if (qrt_signal_wait_nb(stop, 1u))
                break;
        }
    }
    *(volatile unsigned long long *)served = n;
    *(volatile int *)status = rc;
    __threadfence_system();
}

#endif /* QRT_SERVE_H */
