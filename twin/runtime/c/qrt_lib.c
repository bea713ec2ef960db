/* qrt_lib.c: the device runtime library as a shared object, for bindings (ctypes) and for C
   programs that would rather link than inline. Every QRT_API function of qrt.h is defined here
   as an exported symbol of the same name; a few extras describe the build. */
#define QRT_EXPORT 1
#include "qrt.h"

#ifndef QRT_BUILD_ID
#define QRT_BUILD_ID "unknown"
#endif

#define QRT_SIZEOF_QUEUE 1u
#define QRT_SIZEOF_MSG 2u
#define QRT_SIZEOF_ENDPOINT 3u
#define QRT_SIZEOF_SIGNAL 4u
#define QRT_SIZEOF_DQ 5u

/* The identity of the sources this object was built from (see twin/runtime/native.py). */
QRT_API const char *qrt_build_id(void)
{
    return QRT_BUILD_ID;
}

/* QRT_API_VERSION * 65536 + QRT_CONTRACT_VERSION. */
QRT_API uint32_t qrt_version(void)
{
    return QRT_API_VERSION * 65536u + QRT_CONTRACT_VERSION;
}

/* sizeof one of the library's structs (QRT_SIZEOF_*), 0 for an unknown one: bindings allocate
   endpoints and rings without mirroring their layout. */
QRT_API uint32_t qrt_sizeof(uint32_t what)
{
    switch (what) {
    case QRT_SIZEOF_QUEUE: return (uint32_t)sizeof(qrt_queue);
    case QRT_SIZEOF_MSG: return (uint32_t)sizeof(qrt_msg);
    case QRT_SIZEOF_ENDPOINT: return (uint32_t)sizeof(qrt_endpoint);
    case QRT_SIZEOF_SIGNAL: return (uint32_t)sizeof(qrt_signal);
    case QRT_SIZEOF_DQ: return (uint32_t)sizeof(qrt_dq);
    default: return 0u;
    }
}
