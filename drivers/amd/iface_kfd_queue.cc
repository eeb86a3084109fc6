// KfdIface queues (and their doorbell page) and events (create, set, wait, exception data).

#include <sys/mman.h>

#include <bit>
#include <utility>
#include <vector>

#include "base/format.h"
#include "base/log.h"
#include "drivers/amd/iface_kfd.h"

namespace baregrad::amd {
namespace {

std::string flag_list(std::initializer_list<std::pair<bool, const char*>> flags) {
  std::string out;
  for (const auto& [on, name] : flags) {
    if (on) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out.empty() ? "no failure bits" : out;
}

}  // namespace

std::string_view kfd_queue_type_name(KfdQueueType type) {
  switch (type) {
    case KfdQueueType::kCompute:
      return "compute (PM4)";
    case KfdQueueType::kSdma:
      return "SDMA";
    case KfdQueueType::kComputeAql:
      return "compute (AQL)";
  }
  return "?";
}

std::string KfdMemoryException::to_string() const {
  return "GPU memory fault at " + hex(va) + " (gpu_id " + hex(gpu_id) + "): " +
         flag_list({{not_present, "not present"},
                    {read_only, "write to read-only"},
                    {no_execute, "execute of no-execute"},
                    {imprecise, "imprecise"}}) +
         (error_type != kKfdMemErrNoRas ? ", RAS error type " + std::to_string(error_type) : "");
}

std::string KfdHwException::to_string() const {
  return "GPU reset (gpu_id " + hex(gpu_id) +
         "): " + (reset_type == kKfdHwExceptionWholeGpuReset ? "whole GPU" : "per engine") +
         ", cause " + (reset_cause == kKfdHwExceptionGpuHang ? "GPU hang" : "ECC") +
         (memory_lost ? ", memory lost" : "");
}

// ---- KfdQueue ----------------------------------------------------------------------------------

KfdQueue::KfdQueue(KfdQueue&& o) noexcept
    : iface_(std::exchange(o.iface_, nullptr)),
      id_(o.id_),
      type_(o.type_),
      doorbell_offset_(o.doorbell_offset_),
      doorbell_(o.doorbell_),
      doorbell_address_(o.doorbell_address_) {}

KfdQueue& KfdQueue::operator=(KfdQueue&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    iface_ = std::exchange(o.iface_, nullptr);
    id_ = o.id_, type_ = o.type_, doorbell_offset_ = o.doorbell_offset_;
    doorbell_ = o.doorbell_, doorbell_address_ = o.doorbell_address_;
  }
  return *this;
}

KfdQueue::~KfdQueue() {
  Status s = destroy();
  if (!s.ok()) BG_LOG(1) << "amd: " << s;
}

Status KfdQueue::destroy() {
  if (iface_ == nullptr) return Status();
  return std::exchange(iface_, nullptr)->destroy_queue(id_);
}

Status KfdIface::destroy_queue(uint32_t id) {
  KfdIoctlDestroyQueueArgs a{id, 0};
  return in_context("destroying KFD queue " + std::to_string(id) + " on " + where(),
                    kfd_ioctl(kAmdkfdIocDestroyQueue, &a, "AMDKFD_IOC_DESTROY_QUEUE"));
}

Result<hcq::Mmio> KfdIface::doorbell_page(uint64_t doorbell_offset) {
  std::lock_guard lock(mu_);
  uint64_t base = doorbell_offset & ~kKfdDoorbellPageMask;
  if (!doorbells_.valid()) {
    ASSIGN_OR_RETURN(doorbells_,
                     hcq::map(*os_, nullptr, kKfdDoorbellPageBytes, PROT_READ | PROT_WRITE,
                              MAP_SHARED, kfd_.get(), static_cast<off_t>(base)));
    doorbells_base_ = base;
  } else if (base != doorbells_base_) {
    return internal("KFD gave doorbell offset " + hex(doorbell_offset) +
                    " outside the doorbell page mapped at offset " + hex(doorbells_base_));
  }
  return hcq::Mmio(doorbells_.get(), kKfdDoorbellPageBytes);
}

Result<KfdQueue> KfdIface::create_queue(const KfdQueueRequest& r) {
  std::string what = "KFD " + std::string(kfd_queue_type_name(r.type)) + " queue on " + where();
  if (r.ring == nullptr || !r.ring->valid()) return invalid_argument(what + ": no ring");
  if (!std::has_single_bit(r.ring->size()) || r.ring->size() > UINT32_MAX) {
    return invalid_argument(what + ": ring of " + hex(r.ring->size()) +
                            " bytes (KFD takes a power of two below 4 GiB)");
  }
  if (r.priority > kKfdMaxQueuePriority || r.xcc > 0xff) {
    return invalid_argument(what + ": priority " + std::to_string(r.priority) + ", XCC " +
                            std::to_string(r.xcc) + " (limits 15, 255)");
  }
  KfdIoctlCreateQueueArgs a{};
  a.ring_base_address = r.ring->va();
  a.ring_size = static_cast<uint32_t>(r.ring->size());
  a.write_pointer_address = r.write_pointer_address;
  a.read_pointer_address = r.read_pointer_address;
  a.gpu_id = gpu_id();
  a.queue_type = static_cast<uint32_t>(r.type);
  a.queue_percentage = kKfdMaxQueuePercentage | (r.xcc << 8);
  a.queue_priority = r.priority;
  if (r.eop != nullptr) a.eop_buffer_address = r.eop->va(), a.eop_buffer_size = r.eop->size();
  if (r.ctx_save_restore != nullptr) a.ctx_save_restore_address = r.ctx_save_restore->va();
  a.ctx_save_restore_size = r.ctx_save_restore_size;
  a.ctl_stack_size = r.ctl_stack_size;
  RETURN_IF_ERROR(
      in_context(what, kfd_ioctl(kAmdkfdIocCreateQueue, &a, "AMDKFD_IOC_CREATE_QUEUE")));
  KfdQueue q;
  q.iface_ = this;  // destroyed again if what follows fails
  q.id_ = a.queue_id;
  q.type_ = r.type;
  q.doorbell_offset_ = a.doorbell_offset;
  uint64_t in_page = a.doorbell_offset & kKfdDoorbellPageMask;
  if (in_page % 8 != 0) {
    return internal(what + ": KFD gave a misaligned doorbell offset " + hex(a.doorbell_offset));
  }
  Result<hcq::Mmio> page = doorbell_page(a.doorbell_offset);
  if (!page.ok()) return in_context(what + ": mapping the doorbell page", page.status());
  q.doorbell_ = hcq::Doorbell(*page, in_page, 64);
  q.doorbell_address_ = static_cast<uint8_t*>(page->base()) + in_page;
  return q;
}

// ---- KfdEvent ----------------------------------------------------------------------------------

KfdEvent::KfdEvent(KfdEvent&& o) noexcept
    : iface_(std::exchange(o.iface_, nullptr)),
      id_(o.id_),
      slot_index_(o.slot_index_),
      trigger_data_(o.trigger_data_),
      type_(o.type_),
      mailbox_va_(o.mailbox_va_) {}

KfdEvent& KfdEvent::operator=(KfdEvent&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    iface_ = std::exchange(o.iface_, nullptr);
    id_ = o.id_, slot_index_ = o.slot_index_, trigger_data_ = o.trigger_data_;
    type_ = o.type_, mailbox_va_ = o.mailbox_va_;
  }
  return *this;
}

