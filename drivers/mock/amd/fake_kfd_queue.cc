// FakeKfd queues (doorbell slots) and events (create, set, wait with the progress pump, the
// fake GPU's interrupts and exceptions).

#include <bit>
#include <cerrno>
#include <chrono>
#include <thread>

#include "base/format.h"
#include "drivers/mock/amd/fake_kfd_state.h"

namespace baregrad::mock {

using namespace amd;

int FakeKfd::State::create_queue(KfdIoctlCreateQueueArgs& a) {
  std::string call = "CREATE_QUEUE of type " + std::to_string(a.queue_type);
  KfdGpuState* g = gpu_by_id(a.gpu_id);
  if (g == nullptr || g->acquired_fd < 0) {
    return refuse(EINVAL, call + ": gpu_id " + hex(a.gpu_id) + " unknown or without a VM");
  }
  int gpu = static_cast<int>(g - gpus.data());
  if (a.queue_type > kKfdIocQueueTypeComputeAql) return refuse(EINVAL, call + ": not modelled");
  if (!std::has_single_bit(a.ring_size) || (a.queue_percentage & 0xff) > kKfdMaxQueuePercentage ||
      a.queue_priority > kKfdMaxQueuePriority) {
    return refuse(EINVAL, call + ": ring size " + hex(a.ring_size) + ", percentage " +
                              hex(a.queue_percentage) + ", priority " +
                              std::to_string(a.queue_priority));
  }
  // NOTE: KFD (kfd_queue_acquire_buffers) requires the queue's buffers to be GPU-mapped BOs.
  const std::pair<uint64_t, uint64_t> buffers[] = {
      {a.ring_base_address, a.ring_size},
      {a.read_pointer_address, 8},
      {a.write_pointer_address, 8},
      {a.eop_buffer_address, a.eop_buffer_size},
      {a.ctx_save_restore_address, a.ctx_save_restore_size},
  };
  for (size_t i = 0; i < std::size(buffers); ++i) {
    auto [va, len] = buffers[i];
    if (i >= 3 && va == 0) continue;  // EOP and CWSR are optional
    if (mapped_at(va, len, gpu) == nullptr) {
      return refuse(EINVAL, call + ": [" + hex(va) + ", +" + hex(len) + ") is not GPU-mapped");
    }
  }
  size_t slot = 0;
  while (slot < g->doorbell_used.size() && g->doorbell_used[slot]) ++slot;
  if (slot == g->doorbell_used.size()) return refuse(ENOMEM, call + ": no doorbell left");
  uint32_t id = 0;
  while (queues.count(id) != 0) ++id;
  g->doorbell_used[slot] = true;
  a.queue_id = id;
  a.doorbell_offset = kKfdMmapTypeDoorbell | (uint64_t{a.gpu_id} << kKfdMmapGpuIdShift) | slot * 8;
  KfdQueueState q;
  q.info = FakeKfdQueue{gpu,
                        id,
                        a.queue_type,
                        a.ring_base_address,
                        a.ring_size,
                        a.read_pointer_address,
                        a.write_pointer_address,
                        a.eop_buffer_address,
                        a.eop_buffer_size,
                        a.ctx_save_restore_address,
                        a.ctx_save_restore_size,
                        a.ctl_stack_size,
                        a.queue_percentage,
                        a.queue_priority,
                        a.doorbell_offset,
                        reinterpret_cast<uint64_t*>(g->doorbells->host + slot * 8),
                        next_queue_serial++};
  q.last_doorbell = *q.info.doorbell_host;
  queues.emplace(id, std::move(q));
  return 0;
}

int FakeKfd::State::destroy_queue(KfdIoctlDestroyQueueArgs& a) {
  auto it = queues.find(a.queue_id);
  if (it == queues.end())
    return refuse(EINVAL, "DESTROY_QUEUE: no queue " + std::to_string(a.queue_id));
  KfdGpuState& g = gpus[it->second.info.gpu];
  g.doorbell_used[(it->second.info.doorbell_offset & (kKfdDoorbellBytes - 1)) / 8] = false;
  queues.erase(it);
  return 0;
}

int FakeKfd::State::create_event(KfdIoctlCreateEventArgs& a) {
  std::string call = "CREATE_EVENT of type " + std::to_string(a.event_type);
  if (a.event_type != kKfdIocEventSignal && a.event_type != kKfdIocEventHwException &&
      a.event_type != kKfdIocEventMemory) {
    return refuse(EINVAL, call + ": not modelled");
  }
  if (a.event_page_offset != 0) {
    if (event_page_set) return refuse(EINVAL, call + ": the event page is already set");
    if (allocs.count(a.event_page_offset) == 0) {
      return refuse(EINVAL, call + ": no event page handle " + hex(a.event_page_offset));
    }
    event_page_set = true;
  }
  // Signal events take the lowest free slot (id == slot); others ids from the limit up.
  bool signal = a.event_type == kKfdIocEventSignal;
  uint32_t id = signal ? 0 : kKfdSignalEventLimit;
  while (events.count(id) != 0) ++id;
  if (signal && id >= kKfdSignalEventLimit) return refuse(ENOSPC, call + ": no slot left");
  KfdEventState e;
  e.info = FakeKfdEvent{id, a.event_type, a.auto_reset != 0, false, 1};
  events.emplace(id, e);
  a.event_id = id;
  a.event_slot_index = signal ? id : 0;
  a.event_trigger_data = signal ? id : 0;
  return 0;
}

int FakeKfd::State::destroy_event(KfdIoctlDestroyEventArgs& a) {
  if (events.erase(a.event_id) == 0) {
    return refuse(EINVAL, "DESTROY_EVENT: no event " + std::to_string(a.event_id));
  }
  return 0;
}

int FakeKfd::State::set_event(uint32_t id) {
  auto it = events.find(id);
  if (it == events.end() || it->second.info.type != kKfdIocEventSignal) {
    return refuse(EINVAL, "SET_EVENT: no signal event " + std::to_string(id));
  }
  it->second.info.signaled = true;
  ++it->second.info.age;
  return 0;
}

int FakeKfd::State::wait_events(KfdIoctlWaitEventsArgs& a,
                                std::unique_lock<std::mutex>& lock,
                                const std::function<void()>& pump) {
  if (a.num_events == 0 || a.events_ptr == 0) return refuse(EINVAL, "WAIT_EVENTS: no events");
  if (a.timeout == kKfdEventTimeoutInfinite) {
    return refuse(EINVAL, "WAIT_EVENTS: an infinite timeout would hang the test");
  }
  auto* data = reinterpret_cast<KfdEventData*>(a.events_ptr);
  std::vector<bool> activated(a.num_events);
  for (uint32_t i = 0; i < a.num_events; ++i) {
    auto it = events.find(data[i].event_id);
    if (it == events.end())
      return refuse(EINVAL, "WAIT_EVENTS: no event " + std::to_string(data[i].event_id));
    uint64_t age = data[i].signal_event_data.last_event_age;  // KFD 1.14: a newer age fires
    activated[i] =
        it->second.info.type == kKfdIocEventSignal && age != 0 && age != it->second.info.age;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.timeout);
  for (;;) {
    uint32_t fired = 0;
    for (uint32_t i = 0; i < a.num_events; ++i) {
      auto it = events.find(data[i].event_id);
      if (it == events.end()) {  // destroyed during the wait
        a.wait_result = kKfdIocWaitResultFail;
        return 0;
      }
      FakeKfdEvent& e = it->second.info;
      if (!activated[i] && e.signaled) {
        activated[i] = true;
        e.signaled = !e.auto_reset;
      }
      fired += activated[i] ? 1 : 0;
    }
    if (fired == a.num_events || (fired > 0 && a.wait_for_all == 0)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      a.wait_result = kKfdIocWaitResultTimeout;
      return 0;
    }
    lock.unlock();  // the real KFD sleeps here; the fake lets the fake GPU run instead
    pump();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lock.lock();
  }
  for (uint32_t i = 0; i < a.num_events; ++i) {
    const KfdEventState& e = events.at(data[i].event_id);
    if (!activated[i]) continue;
    if (e.info.type == kKfdIocEventMemory) data[i].memory_exception_data = e.memory;
    if (e.info.type == kKfdIocEventHwException) data[i].hw_exception_data = e.hw;
    if (e.info.type == kKfdIocEventSignal && data[i].signal_event_data.last_event_age != 0) {
      data[i].signal_event_data.last_event_age = e.info.age;
    }
  }
  a.wait_result = kKfdIocWaitResultComplete;
  return 0;
}

Status FakeKfd::signal_event(uint32_t id) {
  std::lock_guard lock(s_->mu);
  if (s_->set_event(id) != 0) return not_found("fake KFD: no signal event " + std::to_string(id));
  return Status();
}

void FakeKfd::raise_memory_exception(int gpu, uint64_t va, const KfdMemoryExceptionFailure& f) {
  std::lock_guard lock(s_->mu);
  for (auto& [id, e] : s_->events) {
    if (e.info.type != kKfdIocEventMemory) continue;
    e.memory = KfdHsaMemoryExceptionData{f, va, s_->gpus.at(gpu).gpu_id, kKfdMemErrNoRas};
    e.info.signaled = true;
  }
}

void FakeKfd::raise_hw_exception(int gpu, uint32_t reset_type, uint32_t reset_cause, bool lost) {
  std::lock_guard lock(s_->mu);
  for (auto& [id, e] : s_->events) {
    if (e.info.type != kKfdIocEventHwException) continue;
    e.hw = KfdHsaHwExceptionData{reset_type, reset_cause, lost ? 1u : 0u, s_->gpus.at(gpu).gpu_id};
    e.info.signaled = true;
  }
}

}  // namespace baregrad::mock
