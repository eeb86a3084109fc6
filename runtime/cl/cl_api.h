// The OpenCL API as baregrad uses it: the types and constants of Khronos' <CL/cl.h> (OpenCL 1.2
// API level), and the entry points we call resolved at run time with dlopen of the ICD loader
// ("libOpenCL.so.1") + dlsym, so nothing links against libOpenCL. Names are Khronos', verbatim.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <CL/cl_ext.h>  // CL_PLATFORM_NOT_FOUND_KHR

#include <source_location>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baregrad::runtime::cl {

// Every ClApi member: the symbol dlsym resolves into it.
#define BG_CL_SYMBOLS(X)       \
  X(clGetPlatformIDs)          \
  X(clGetPlatformInfo)         \
  X(clGetDeviceIDs)            \
  X(clGetDeviceInfo)           \
  X(clCreateContext)           \
  X(clReleaseContext)          \
  X(clCreateCommandQueue)      \
  X(clReleaseCommandQueue)     \
  X(clCreateBuffer)            \
  X(clReleaseMemObject)        \
  X(clEnqueueWriteBuffer)      \
  X(clEnqueueReadBuffer)       \
  X(clEnqueueCopyBuffer)       \
  X(clCreateProgramWithSource) \
  X(clBuildProgram)            \
  X(clGetProgramBuildInfo)     \
  X(clReleaseProgram)          \
  X(clCreateKernel)            \
  X(clReleaseKernel)           \
  X(clSetKernelArg)            \
  X(clEnqueueNDRangeKernel)    \
  X(clFinish)                  \
  X(clFlush)                   \
  X(clGetKernelWorkGroupInfo)

// The entry points, one member per symbol, typed by cl.h's own declaration. Filled by
// load_cl_api(); every member is non-null.
struct ClApi {
  std::string path;  // what dlopen was given
  void* lib = nullptr;
#define BG_CL_MEMBER(sym) decltype(&::sym) sym = nullptr;
  BG_CL_SYMBOLS(BG_CL_MEMBER)
#undef BG_CL_MEMBER
};

// The ICD loader: `path`, else "libOpenCL.so.1". Loaded once per path and kept for the process
// (never dlclosed: platforms outlive every context). NotFound naming the library (or the missing
// symbol) and dlerror() when it cannot be used.
Result<const ClApi*> load_cl_api(std::string_view path = {});

// The name of an error code of cl.h (OpenCL 1.2) or CL_PLATFORM_NOT_FOUND_KHR
// ("CL_OUT_OF_RESOURCES"), or "CL_UNKNOWN_ERROR" for another value.
const char* cl_error_name(cl_int err);

// OK for CL_SUCCESS; else "<call> failed: CL_X (<value>)", coded by the error (out of memory or
// resources -> ResourceExhausted, no device -> NotFound, unavailable -> Unavailable,
// CL_INVALID_VALUE -> InvalidArgument; Internal by default).
Status cl_check(cl_int err, std::string_view call, std::source_location loc = Loc::current());

}  // namespace baregrad::runtime::cl

// Calls api.fn(args...) (an entry point returning cl_int) and converts the result with
// cl_check, naming fn.
#define BG_CL(api, fn, ...) ::baregrad::runtime::cl::cl_check((api).fn(__VA_ARGS__), #fn)