KfdEvent::~KfdEvent() {
  Status s = destroy();
  if (!s.ok()) BG_LOG(1) << "amd: " << s;
}

Status KfdEvent::destroy() {
  if (iface_ == nullptr) return Status();
  return std::exchange(iface_, nullptr)->destroy_event(id_);
}

Status KfdIface::destroy_event(uint32_t id) {
  KfdIoctlDestroyEventArgs a{id, 0};
  return in_context("destroying KFD event " + std::to_string(id) + " on " + where(),
                    kfd_ioctl(kAmdkfdIocDestroyEvent, &a, "AMDKFD_IOC_DESTROY_EVENT"));
}

Result<KfdEvent> KfdIface::create_event(KfdEventType type, bool auto_reset) {
  std::string what =
      "KFD event of type " + std::to_string(static_cast<uint32_t>(type)) + " on " + where();
  KfdIoctlCreateEventArgs a{};
  a.event_type = static_cast<uint32_t>(type);
  a.auto_reset = auto_reset ? 1 : 0;
  std::lock_guard lock(mu_);
  std::lock_guard process_lock(KfdProcess::mu());
  KfdProcess& p = KfdProcess::of(*os_);
  KfdMemory page;  // the process's first event: the event page it passes
  if (p.event_page_va == 0) {
    ASSIGN_OR_RETURN(page, alloc(kKfdEventPageBytes, KfdMemKind::kGtt, true));
    a.event_page_offset = page.handle();
  } else if (!p.event_page_gpus.contains(gpu_id())) {
    // Another GPU of the process: the page's GPU mapping on this one too (tinygrad maps its
    // class-wide event page into each GPU it opens).
    RETURN_IF_ERROR(in_context(
        what + ": mapping the process's event page at " + hex(p.event_page_va) + " into this GPU",
        map_to_gpu(p.event_page_handle)));
    p.event_page_gpus.insert(gpu_id());
  }
  Status s = kfd_ioctl(kAmdkfdIocCreateEvent, &a, "AMDKFD_IOC_CREATE_EVENT");
  if (!s.ok()) return in_context(what, s);  // a page not passed is freed
  if (page.valid()) {
    p.event_page_va = page.va();
    p.event_page_handle = page.handle();
    p.event_page_gpus.insert(gpu_id());
    page.pin();  // KFD holds it for the process
  }
  event_page_va_ = p.event_page_va;
  KfdEvent e;
  e.iface_ = this;
  e.id_ = a.event_id;
  e.type_ = type;
  e.slot_index_ = a.event_slot_index;
  e.trigger_data_ = a.event_trigger_data;
  if (type == KfdEventType::kSignal) {
    if (a.event_slot_index >= kKfdSignalEventLimit) {
      return internal(what + ": KFD gave slot " + std::to_string(a.event_slot_index));
    }
    e.mailbox_va_ = event_page_va_ + uint64_t{a.event_slot_index} * 8;
  }
  return e;
}

