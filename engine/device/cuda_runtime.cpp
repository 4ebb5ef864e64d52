// Loading the CUDA runtime with dlopen and resolving the functions ringsafe uses.
#include "device/cuda_runtime.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "ringsafe/error.hpp"

namespace ringsafe::device {
namespace {

struct loaded {
    cuda_api api{};
    std::string failure;  // empty when api is usable
};

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string& failure) {
    void* sym = ::dlsym(lib, name);
    if (!sym) {
        if (failure.empty()) failure = "function " + std::string(name) + " is missing from it";
        return false;
    }
    out = reinterpret_cast<F>(sym);
    return true;
}

loaded load() {
    loaded l;
    std::vector<std::string> names;
    if (const char* forced = std::getenv("RINGSAFE_CUDART"); forced && *forced)
        names.push_back(forced);
    else
        names = {"libcudart.so.12", "libcudart.so.13", "libcudart.so.11", "libcudart.so"};
    void* lib = nullptr;
    std::string tried, last_reason;
    for (const auto& n : names) {
        tried += (tried.empty() ? "" : ", ") + n;
        lib = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            l.api.library = n;
            break;
        }
        const char* why = ::dlerror();
        last_reason = why ? why : "not found";
    }
    if (!lib) {
        l.failure = "GPU destination: the CUDA runtime is not available (tried " + tried + "; " + last_reason +
                    "); install the CUDA runtime, set RINGSAFE_CUDART to libcudart's path, or use "
                    "device_options::stand_in to run the pipeline on host memory";
        return l;
    }
    std::string missing;
    cuda_api& a = l.api;
    resolve(lib, "cudaSetDevice", a.set_device, missing);
    resolve(lib, "cudaGetDevice", a.get_device, missing);
    resolve(lib, "cudaStreamCreateWithFlags", a.stream_create_with_flags, missing);
    resolve(lib, "cudaStreamDestroy", a.stream_destroy, missing);
    resolve(lib, "cudaMemcpyAsync", a.memcpy_async, missing);
    resolve(lib, "cudaEventCreateWithFlags", a.event_create_with_flags, missing);
    resolve(lib, "cudaEventRecord", a.event_record, missing);
    resolve(lib, "cudaEventSynchronize", a.event_synchronize, missing);
    resolve(lib, "cudaEventQuery", a.event_query, missing);
    resolve(lib, "cudaEventDestroy", a.event_destroy, missing);
    resolve(lib, "cudaStreamWaitEvent", a.stream_wait_event, missing);
    resolve(lib, "cudaStreamSynchronize", a.stream_synchronize, missing);
    resolve(lib, "cudaHostAlloc", a.host_alloc, missing);
    resolve(lib, "cudaFreeHost", a.free_host, missing);
    resolve(lib, "cudaGetErrorString", a.get_error_string, missing);
    resolve(lib, "cudaGetLastError", a.get_last_error, missing);
    resolve(lib, "cudaPointerGetAttributes", a.pointer_get_attributes, missing);
    resolve(lib, "cudaMalloc", a.malloc, missing);
    resolve(lib, "cudaFree", a.free, missing);
    resolve(lib, "cudaMemcpy", a.memcpy, missing);
    if (!missing.empty()) {
        // The library stays loaded (unloading a CUDA runtime is not safe); it is simply unused.
        l.failure = "GPU destination: " + a.library + " was loaded but its " + missing;
    }
    return l;
}

}  // namespace

const cuda_api& cuda_runtime() {
    static const loaded l = load();
    if (!l.failure.empty()) raise(errc::InvalidArgument, l.failure);
    return l.api;
}

std::string cuda_error_text(const cuda_api& api, const char* name, cuda_error e) {
    const char* text = api.get_error_string ? api.get_error_string(e) : nullptr;
    return std::string(name) + ": " + (text ? text : "unknown CUDA error") + " (cudaError " + std::to_string(e) + ")";
}

}  // namespace ringsafe::device
