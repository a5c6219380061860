/* dev_cuda_sim.cpp — the CUDA backend, compiled by the host C++ compiler against the stand-in's headers in this
 * folder (cuda_runtime.h, cublas_v2.h, nccl.h come first on the include path): the very source a GPU build compiles,
 * with its kernels run as loops on the CPU. Not for: anything else; the backend's code lives in cuda/dev_cuda.cu. */
#include "../dev_cuda.cu"
