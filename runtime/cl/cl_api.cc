#include "runtime/cl/cl_api.h"

#include <map>
#include <memory>
#include <mutex>

#include "base/dl.h"

namespace baregrad::runtime::cl {
namespace {

// dlopen + dlsym of every symbol; the caller caches the result.
Result<std::unique_ptr<ClApi>> open_api(const std::string& path) {
  const std::string what = "the OpenCL ICD loader";
  ASSIGN_OR_RETURN(void* lib, dl_open(path, what));
  auto api = std::make_unique<ClApi>();
  api->path = path;
  api->lib = lib;
  BG_CL_SYMBOLS(BG_DL_RESOLVE)
  return api;
}

StatusCode code_of(cl_int err) {
  switch (err) {
    case CL_INVALID_VALUE:
      return StatusCode::kInvalidArgument;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
    case CL_OUT_OF_HOST_MEMORY:
      return StatusCode::kResourceExhausted;
    case CL_DEVICE_NOT_FOUND:
    case CL_PLATFORM_NOT_FOUND_KHR:
      return StatusCode::kNotFound;
    case CL_DEVICE_NOT_AVAILABLE:
    case CL_COMPILER_NOT_AVAILABLE:
    case CL_LINKER_NOT_AVAILABLE:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

const char* cl_error_name(cl_int err) {
  switch (err) {
#define BG_CL_ERROR(e) \
  case e:              \
    return #e;
    BG_CL_ERROR(CL_SUCCESS)
    BG_CL_ERROR(CL_DEVICE_NOT_FOUND)
    BG_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    BG_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    BG_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    BG_CL_ERROR(CL_OUT_OF_RESOURCES)
    BG_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    BG_CL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
    BG_CL_ERROR(CL_MEM_COPY_OVERLAP)
    BG_CL_ERROR(CL_IMAGE_FORMAT_MISMATCH)
    BG_CL_ERROR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    BG_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    BG_CL_ERROR(CL_MAP_FAILURE)
    BG_CL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    BG_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    BG_CL_ERROR(CL_COMPILE_PROGRAM_FAILURE)
    BG_CL_ERROR(CL_LINKER_NOT_AVAILABLE)
    BG_CL_ERROR(CL_LINK_PROGRAM_FAILURE)
    BG_CL_ERROR(CL_DEVICE_PARTITION_FAILED)
    BG_CL_ERROR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    BG_CL_ERROR(CL_INVALID_VALUE)
    BG_CL_ERROR(CL_INVALID_DEVICE_TYPE)
    BG_CL_ERROR(CL_INVALID_PLATFORM)
    BG_CL_ERROR(CL_INVALID_DEVICE)
    BG_CL_ERROR(CL_INVALID_CONTEXT)
    BG_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    BG_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    BG_CL_ERROR(CL_INVALID_HOST_PTR)
    BG_CL_ERROR(CL_INVALID_MEM_OBJECT)
    BG_CL_ERROR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    BG_CL_ERROR(CL_INVALID_IMAGE_SIZE)
    BG_CL_ERROR(CL_INVALID_SAMPLER)
    BG_CL_ERROR(CL_INVALID_BINARY)
    BG_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    BG_CL_ERROR(CL_INVALID_PROGRAM)
    BG_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    BG_CL_ERROR(CL_INVALID_KERNEL_NAME)
    BG_CL_ERROR(CL_INVALID_KERNEL_DEFINITION)
    BG_CL_ERROR(CL_INVALID_KERNEL)
    BG_CL_ERROR(CL_INVALID_ARG_INDEX)
    BG_CL_ERROR(CL_INVALID_ARG_VALUE)
    BG_CL_ERROR(CL_INVALID_ARG_SIZE)
    BG_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    BG_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    BG_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    BG_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    BG_CL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    BG_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    BG_CL_ERROR(CL_INVALID_EVENT)
    BG_CL_ERROR(CL_INVALID_OPERATION)
    BG_CL_ERROR(CL_INVALID_GL_OBJECT)
    BG_CL_ERROR(CL_INVALID_BUFFER_SIZE)
    BG_CL_ERROR(CL_INVALID_MIP_LEVEL)
    BG_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    BG_CL_ERROR(CL_INVALID_PROPERTY)
    BG_CL_ERROR(CL_INVALID_IMAGE_DESCRIPTOR)
    BG_CL_ERROR(CL_INVALID_COMPILER_OPTIONS)
    BG_CL_ERROR(CL_INVALID_LINKER_OPTIONS)
    BG_CL_ERROR(CL_INVALID_DEVICE_PARTITION_COUNT)
    BG_CL_ERROR(CL_PLATFORM_NOT_FOUND_KHR)
#undef BG_CL_ERROR
  }
  return "CL_UNKNOWN_ERROR";
}

Status cl_check(cl_int err, std::string_view call, std::source_location loc) {
  if (err == CL_SUCCESS) return Status();
  return Status(
      code_of(err),
      std::string(call) + " failed: " + cl_error_name(err) + " (" + std::to_string(err) + ")", loc);
}

Result<const ClApi*> load_cl_api(std::string_view path) {
  std::string p(path.empty() ? "libOpenCL.so.1" : path);
  static std::mutex mu;
  static auto* apis = new std::map<std::string, std::unique_ptr<ClApi>>();
  std::lock_guard lock(mu);
  if (auto it = apis->find(p); it != apis->end()) return it->second.get();
  ASSIGN_OR_RETURN(std::unique_ptr<ClApi> api, open_api(p));
  return apis->emplace(p, std::move(api)).first->second.get();
}

}  // namespace baregrad::runtime::cl
