#include "saturate/core/oom.h"

#include <cstring>
#include <string>

#include <c10/util/Exception.h>

namespace saturate {

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const char* what = e.what();
  static const char* const kMarks[] = {"out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
                                       "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE", "CUDNN_STATUS_ALLOC_FAILED",
                                       "can't allocate memory", "std::bad_alloc"};
  for (const char* mark : kMarks)
    if (std::strstr(what, mark)) return true;
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
}

}  // namespace saturate
