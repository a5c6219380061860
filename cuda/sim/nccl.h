/* nccl.h — the NCCL collectives towertrain's CUDA backend calls, as the CPU stand-in provides them: a communicator
 * per rank from ncclCommInitAll, and ncclReduce / ncclAllReduce / ncclBroadcast queued on the rank's stream. When a
 * rank's stream runs its collective, the rank waits for the others' (a rendezvous of the tower threads, each
 * draining its own stream, as NCCL's kernels wait on a GPU); the last to arrive adds the ranks' buffers in rank order
 * and writes every result. A rank that never arrives ends the process after TT_SIM_NCCL_TIMEOUT seconds [60] with a
 * line naming the ranks that did. Group calls are refused: the backend calls each rank from its own thread, which
 * NCCL supports without them, and a group issued by one thread could not meet itself here.
 * Not for: anything but the stand-in build (cmake -DTT_CUDA_SIM=ON). */
#ifndef TT_SIM_NCCL_H
#define TT_SIM_NCCL_H

#include <stddef.h>

#include "cuda_runtime.h"

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
} ncclResult_t;

typedef enum { ncclFloat32 = 7, ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

typedef struct ncclComm *ncclComm_t;

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int n, const int *devices);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);

#endif
