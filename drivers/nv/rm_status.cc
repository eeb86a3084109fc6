#include "drivers/nv/rm_status.h"

#include "base/check.h"
#include "base/format.h"
#include "drivers/nv/classes.h"

namespace baregrad::nv {
namespace {

struct StatusEntry {
  uint32_t value;
  std::string_view name;
  std::string_view meaning;
};

constexpr StatusEntry kStatuses[] = {
#define BG_NV_STATUS_ENTRY(name, value, meaning) {value, #name, meaning},
    BG_NV_STATUS_CODES(BG_NV_STATUS_ENTRY)
#undef BG_NV_STATUS_ENTRY
};

const StatusEntry* find(uint32_t status) {
  for (const StatusEntry& e : kStatuses) {
    if (e.value == status) return &e;
  }
  return nullptr;
}

}  // namespace

std::string_view rm_status_name(uint32_t status) {
  const StatusEntry* e = find(status);
  return e == nullptr ? std::string_view() : e->name;
}

std::string rm_status_text(uint32_t status) {
  const StatusEntry* e = find(status);
  if (e == nullptr) return "unknown RM status " + hex(status);
  return std::string(e->name) + " (" + hex(status) + "): " + std::string(e->meaning);
}

StatusCode rm_status_code(uint32_t status) {
  using namespace rm_status;
  switch (status) {
    case NV_ERR_NO_MEMORY:
    case NV_ERR_INSUFFICIENT_RESOURCES:
      return StatusCode::kResourceExhausted;
    case NV_ERR_INSUFFICIENT_PERMISSIONS:
      return StatusCode::kFailedPrecondition;
    case NV_ERR_NOT_SUPPORTED:
      return StatusCode::kUnimplemented;
    case NV_ERR_TIMEOUT:
      return StatusCode::kDeadlineExceeded;
    case NV_ERR_GPU_IS_LOST:
    case NV_ERR_GPU_IN_FULLCHIP_RESET:
    case NV_ERR_GPU_NOT_FULL_POWER:
    case NV_ERR_RESET_REQUIRED:
    case NV_ERR_BUSY_RETRY:
      return StatusCode::kUnavailable;
    default:
      break;
  }
  std::string_view name = rm_status_name(status);
  if (name.starts_with("NV_ERR_INVALID_") || name == "NV_ERR_OBJECT_NOT_FOUND" ||
      name == "NV_ERR_OBJECT_TYPE_MISMATCH" || name == "NV_ERR_INSERT_DUPLICATE_NAME" ||
      name == "NV_ERR_UVM_ADDRESS_IN_USE") {
    return StatusCode::kInvalidArgument;
  }
  return StatusCode::kInternal;
}

Status rm_error(std::string call, uint32_t status, Loc loc) {
  CHECK_NE(status, rm_status::NV_OK) << "rm_error(" << call << ") with NV_OK";
  return Status(rm_status_code(status), std::move(call) + ": " + rm_status_text(status), loc);
}

}  // namespace baregrad::nv
