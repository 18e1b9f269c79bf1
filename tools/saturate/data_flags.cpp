#include "data_flags.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate::cli {

void add_data_flags(CLI::App& app, DataOptions& f) {
  auto* data = add_option_flag(app, "data", f.data);
  if (f.data.empty()) data->description(data->get_description() + " (default: none, synthetic batches made on the device)");
  add_option_flag(app, "workers", f.workers)->check(CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_workers(text);
          return "";
        } catch (const UsageError& e) {
          return e.what();
        }
      },
      "N|auto"));
  add_option_flag(app, "prefetch", f.prefetch);
  add_option_flag(app, "drop_last", f.drop_last);
  add_option_flag(app, "skip_bad_samples", f.skip_bad_samples);
  add_option_flag(app, "no_augment", f.no_augment);
  add_option_flag(app, "val_fraction", f.val_fraction);
}

}  // namespace saturate::cli
