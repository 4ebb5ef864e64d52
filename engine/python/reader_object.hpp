// What Python holds of an open reader (ringsafe._ringsafe.Reader), shared by
// the bindings that take one (engine-internal, the Python front end only).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "ringsafe/error.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::python {

// A reader shared with the jobs that run on it: close() drops the Python
// side's reference; a job still running keeps the reader until it ends.
struct py_reader {
    std::shared_ptr<reader> r;
    bool remote = false;  // some shard is read over the network: no read runs inline (it could stall)

    reader& get() const {
        if (!r) raise(errc::InvalidArgument, "the reader is closed");
        return *r;
    }
};

// reader_options from the keyword arguments of Reader() (and of every call that
// opens a checkpoint); unknown keys are refused. connections, http_threads and
// http_chunk left out (or None) are the engine's: RINGSAFE_CONNECTIONS /
// RINGSAFE_HTTP_THREADS / RINGSAFE_CHUNK, else its defaults.
// The table of reader_options.cpp.
reader_options make_options(const pybind11::dict& kw);

// Reader()'s docstring: what it opens and the keyword options make_options takes.
extern const char* const reader_open_doc;

}  // namespace ringsafe::python
