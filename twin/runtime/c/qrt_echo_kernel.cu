/* qrt_echo_kernel.cu: a persistent kernel that serves the exchange layer with the device runtime
   library (qrt.h). One thread claims requests from the request queue, dispatches them (function 0
   = the built-in echo, function 1 = qrt_demo_invert below) and publishes the replies into the
   reply queue, until the stop signal is raised (qrt_serve_until_stop, qrt_serve.h). The queues
   are wherever the host put them (pinned, mapped host memory in qrt_echo_host.cu; device memory
   written by a link card in the real loop): the kernel only needs device-visible pointers.

   Build: nvcc -arch=sm_90 -O2 -c qrt_echo_kernel.cu   (qrt_echo_host.cu includes this file) */
#include "qrt.h"
#include "qrt_serve.h"

#define QRT_DEMO_INVERT 1u

/* Function 1: the reply is the request with every byte inverted. */
__device__ int32_t qrt_demo_invert(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t out_cap)
{
    uint32_t i;
    if (in_len > out_cap)
        return -1;
    for (i = 0; i < in_len; ++i)
        out[i] = (uint8_t)~in[i];
    return (int32_t)in_len;
}

/* Serve until *stop reaches 1. req/rep: device-visible pointers to `slots` slots of `slot_bytes`
   in `encoding` (both queues alike). stage: device memory of qrt_endpoint_stage_bytes bytes
   (NULL for classic). On exit *served holds the requests served and *status 0, or the first
   negative qrt error. Launch with one block; threads other than (0, 0) return at once. */
extern "C" __global__ void qrt_echo_kernel(uint8_t *req, uint8_t *rep, uint32_t slot_bytes, uint32_t slots,
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
        rc = qrt_register(&ep, QRT_DEMO_INVERT, qrt_demo_invert);
    qrt_serve_until_stop(&ep, rc, stop, served, status);
}
