// The CUDA runtime, loaded at run time (dlopen) on first use of a device
// destination, so that ringsafe builds, installs and runs with no CUDA present.
// CUDA's headers are not used: the few types, constants and functions needed
// are declared here from the public CUDA Runtime API reference (engine-internal).
#pragma once

#include <cstddef>
#include <string>

namespace ringsafe::device {

// cudaError_t: 0 is cudaSuccess.
using cuda_error = int;
inline constexpr cuda_error cuda_success = 0;
// cudaStream_t and cudaEvent_t are pointers to opaque runtime structs.
using cuda_stream = struct cuda_stream_opaque*;
using cuda_event = struct cuda_event_opaque*;

// Flags and enumerators of the runtime API (values from its reference).
inline constexpr unsigned cuda_stream_non_blocking = 0x01;  // cudaStreamNonBlocking
inline constexpr unsigned cuda_event_disable_timing = 0x02;  // cudaEventDisableTiming
inline constexpr unsigned cuda_host_alloc_default = 0x00;    // cudaHostAllocDefault
inline constexpr int cuda_memcpy_host_to_device = 1;          // cudaMemcpyHostToDevice
inline constexpr int cuda_memcpy_device_to_host = 2;          // cudaMemcpyDeviceToHost
inline constexpr int cuda_memcpy_default = 4;                 // cudaMemcpyDefault
// cudaMemoryType: what cudaPointerGetAttributes says a pointer is (the two
// read: 0 is ordinary host memory, 1 pinned host memory).
inline constexpr int cuda_memory_device = 2;
inline constexpr int cuda_memory_managed = 3;

// cudaPointerAttributes as of CUDA 11 (type, device, devicePointer,
// hostPointer), with spare room in case a later runtime writes more.
struct cuda_pointer_attributes {
    int type = 0;
    int device = 0;
    void* device_pointer = nullptr;
    void* host_pointer = nullptr;
    unsigned char spare[64] = {};
};

// The runtime functions ringsafe resolves (signatures as in the reference).
// The last three serve the GPU tests and the benchmark only.
struct cuda_api {
    std::string library;  // the soname that was loaded
    cuda_error (*set_device)(int);
    cuda_error (*get_device)(int*);
    cuda_error (*stream_create_with_flags)(cuda_stream*, unsigned);
    cuda_error (*stream_destroy)(cuda_stream);
    cuda_error (*memcpy_async)(void*, const void*, std::size_t, int, cuda_stream);
    cuda_error (*event_create_with_flags)(cuda_event*, unsigned);
    cuda_error (*event_record)(cuda_event, cuda_stream);
    cuda_error (*event_synchronize)(cuda_event);
    cuda_error (*event_query)(cuda_event);
    cuda_error (*event_destroy)(cuda_event);
    cuda_error (*stream_wait_event)(cuda_stream, cuda_event, unsigned);
    cuda_error (*stream_synchronize)(cuda_stream);
    cuda_error (*host_alloc)(void**, std::size_t, unsigned);
    cuda_error (*free_host)(void*);
    const char* (*get_error_string)(cuda_error);
    cuda_error (*get_last_error)();
    cuda_error (*pointer_get_attributes)(cuda_pointer_attributes*, const void*);
    cuda_error (*malloc)(void**, std::size_t);
    cuda_error (*free)(void*);
    cuda_error (*memcpy)(void*, const void*, std::size_t, int);
};

// The runtime, loaded once per process: libcudart.so.12, .13, .11, then
// libcudart.so, or only the library RINGSAFE_CUDART names when set. Throws
// ringsafe::error (InvalidArgument) naming the libraries tried and dlerror()'s
// reason, or the missing function, when it cannot be loaded; later calls
// throw the same error again without retrying.
const cuda_api& cuda_runtime();

// "<name>: <cudaGetErrorString(e)> (cudaError <e>)".
std::string cuda_error_text(const cuda_api& api, const char* name, cuda_error e);

}  // namespace ringsafe::device
