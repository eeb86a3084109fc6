// RM status codes (NV_STATUS, src/common/sdk/nvidia/inc/nvstatuscodes.h; the values used here
// are the same from 570.86.15 to 595.45.04): names, our one-line meanings, and how a failing
// call becomes a baregrad Status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baregrad::nv {

// name, value, meaning. One table; the constants and the lookups derive from it.
#define BG_NV_STATUS_CODES(X)                                                   \
  X(NV_OK, 0x00, "success")                                                     \
  X(NV_ERR_BUSY_RETRY, 0x03, "the driver is busy; retry")                       \
  X(NV_ERR_GPU_IS_LOST, 0x0f, "the GPU fell off the bus")                       \
  X(NV_ERR_GPU_IN_FULLCHIP_RESET, 0x10, "the GPU is in a full-chip reset")      \
  X(NV_ERR_GPU_NOT_FULL_POWER, 0x11, "the GPU is not at full power")            \
  X(NV_ERR_ILLEGAL_ACTION, 0x16, "action not allowed in this state")            \
  X(NV_ERR_IN_USE, 0x17, "resource in use")                                     \
  X(NV_ERR_INSERT_DUPLICATE_NAME, 0x19, "handle already in use")                \
  X(NV_ERR_INSUFFICIENT_RESOURCES, 0x1a, "out of a resource other than memory") \
  X(NV_ERR_INSUFFICIENT_PERMISSIONS, 0x1b, "insufficient permissions")          \
  X(NV_ERR_INVALID_ADDRESS, 0x1e, "invalid address")                            \
  X(NV_ERR_INVALID_ARGUMENT, 0x1f, "invalid argument")                          \
  X(NV_ERR_INVALID_CLASS, 0x22, "invalid class")                                \
  X(NV_ERR_INVALID_CLIENT, 0x23, "invalid client")                              \
  X(NV_ERR_INVALID_COMMAND, 0x24, "invalid command")                            \
  X(NV_ERR_INVALID_DATA, 0x25, "invalid data")                                  \
  X(NV_ERR_INVALID_DEVICE, 0x26, "invalid device")                              \
  X(NV_ERR_INVALID_FLAGS, 0x29, "invalid flags")                                \
  X(NV_ERR_INVALID_LIMIT, 0x2e, "invalid limit")                                \
  X(NV_ERR_INVALID_OBJECT, 0x31, "invalid object")                              \
  X(NV_ERR_INVALID_OBJECT_HANDLE, 0x33, "invalid object handle")                \
  X(NV_ERR_INVALID_OBJECT_NEW, 0x34, "invalid new object handle")               \
  X(NV_ERR_INVALID_OBJECT_PARENT, 0x36, "invalid parent object")                \
  X(NV_ERR_INVALID_OFFSET, 0x37, "invalid offset")                              \
  X(NV_ERR_INVALID_OWNER, 0x39, "invalid owner")                                \
  X(NV_ERR_INVALID_PARAM_STRUCT, 0x3a, "invalid parameter struct")              \
  X(NV_ERR_INVALID_POINTER, 0x3d, "invalid pointer")                            \
  X(NV_ERR_INVALID_REQUEST, 0x3f, "invalid request")                            \
  X(NV_ERR_INVALID_STATE, 0x40, "invalid state")                                \
  X(NV_ERR_NO_MEMORY, 0x51, "out of memory")                                    \
  X(NV_ERR_NOT_READY, 0x55, "not ready")                                        \
  X(NV_ERR_NOT_SUPPORTED, 0x56, "not supported")                                \
  X(NV_ERR_OBJECT_NOT_FOUND, 0x57, "object not found")                          \
  X(NV_ERR_OBJECT_TYPE_MISMATCH, 0x58, "objects of the wrong types")            \
  X(NV_ERR_OPERATING_SYSTEM, 0x59, "operating system error")                    \
  X(NV_ERR_RESET_REQUIRED, 0x62, "the GPU needs a reset")                       \
  X(NV_ERR_STATE_IN_USE, 0x63, "state in use")                                  \
  X(NV_ERR_TIMEOUT, 0x65, "timed out")                                          \
  X(NV_ERR_UVM_ADDRESS_IN_USE, 0x68, "UVM address range already in use")        \
  X(NV_ERR_MEMORY_ERROR, 0x72, "memory error")                                  \
  X(NV_ERR_GENERIC, 0xffff, "generic failure")

namespace rm_status {
#define BG_NV_STATUS_CONSTANT(name, value, meaning) constexpr uint32_t name = value;
BG_NV_STATUS_CODES(BG_NV_STATUS_CONSTANT)
#undef BG_NV_STATUS_CONSTANT
}  // namespace rm_status

// "NV_ERR_INVALID_ARGUMENT", or "" for a code not in the table.
std::string_view rm_status_name(uint32_t status);
// "NV_ERR_INVALID_ARGUMENT (0x1f): invalid argument"; "unknown RM status 0x1234" otherwise.
std::string rm_status_text(uint32_t status);
// The baregrad code for a failed RM call: NO_MEMORY -> ResourceExhausted, INSUFFICIENT_PERMISSIONS
// -> FailedPrecondition, NOT_SUPPORTED -> Unimplemented, TIMEOUT -> DeadlineExceeded, GPU lost or
// in reset -> Unavailable, INVALID_* -> InvalidArgument, anything else Internal.
StatusCode rm_status_code(uint32_t status);
// An error Status "<call>: <rm_status_text>" with rm_status_code(status); CHECKs status != NV_OK.
Status rm_error(std::string call, uint32_t status, Loc loc = Loc::current());

}  // namespace baregrad::nv