uint64_t KfdIface::event_page_va() const {
  std::lock_guard lock(mu_);
  return event_page_va_;
}

Status KfdIface::set_event(const KfdEvent& event) {
  KfdIoctlSetEventArgs a{event.id(), 0};
  return in_context("setting KFD event " + std::to_string(event.id()) + " on " + where(),
                    kfd_ioctl(kAmdkfdIocSetEvent, &a, "AMDKFD_IOC_SET_EVENT"));
}

Result<KfdWaitResult> KfdIface::wait(std::span<const KfdEvent* const> events, uint32_t timeout_ms) {
  std::string what = "KFD wait for " + std::to_string(events.size()) + " events on " + where();
  if (events.empty()) return invalid_argument(what + ": no events");
  if (timeout_ms > kKfdMaxFiniteTimeoutMs) {
    return invalid_argument(what + ": timeout " + std::to_string(timeout_ms) +
                            " ms is unbounded for KFD (limit " +
                            std::to_string(kKfdMaxFiniteTimeoutMs) + ")");
  }
  std::vector<KfdEventData> data(events.size());  // last_event_age 0: pre-1.14 semantics
  for (size_t i = 0; i < events.size(); ++i) data[i].event_id = events[i]->id();
  KfdIoctlWaitEventsArgs a{};
  a.events_ptr = reinterpret_cast<uint64_t>(data.data());
  a.num_events = static_cast<uint32_t>(data.size());
  a.timeout = timeout_ms;
  RETURN_IF_ERROR(in_context(what, kfd_ioctl(kAmdkfdIocWaitEvents, &a, "AMDKFD_IOC_WAIT_EVENTS")));
  if (a.wait_result == kKfdIocWaitResultFail) {
    return aborted(what + ": KFD_IOC_WAIT_RESULT_FAIL (an event was destroyed during the wait)");
  }
  KfdWaitResult r;
  r.timed_out = a.wait_result == kKfdIocWaitResultTimeout;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i]->type() == KfdEventType::kMemory && data[i].memory_exception_data.gpu_id != 0) {
      const KfdHsaMemoryExceptionData& m = data[i].memory_exception_data;
      r.memory = KfdMemoryException{m.gpu_id,
                                    m.va,
                                    m.failure.not_present != 0,
                                    m.failure.read_only != 0,
                                    m.failure.no_execute != 0,
                                    m.failure.imprecise != 0,
                                    m.error_type};
    }
    if (events[i]->type() == KfdEventType::kHwException && data[i].hw_exception_data.gpu_id != 0) {
      const KfdHsaHwExceptionData& h = data[i].hw_exception_data;
      r.hw = KfdHwException{h.gpu_id, h.reset_type, h.reset_cause, h.memory_lost != 0};
    }
  }
  return r;
}

}  // namespace baregrad::amd
