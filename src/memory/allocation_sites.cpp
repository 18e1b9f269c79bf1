#include "memory/allocation_sites.h"

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <ATen/record_function.h>

#include "saturate/core/cpu_budget_allocator.h"

namespace saturate {
namespace {

/// Interned names live until the process ends: the event log keeps pointers to them.
const char* intern(std::string s) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(std::move(s)).first->c_str();
}

struct Frame {
  const char* outer;  ///< the outermost operator of the stack
  const char* inner;  ///< the innermost one that is not a factory op
  const char* label;  ///< "outer > inner" (or "outer")
};
thread_local std::vector<Frame> t_stack;

std::string short_name(std::string_view name) {
  constexpr std::string_view kBackward = "autograd::engine::evaluate_function: ";
  if (name.substr(0, kBackward.size()) == kBackward) return "backward: " + std::string(name.substr(kBackward.size()));
  return std::string(name);
}

bool is_factory(std::string_view name) { return name.substr(0, 11) == "aten::empty"; }

std::unique_ptr<at::ObserverContext> push(const at::RecordFunction& fn) {
  const std::string name = short_name(fn.name());
  Frame f;
  if (t_stack.empty()) {
    f.outer = f.inner = f.label = intern(name);
  } else {
    const Frame& parent = t_stack.back();
    f.outer = parent.outer;
    // a backward node's own RecordFunction repeats the node's name: keep the engine's frame
    const bool repeat = parent.inner == "backward: " + name;
    f.inner = is_factory(name) || repeat ? parent.inner : intern(name);
    f.label = f.inner == parent.inner ? parent.label : intern(std::string(f.outer) + " > " + f.inner);
  }
  t_stack.push_back(f);
  set_cpu_allocation_site(f.label);
  return nullptr;
}

void pop(const at::RecordFunction&, at::ObserverContext*) {
  if (!t_stack.empty()) t_stack.pop_back();
  set_cpu_allocation_site(t_stack.empty() ? nullptr : t_stack.back().label);
}

}  // namespace

AllocationSiteTracking::AllocationSiteTracking() {
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(&push, &pop).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

AllocationSiteTracking::~AllocationSiteTracking() {
  at::removeCallback(handle_);
  // threads that were inside an operator when tracking stopped keep a stale frame until their
  // next push; the label pointers stay valid (interned), so the worst case is a wrong name.
  t_stack.clear();
  set_cpu_allocation_site(nullptr);
}

}  // namespace saturate
