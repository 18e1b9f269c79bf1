#include "memory/snapshot.h"

#include <unordered_map>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickler.h>

namespace saturate {
namespace {

using Dict = c10::impl::GenericDict;
using List = c10::impl::GenericList;

Dict dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }
List list() { return List(c10::AnyType::get()); }

c10::IValue address(uint64_t a) { return c10::IValue(static_cast<int64_t>(a)); }

/// A trace entry as the CUDA caching allocator records one (no stack frames).
Dict entry(const char* action, uint64_t addr, int64_t bytes, int64_t time_us) {
  Dict e = dict();
  e.insert("action", std::string(action));
  e.insert("addr", address(addr));
  e.insert("size", bytes);
  e.insert("stream", int64_t{0});
  e.insert("time_us", time_us);
  e.insert("frames", list());
  return e;
}

Dict segment(uint64_t addr, int64_t bytes) {
  Dict block = dict();
  block.insert("address", address(addr));
  block.insert("size", bytes);
  block.insert("requested_size", bytes);
  block.insert("state", std::string("active_allocated"));
  block.insert("frames", list());
  List blocks = list();
  blocks.push_back(block);
  Dict s = dict();
  s.insert("device", int64_t{0});
  s.insert("address", address(addr));
  s.insert("total_size", bytes);
  s.insert("allocated_size", bytes);
  s.insert("active_size", bytes);
  s.insert("requested_size", bytes);
  s.insert("stream", int64_t{0});
  s.insert("segment_type", std::string(bytes >= (int64_t{1} << 20) ? "large" : "small"));
  s.insert("is_expandable", false);
  s.insert("frames", list());
  s.insert("blocks", blocks);
  return s;
}

}  // namespace

std::string memory_snapshot_pickle(const Timeline& t) {
  List segments = list();
  std::unordered_map<uint64_t, int64_t> live;  // address -> bytes, to size each free
  for (const auto& [addr, bytes] : t.live_at_start) {
    segments.push_back(segment(addr, bytes));
    live[addr] = bytes;
  }
  List trace = list();
  for (const MemoryEvent& e : t.events) {
    const int64_t us = (e.time_ns - t.start_time_ns) / 1000;
    if (e.kind == MemoryEvent::kAlloc) {
      live[e.address] = e.bytes;
      trace.push_back(entry("alloc", e.address, e.bytes, us));
    } else if (e.kind == MemoryEvent::kFree) {
      const auto it = live.find(e.address);
      const int64_t bytes = it != live.end() ? it->second : e.bytes;
      if (it != live.end()) live.erase(it);
      trace.push_back(entry("free_requested", e.address, bytes, us));
      trace.push_back(entry("free_completed", e.address, bytes, us));
    } else {
      Dict oom = entry("oom", 0, e.bytes, us);
      oom.insert("device_free", int64_t{0});
      trace.push_back(oom);
    }
  }
  List traces = list();
  traces.push_back(trace);
  Dict settings = dict();
  settings.insert("source", t.source);  // where saturate recorded it (not a CUDA allocator setting)
  Dict snapshot = dict();
  snapshot.insert("segments", segments);
  snapshot.insert("device_traces", traces);
  snapshot.insert("allocator_settings", settings);
  std::string out;
  torch::jit::Pickler pickler([&out](const char* data, size_t size) { out.append(data, size); }, nullptr, nullptr,
                              nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(snapshot);
  pickler.stop();
  return out;
}

}  // namespace saturate
